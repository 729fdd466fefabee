package convlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/convkit/convkit/internal/rawjson"
)

// An answer's stream (docs/FORMAT.md, "The answer's stream"): every chunk
// the model sent, with its time, stored as records, runs of deltas packed.

// ErrStream is wrapped by an answer whose stream cannot be assembled.
var ErrStream = errors.New("the model call's stream does not assemble into an answer")

// FinishReason is why a model call's stream ended: Kind one of FinishStop,
// FinishToolCalls, FinishMaxTokens (cut off at the output limit), or
// FinishError or FinishAborted with the Failure.
type FinishReason struct {
	Kind    string      `json:"kind"`
	Failure *LLMFailure `json:"failure,omitempty"`
}

// streamRun is one record of a stream being built.
type streamRun struct {
	typ   string // text-chunks, reasoning-chunks, tool-call-chunks, chunk
	index int
	time0 int64
	last  int64 // the time of the run's last member
	// dt and texts are the run's gaps and pieces, as JSON array elements
	dt, texts []byte
	id        string
	name      *string
	chunk     []byte // a raw chunk
}

// Stream is a model call's stream as it arrives: each method takes one
// chunk and its time (Unix ms). Records gives the stream as stored;
// Content, Usage and Finish what it assembles into.
type Stream struct {
	runs []streamRun
	// assembled blocks, in first-seen index order
	order  []int
	blocks map[int]*asmBlock
	usage  *Usage
	finish *FinishReason
	err    error
}

// asmBlock is one block of the answer as its chunks assemble it.
type asmBlock struct {
	typ   string
	text  strings.Builder
	id    string
	name  string
	fixed []byte // a block-end's block, verbatim
}

func (s *Stream) block(index int, typ string) *asmBlock {
	if s.blocks == nil {
		s.blocks = map[int]*asmBlock{}
	}
	b := s.blocks[index]
	if b == nil {
		b = &asmBlock{typ: typ}
		s.blocks[index] = b
		s.order = append(s.order, index)
	} else if b.fixed == nil && b.typ != typ && s.err == nil {
		s.err = fmt.Errorf("%w: a %s delta at index %d, which holds a %s block", ErrStream, typ, index, b.typ)
	}
	return b
}

func (s *Stream) badIndex(index int) bool {
	if index < 0 && s.err == nil {
		s.err = fmt.Errorf("%w: index %d is negative", ErrStream, index)
	}
	return index < 0
}

func (s *Stream) raw(ms int64, chunk []byte) {
	s.runs = append(s.runs, streamRun{typ: "chunk", time0: ms, chunk: chunk})
}

// textDelta adds a text or reasoning delta (kind "text" or "reasoning").
func (s *Stream) textDelta(kind string, ms int64, index int, text string) {
	if s.badIndex(index) {
		return
	}
	if b := s.block(index, kind); b.fixed == nil {
		b.text.WriteString(text)
	}
	s.delta(streamRun{typ: kind + "-chunks", index: index, time0: ms}, text)
}

// delta adds text to the last run when it is run's kind, else starts run.
func (s *Stream) delta(run streamRun, text string) {
	if n := len(s.runs); n > 0 {
		r := &s.runs[n-1]
		if r.typ == run.typ && r.index == run.index && r.id == run.id && (r.name == nil) == (run.name == nil) && (run.name == nil || *r.name == *run.name) {
			if len(r.dt) > 0 {
				r.dt = append(r.dt, ',')
			}
			r.dt = strconv.AppendInt(r.dt, run.time0-r.last, 10)
			r.texts = rawjson.AppendString(append(r.texts, ','), text)
			r.last = run.time0
			return
		}
	}
	run.last, run.texts = run.time0, rawjson.AppendString(nil, text)
	s.runs = append(s.runs, run)
}

// Text adds a text delta of the block at index.
func (s *Stream) Text(ms int64, index int, text string) { s.textDelta(BlockText, ms, index, text) }

// Reasoning adds a reasoning delta of the block at index.
func (s *Stream) Reasoning(ms int64, index int, text string) {
	s.textDelta(BlockReasoning, ms, index, text)
}

// ToolCall adds a delta of the tool call at index: its id, its name (in
// the delta that carries it, "" in the others) and a piece of its
// arguments.
func (s *Stream) ToolCall(ms int64, index int, id, name, argsDelta string) {
	if s.badIndex(index) {
		return
	}
	b := s.block(index, BlockToolCall)
	if b.fixed == nil {
		b.text.WriteString(argsDelta)
		if id != "" {
			b.id = id
		}
		if name != "" {
			b.name = name
		}
	}
	if id == "" {
		// Stored as a chunk of its own, as the format packs only deltas
		// that name their call.
		c := rawjson.AppendInt([]byte(`{"type":"tool-call-delta","index":`), int64(index))
		c = append(c, `,"id":""`...)
		if name != "" {
			c = rawjson.AppendString(append(c, `,"name":`...), name)
		}
		c = rawjson.AppendString(append(c, `,"argumentsDelta":`...), argsDelta)
		s.raw(ms, append(c, '}'))
		return
	}
	run := streamRun{typ: "tool-call-chunks", index: index, time0: ms, id: id}
	if name != "" {
		run.name = &name
	}
	s.delta(run, argsDelta)
}

// BlockStart opens a block of type typ at index.
func (s *Stream) BlockStart(ms int64, index int, typ string) {
	if s.badIndex(index) {
		return
	}
	if s.blocks[index] == nil {
		s.block(index, typ)
	}
	c := rawjson.AppendInt([]byte(`{"type":"block-start","index":`), int64(index))
	c = rawjson.AppendString(append(c, `,"blockType":`...), typ)
	s.raw(ms, append(c, '}'))
}

