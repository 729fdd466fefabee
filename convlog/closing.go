package convlog

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/convkit/convkit/internal/rawjson"
)

// Closing a turn that cannot go on (docs/FORMAT.md, "Closing an interrupted
// turn"): what the runtime appends when the user interrupts, and what
// repair appends for a turn a crash left open. Nothing recorded is
// rewritten; what was produced is kept and what was unfinished is marked.

// Interrupted tool results: the error a tool call gets when its turn is
// interrupted, by whether it had started.
const (
	CodeToolNotStarted  = "TOOL_NOT_STARTED"
	CodeToolInterrupted = "TOOL_INTERRUPTED"
)

// CloseTurn returns the events that end the open turn of ts with reason
// (data.reason.kind, one of TurnEndKinds: "interrupted" for an interrupt
// or a crash), to be appended from seq next at time ms:
//
//   - when the open step's last model call was cut off (an
//     assistant/attempt that no answer followed), an assistant/message
//     with "interrupted":true holding what it had produced: its text and
//     reasoning blocks (an unfinished block marked "interrupted":true);
//     tool calls it had not finished asking for are left out, as they never
//     ran;
//   - an error tool/result for every tool call without a result
//     (TOOL_NOT_STARTED when no tool/call recorded that it ran, else
//     TOOL_INTERRUPTED), in the open step, or in a step opened for them;
//   - step/end of the open step, then turn/end.
//
// A closed turn (ts.Open false) gives nothing.
func CloseTurn(ts TurnState, next, ms int64, reason string) []Event {
	if !ts.Open {
		return nil
	}
	var evs []Event
	add := func(typ string, data []byte, op *SurfaceOp, src []int64) {
		evs = append(evs, Event{Type: typ, Seq: next + int64(len(evs)), Time: ms, Data: data, SurfaceOp: op, SourceEventSeqs: src})
	}
	step, stepOpen := ts.Step, ts.StepOpen
	if !stepOpen && len(ts.Calls) > 0 {
		step++
		add("step/start", turnStepData(ts.Turn, step), nil, nil)
		stepOpen = true
	}
	if ts.CutOff && stepOpen {
		if content := partialContent(ts.attempt); content != nil {
			d := turnStepData(ts.Turn, step)
			d = append(d[:len(d)-1], `,"message":{"role":"assistant","content":`...)
			d = append(d, content...)
			d = append(d, `,"source":{"kind":"model"},"id":`...)
			d = rawjson.AppendString(d, fmt.Sprintf("interrupted-answer-%d", ts.AttemptSeq))
			d = append(d, `},"interrupted":true}`...)
			add(TypeAssistantMessage, d, &SurfaceOp{}, nil)
		}
	}
	for _, c := range ts.Calls {
		seq := next + int64(len(evs))
		id := fmt.Sprintf("interrupted-tool-result-%s-%d", c.ID, seq)
		text, name, code := "The tool call was interrupted before it started. Retry it if it is still needed.", "ToolNotStartedError", CodeToolNotStarted
		if c.Started {
			text, name, code = "The tool call was interrupted before it finished; its result is unknown. Check what it did before retrying it.",
				"ToolInterruptedError", CodeToolInterrupted
		}
		d := turnStepData(ts.Turn, step)
		d = append(d[:len(d)-1], `,"message":{"role":"tool","source":{"kind":"tool","callId":`...)
		d = rawjson.AppendString(d, c.ID)
		d = append(d, `},"toolCallId":`...)
		d = rawjson.AppendString(d, c.ID)
		d = append(d, `,"content":[{"type":"text","text":`...)
		d = rawjson.AppendString(d, text)
		d = append(d, `}],"isError":true,"id":`...)
		d = rawjson.AppendString(d, id)
		d = append(d, `},"error":{"name":`...)
		d = rawjson.AppendString(d, name)
		d = append(d, `,"code":`...)
		d = rawjson.AppendString(d, code)
		d = append(d, `}}`...)
		add(TypeToolResult, d, &SurfaceOp{}, []int64{c.Seq})
	}
	if stepOpen {
		add("step/end", turnStepData(ts.Turn, step), nil, nil)
	}
	d := rawjson.AppendInt([]byte(`{"turn":`), ts.Turn)
	d = append(d, `,"reason":{"kind":`...)
	d = rawjson.AppendString(d, reason)
	d = append(d, `}}`...)
	add(TypeTurnEnd, d, nil, nil)
	return evs
}

func turnStepData(turn, step int64) []byte {
	d := rawjson.AppendInt([]byte(`{"turn":`), turn)
	d = append(d, `,"step":`...)
	d = rawjson.AppendInt(d, step)
	return append(d, '}')
}

// streamRecord is one record of an answer's embedded stream: a chunk
// (block-start, block-end, ...) or a run of text, reasoning or tool-call
// deltas.
type streamRecord struct {
	Type  string          `json:"type"`
	Index *int            `json:"index"`
	Texts []string        `json:"texts"`
	Chunk json.RawMessage `json:"chunk"`
}

type streamChunk struct {
	Type      string          `json:"type"`
	Index     *int            `json:"index"`
	BlockType string          `json:"blockType"`
	Block     json.RawMessage `json:"block"`
}

// partialContent rebuilds what a cut-off model call produced from the
// stream of its assistant/attempt: a JSON array of its text and reasoning
// blocks in order (a block the stream finished as it was; an unfinished
// one from its deltas, marked "interrupted":true), or nil when it produced
// no text.
func partialContent(attempt []byte) []byte {
	var d struct {
		Stream []streamRecord `json:"stream"`
	}
	if json.Unmarshal(attempt, &d) != nil {
		return nil
	}
	type block struct {
		kind  string
		text  strings.Builder
		final json.RawMessage
	}
	blocks := map[int]*block{}
	get := func(i int) *block {
		b := blocks[i]
		if b == nil {
			b = &block{}
			blocks[i] = b
		}
		return b
	}
	for _, r := range d.Stream {
		switch r.Type {
		case "text-chunks", "reasoning-chunks":
			if r.Index == nil {
				continue
			}
			b := get(*r.Index)
			if b.kind == "" {
				b.kind = strings.TrimSuffix(r.Type, "-chunks")
			}
			for _, t := range r.Texts {
				b.text.WriteString(t)
			}
		case "chunk":
			var c streamChunk
			if json.Unmarshal(r.Chunk, &c) != nil || c.Index == nil {
				continue
			}
			switch c.Type {
			case "block-start":
				get(*c.Index).kind = c.BlockType
			case "block-end":
				get(*c.Index).final = c.Block
			}
		}
	}
	idx := make([]int, 0, len(blocks))
	for i := range blocks {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	out := []byte{'['}
	n := 0
	for _, i := range idx {
		b := blocks[i]
		if b.kind != "text" && b.kind != "reasoning" {
			continue // a tool call that was not finished never ran
		}
		var blk []byte
		switch {
		case b.final != nil:
			blk = b.final
		case b.text.Len() > 0:
			blk = rawjson.AppendString([]byte(`{"type":`), b.kind)
			blk = append(blk, `,"text":`...)
			blk = rawjson.AppendString(blk, b.text.String())
			blk = append(blk, `,"interrupted":true}`...)
		default:
			continue
		}
		if n > 0 {
			out = append(out, ',')
		}
		out = append(out, blk...)
		n++
	}
	if n == 0 {
		return nil
	}
	return append(out, ']')
}