// BlockEnd closes the block at index as b: the first end of an index fixes
// its block as given.
func (s *Stream) BlockEnd(ms int64, index int, b Block) {
	if s.badIndex(index) {
		return
	}
	if err := b.Check(); err != nil {
		if s.err == nil {
			s.err = fmt.Errorf("%w: the block ending at index %d: %v", ErrStream, index, err)
		}
		return
	}
	bj := b.appendJSON(nil)
	ab := s.blocks[index]
	if ab == nil {
		ab = s.block(index, b.Type)
	}
	if ab.fixed == nil {
		ab.fixed, ab.typ = bj, b.Type
	}
	c := rawjson.AppendInt([]byte(`{"type":"block-end","index":`), int64(index))
	c = append(append(c, `,"block":`...), bj...)
	s.raw(ms, append(c, '}'))
}

// Usage adds the usage the provider reported; the last one is the call's.
func (s *Stream) Usage(ms int64, u Usage) {
	uj, _ := EncodeData(u)
	s.usage = &u
	s.raw(ms, append(append([]byte(`{"type":"usage","usage":`), uj...), '}'))
}

// Finish adds the end of the stream and why it ended; the last one is the
// call's.
func (s *Stream) Finish(ms int64, r FinishReason) {
	switch r.Kind {
	case FinishStop, FinishToolCalls, FinishMaxTokens:
		r.Failure = nil
	case FinishError, FinishAborted:
		if err := r.Failure.Check(); err != nil && s.err == nil {
			s.err = fmt.Errorf("%w: a %s finish: %v", ErrStream, r.Kind, err)
			return
		}
	default:
		if s.err == nil {
			s.err = fmt.Errorf("%w: finish reason %q is not stop, tool-calls, max-tokens, error or aborted", ErrStream, r.Kind)
		}
		return
	}
	rj, _ := EncodeData(r)
	s.finish = &r
	s.raw(ms, append(append([]byte(`{"type":"finish","reason":`), rj...), '}'))
}

// Records is the stream as stored: a JSON array of records.
func (s *Stream) Records() json.RawMessage {
	d := []byte{'['}
	for i, r := range s.runs {
		if i > 0 {
			d = append(d, ',')
		}
		switch r.typ {
		case "chunk":
			d = rawjson.AppendInt(append(d, `{"type":"chunk","time":`...), r.time0)
			d = append(append(d, `,"chunk":`...), r.chunk...)
		default:
			d = rawjson.AppendString(append(d, `{"type":`...), r.typ)
			d = rawjson.AppendInt(append(d, `,"time0":`...), r.time0)
			d = rawjson.AppendInt(append(d, `,"index":`...), int64(r.index))
			d = append(append(append(d, `,"dt":[`...), r.dt...), ']')
			key := `,"texts":[`
			if r.typ == "tool-call-chunks" {
				d = rawjson.AppendString(append(d, `,"id":`...), r.id)
				if r.name != nil {
					d = rawjson.AppendString(append(d, `,"name":`...), *r.name)
				}
				key = `,"args":[`
			}
			d = append(append(append(d, key...), r.texts...), ']')
		}
		d = append(d, '}')
	}
	return append(d, ']')
}

// UsageReported is the last usage the stream carried, or nil.
func (s *Stream) UsageReported() *Usage { return s.usage }

// FinishReason is the last finish the stream carried (FinishStop when
// none did).
func (s *Stream) FinishReason() FinishReason {
	if s.finish == nil {
		return FinishReason{Kind: FinishStop}
	}
	return *s.finish
}

// Content is the answer the stream assembles into, as a JSON array of
// blocks: blocks in the order their index was first seen, each a block-end
// fixed as given or its deltas joined; an unfinished tool call named by
// its last id ("call-<index>" without one) and last name. A call cut off
// at the output limit (FinishMaxTokens) loses its tool calls. An error
// wrapping ErrStream says why the chunks make no answer.
func (s *Stream) Content() (json.RawMessage, error) { return s.content(false) }

// Partial is what an interrupted call had produced: the text and reasoning
// blocks, finished or not, that hold more than white space.
func (s *Stream) Partial() (json.RawMessage, error) { return s.content(true) }

func (s *Stream) content(partial bool) (json.RawMessage, error) {
	if s.err != nil {
		return nil, s.err
	}
	dropCalls := !partial && s.FinishReason().Kind == FinishMaxTokens
	d := []byte{'['}
	n := 0
	for _, i := range s.order {
		b := s.blocks[i]
		var bj []byte
		switch {
		case partial && b.typ != BlockText && b.typ != BlockReasoning:
			continue
		case dropCalls && b.typ == BlockToolCall:
			continue
		case b.fixed != nil:
			if partial && len(bytes.TrimSpace([]byte(str(rawjson.Get(b.fixed, "text"))))) == 0 {
				continue
			}
			bj = b.fixed
		case b.typ == BlockText || b.typ == BlockReasoning:
			if partial && strings.TrimSpace(b.text.String()) == "" {
				continue
			}
			bj = Block{Type: b.typ, Text: b.text.String()}.appendJSON(nil)
		case b.typ == BlockToolCall:
			id := b.id
			if id == "" {
				id = "call-" + strconv.Itoa(i)
			}
			bj = rawjson.AppendString([]byte(`{"type":"tool-call","id":`), id)
			bj = rawjson.AppendString(append(bj, `,"name":`...), b.name)
			bj = rawjson.AppendString(append(bj, `,"arguments":`...), b.text.String())
			bj = append(bj, '}')
		default:
			return nil, fmt.Errorf("%w: the %s block at index %d was opened and never ended", ErrStream, b.typ, i)
		}
		if n > 0 {
			d = append(d, ',')
		}
		d = append(d, bj...)
		n++
	}
	return append(d, ']'), nil
}
