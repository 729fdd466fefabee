package store

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
)

// Errors of the session API; a refused call's *RecordError wraps one.
var (
	ErrSessionOpen    = errors.New("the session is already open")
	ErrNoTurn         = errors.New("no turn is running")
	ErrClosed         = errors.New("the session is closed")
	ErrOrder          = errors.New("call out of order")
	ErrEmptyID        = errors.New("empty id")
	ErrDuplicateID    = errors.New("id already used in the session")
	ErrUnknownCall    = errors.New("no such tool call in the turn")
	ErrUnknownMessage = errors.New("no such message in the history")
	ErrInvalid        = errors.New("invalid value")
)

// RecordError is a call (Request, ToolResult, ...) the recorder refused;
// nothing was written. Kind is one of the errors above or ErrTurnRunning.
type RecordError struct {
	Conversation, Session string
	Call, Msg             string
	Kind                  error
}

func (e *RecordError) Error() string {
	if e.Session == "" {
		return fmt.Sprintf("conversation %s: %s: %s", termtext.Quote(e.Conversation), e.Call, e.Msg)
	}
	return fmt.Sprintf("conversation %s session %s: %s: %s", termtext.Quote(e.Conversation), termtext.Quote(e.Session), e.Call, e.Msg)
}

// Unwrap gives the kind, and ErrOrder for the order kinds.
func (e *RecordError) Unwrap() []error {
	if e.Kind == ErrNoTurn || e.Kind == ErrTurnRunning {
		return []error{e.Kind, ErrOrder}
	}
	return []error{e.Kind}
}

func (se *Session) refuse(call string, kind error, format string, args ...any) error {
	return &RecordError{Conversation: se.convID, Session: se.id, Call: call, Msg: fmt.Sprintf(format, args...), Kind: kind}
}

// NewMessageID returns a fresh message id, a random UUID as the reference
// runtime makes them.
func NewMessageID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// checkNewID refuses an empty id and one the session holds already.
func (se *Session) checkNewID(call, id string) error {
	if id == "" {
		return se.refuse(call, ErrEmptyID, "the message needs an id (NewMessageID makes one)")
	}
	if se.rec.ids[id] {
		return se.refuse(call, ErrDuplicateID, "message id %s names another message of the session", termtext.Quote(id))
	}
	return nil
}

// A gate is what a call needs of the session before it runs; each is also
// the ones before it.
type gate int

const (
	anytime gate = iota
	written      // the session's log is written (the first BeginTurn)
	inTurn       // a turn is running
	inStep       // a step is open and no model call in flight
)

// locked runs fn, the body of call, holding the session once enter and g
// let it in.
func (se *Session) locked(call string, g gate, fn func() error) error {
	unlock, err := se.enter()
	if err != nil {
		return err
	}
	defer unlock()
	switch {
	case g == written && se.w == nil:
		return se.refuse(call, ErrOrder, "nothing is written before the first message (BeginTurn)")
	case g >= inTurn && (se.w == nil || !se.rec.turnOpen):
		return se.refuse(call, ErrNoTurn, "no turn is running (BeginTurn)")
	case g == inStep && !se.rec.stepOpen:
		return se.refuse(call, ErrOrder, "turn %d has no open step (BeginStep)", se.rec.turn)
	case g == inStep && se.call != nil:
		return se.refuse(call, ErrOrder, "a model call is in flight: complete it, retry it or fail it first")
	}
	return fn()
}

// typed is an event of type typ with v, a payload the format defines, as
// its data.
func typed(typ string, v any) convlog.Event {
	d, _ := convlog.EncodeData(v)
	return convlog.Event{Type: typ, Data: d}
}

// BeginStep opens the running turn's next step and returns its number.
func (se *Session) BeginStep() (step int64, err error) {
	err = se.locked("BeginStep", inTurn, func() error {
		if se.rec.stepOpen {
			return se.refuse("BeginStep", ErrOrder, "step %d is still open (EndStep)", se.rec.step)
		}
		step = se.rec.step + 1
		return se.record(typed(convlog.TypeStepStart, convlog.TurnStep{Turn: se.rec.turn, Step: step}))
	})
	return step, err
}

// EndStep ends the open step, whose tool calls must all have a result.
func (se *Session) EndStep() error {
	return se.locked("EndStep", inStep, func() error {
		if open := se.rec.unresolved(); len(open) > 0 {
			return se.refuse("EndStep", ErrOrder, "tool call %s has no result (ToolResult)", termtext.Quote(open[0]))
		}
		return se.record(typed(convlog.TypeStepEnd, convlog.TurnStep{Turn: se.rec.turn, Step: se.rec.step}))
	})
}

// Request is what one model request of a step sends. System ("": none)
// can only head a history: one begun without it stays without. Config
// needs a provider and a model; AdapterDefaults marks what the adapter chose.
type Request struct {
	System          string
	Config          convlog.LLMConfig
	AdapterDefaults convlog.AdapterDefaults
	Tools           []convlog.ToolSchema
}

// Request records a model request of the open step: the system prompt when
// new or changed, the waiting messages in admission order, and the request
// header when new, changed or after a compaction.
func (se *Session) Request(req Request) error {
	return se.locked("Request", inStep, func() error {
		if req.Config.Provider == "" || req.Config.Model == "" {
			return se.refuse("Request", ErrInvalid, "the request needs a provider and a model")
		}
		for _, t := range req.Tools {
			if err := t.Check(); err != nil {
				return se.refuse("Request", ErrInvalid, "%v", err)
			}
		}
		var evs []convlog.Event
		content := []byte("[]")
		if req.System != "" {
			content, _ = convlog.BlocksJSON([]convlog.Block{convlog.TextBlock(req.System)})
		}
		r := &se.rec
		switch {
		case r.head < 0 && r.hist.Len() > 0:
		case r.head < 0, !bytes.Equal(content, r.system):
			msg, err := convlog.NewStoredMessage(NewMessageID(), "system", convlog.Source{Kind: convlog.SourceSystemPrompt}, content)
			if err != nil {
				return err
			}
			d, _ := convlog.EncodeData(convlog.MessageData{Turn: r.turn, Step: r.step, Message: msg.JSON()})
			ev := convlog.Event{Type: convlog.TypeSystemMessage, Data: d, SurfaceOp: &convlog.SurfaceOp{}}
			if r.head >= 0 {
				ev.SurfaceOp = &convlog.SurfaceOp{Replace: true, StartSeq: r.head, EndSeq: r.head}
				ev.SourceEventSeqs = []int64{r.head}
			}
			evs = append(evs, ev)
		}
		for _, m := range r.inbox {
			evs = append(evs, convlog.Event{Type: convlog.TypeUserMessage, Data: m.JSON(), SurfaceOp: &convlog.SurfaceOp{}})
		}
		h := convlog.EpochHeader{Config: req.Config, Tools: req.Tools}
		if req.AdapterDefaults != (convlog.AdapterDefaults{}) {
			ad := req.AdapterDefaults
			h.AdapterDefaults = &ad
		}
		hj, err := convlog.EncodeData(h)
		if err != nil {
			return se.refuse("Request", ErrInvalid, "%v", err)
		}
		reason := ""
		replaced := r.series || (len(evs) > 0 && evs[0].SurfaceOp.Replace)
		switch {
		case r.header == nil:
			reason = convlog.HeaderInitial
		case !r.headerRun:
			reason = convlog.HeaderResume
		case !bytes.Equal(hj, r.header):
			reason = convlog.HeaderChange
		case replaced:
			reason = convlog.HeaderSeries
		}
		if reason != "" {
			evs = append(evs, typed(convlog.TypeRequestHeader, convlog.RequestHeaderData{Header: h, Reason: reason}))
		}
		if err := se.record(evs...); err != nil {
			return err
		}
		if reason != "" {
			r.headerRun = true
		}
		return nil
	})
}

// ModelCall is one model call of the open step, its streamed chunks held in
// memory until Complete, Retry, Fail or Interrupt records them. The chunk
// methods may be called from the stream's goroutine.
type ModelCall struct {
	se              *Session
	provider, model string
	// mu guards stream and done against an Interrupt from another goroutine.
	mu     sync.Mutex
	stream convlog.Stream
	done   bool
}

// BeginModelCall starts a model call of the open step with its Request's
// provider and model; after a Retry it records that the retry began.
func (se *Session) BeginModelCall() (call *ModelCall, err error) {
	err = se.locked("BeginModelCall", inStep, func() error {
		r := &se.rec
		if r.provider == "" {
			return se.refuse("BeginModelCall", ErrOrder, "no request was recorded (Request)")
		}
		if c := r.pendingRetry; c != nil && !c.started {
			if err := se.record(typed(convlog.TypeRetryStarted, convlog.RetryStartedData{Turn: c.turn, Step: c.step, RetryID: c.id, Retry: c.n})); err != nil {
				return err
			}
		}
		se.call = &ModelCall{se: se, provider: r.provider, model: r.model}
		call = se.call
		return nil
	})
	return call, err
}

func (c *ModelCall) now() int64 { return c.se.st.nowMs() }

// chunk adds one chunk with f unless the call has ended (an interrupt).
func (c *ModelCall) chunk(f func(ms int64)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done {
		f(c.now())
	}
}

// Text takes a piece of the text block at index.
func (c *ModelCall) Text(index int, delta string) {
	c.chunk(func(ms int64) { c.stream.Text(ms, index, delta) })
}

// Reasoning takes a piece of the reasoning block at index.
func (c *ModelCall) Reasoning(index int, delta string) {
	c.chunk(func(ms int64) { c.stream.Reasoning(ms, index, delta) })
}

// ToolCall takes a piece of the tool call at index: its id, its name (in
// one piece) and a piece of its arguments.
func (c *ModelCall) ToolCall(index int, id, name, argsDelta string) {
	c.chunk(func(ms int64) { c.stream.ToolCall(ms, index, id, name, argsDelta) })
}

// BlockStart takes the start of a block of type typ at index.
func (c *ModelCall) BlockStart(index int, typ string) {
	c.chunk(func(ms int64) { c.stream.BlockStart(ms, index, typ) })
}

// BlockEnd takes the whole block at index as it ends.
func (c *ModelCall) BlockEnd(index int, b convlog.Block) {
	c.chunk(func(ms int64) { c.stream.BlockEnd(ms, index, b) })
}

// Usage takes the token usage reported; the last is the answer's.
func (c *ModelCall) Usage(u convlog.Usage) { c.chunk(func(ms int64) { c.stream.Usage(ms, u) }) }

// Finish takes why the stream ended.
func (c *ModelCall) Finish(r convlog.FinishReason) {
	c.chunk(func(ms int64) { c.stream.Finish(ms, r) })
}

// end runs fn, the call that ends c, holding the session and then c; c has
// ended once fn succeeds.
func (c *ModelCall) end(call string, fn func(se *Session) error) error {
	se := c.se
	return se.locked(call, anytime, func() error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.done || se.call != c {
			return se.refuse(call, ErrOrder, "the model call has ended already")
		}
		if err := fn(se); err != nil {
			return err
		}
		c.done, se.call = true, nil
		return nil
	})
}

// answerEvent is assistant/message with msg, from c's stream.
func (se *Session) answerEvent(msg convlog.StoredMessage, c *ModelCall, interrupted bool) (convlog.Event, error) {
	d, err := convlog.EncodeData(convlog.AnswerData{Turn: se.rec.turn, Step: se.rec.step, Message: msg.JSON(),
		Usage: c.stream.UsageReported(), Stream: c.stream.Records(), Interrupted: interrupted})
	return convlog.Event{Type: convlog.TypeAssistantMessage, Data: d, SurfaceOp: &convlog.SurfaceOp{}}, err
}

// Complete records the call's answer, empty or cut off too, as message id;
// its tool calls are then the step's to run.
func (c *ModelCall) Complete(id string) error {
	return c.end("Complete", func(se *Session) error {
		if err := se.checkNewID("Complete", id); err != nil {
			return err
		}
		content, err := c.stream.Content()
		if err != nil {
			return se.refuse("Complete", ErrInvalid, "%v", err)
		}
		seen := map[string]bool{}
		for _, b := range toolCalls(content) {
			switch {
			case b.ID == "":
				return se.refuse("Complete", ErrEmptyID, "a tool call of the answer has no id")
			case seen[b.ID] || se.rec.calls[b.ID] != nil:
				return se.refuse("Complete", ErrDuplicateID, "tool call id %s is asked for twice in the turn", termtext.Quote(b.ID))
			}
			seen[b.ID] = true
		}
		msg, err := convlog.NewStoredMessage(id, "assistant", convlog.ModelSource(c.provider, c.model), content)
		if err != nil {
			return se.refuse("Complete", ErrInvalid, "%v", err)
		}
		ev, err := se.answerEvent(msg, c, false)
		if err != nil {
			return err
		}
		return se.record(ev)
	})
}

// Retry is a model call that failed with a temporary error and is tried
// again after Delay. The attempts of one policy ("" is "default") in one step
// are one chain, counted from 1; MaxRetries is its limit (0: none).
type Retry struct {
	PolicyKey  string
	Delay      time.Duration
	MaxRetries int64
	Failure    convlog.LLMFailure
}

// Retry records that the call failed with a temporary error; the step's
// next BeginModelCall is the retry.
func (c *ModelCall) Retry(r Retry) error {
	return c.end("Retry", func(se *Session) error {
		if err := r.Failure.Check(); err != nil {
			return se.refuse("Retry", ErrInvalid, "%v", err)
		}
		if r.Delay < 0 || r.MaxRetries < 0 {
			return se.refuse("Retry", ErrInvalid, "a retry's delay and limit cannot be negative")
		}
		policy := r.PolicyKey
		if policy == "" {
			policy = "default"
		}
		rs := &se.rec
		k := retryKey{rs.turn, rs.step, c.provider, policy}
		id, n := fmt.Sprintf("retry-%d", se.w.NextSeq()+1), int64(1)
		if ch := rs.retryChains[k]; ch != nil {
			id, n = ch.id, ch.n+1
		}
		if r.MaxRetries > 0 && n > r.MaxRetries {
			return se.refuse("Retry", ErrInvalid, "retry %d is beyond the policy's %d", n, r.MaxRetries)
		}
		d := convlog.RetryData{Mode: convlog.RetryAlways, Turn: rs.turn, Step: rs.step, Provider: c.provider, PolicyKey: policy,
			RetryID: id, Retry: n, DelayMs: r.Delay.Milliseconds(), Failure: r.Failure}
		if r.MaxRetries > 0 {
			d.Mode, d.MaxRetries = convlog.RetryNormal, &r.MaxRetries
		}
		attempt := typed(convlog.TypeAssistantAttempt, convlog.AttemptData{Turn: rs.turn, Step: rs.step, Stream: c.stream.Records()})
		return se.record(attempt, typed(convlog.TypeRetry, d))
	})
}

// Fail records that the call failed for good; the turn then fails (EndStep,
// then EndTurn with OutcomeFailed).
func (c *ModelCall) Fail(failure convlog.LLMFailure) error {
	return c.end("Fail", func(se *Session) error {
		if err := failure.Check(); err != nil {
			return se.refuse("Fail", ErrInvalid, "%v", err)
		}
		if c.stream.FinishReason().Kind != convlog.FinishError {
			f := failure
			c.stream.Finish(c.now(), convlog.FinishReason{Kind: convlog.FinishError, Failure: &f})
		}
		return se.record(typed(convlog.TypeAssistantAttempt, convlog.AttemptData{Turn: se.rec.turn, Step: se.rec.step, Stream: c.stream.Records()}))
	})
}

// ToolCall records that tool call callID, which an answer of the step
// asked for, starts.
func (se *Session) ToolCall(callID string) error {
	return se.locked("ToolCall", inStep, func() error {
		c := se.rec.calls[callID]
		switch {
		case callID == "":
			return se.refuse("ToolCall", ErrEmptyID, "the tool call needs its id")
		case c == nil:
			return se.refuse("ToolCall", ErrUnknownCall, "no answer of turn %d asked for tool call %s", se.rec.turn, termtext.Quote(callID))
		case c.startSeq >= 0:
			return se.refuse("ToolCall", ErrOrder, "tool call %s has started already", termtext.Quote(callID))
		case c.step != se.rec.step:
			return se.refuse("ToolCall", ErrOrder, "tool call %s belongs to step %d, not step %d", termtext.Quote(callID), c.step, se.rec.step)
		}
		return se.record(typed(convlog.TypeToolCall, convlog.ToolCallData{Turn: se.rec.turn, Step: se.rec.step, CallID: callID, Name: c.name, Arguments: c.args}))
	})
}

// ToolResult is the result of a tool call, message ID. Error, only with
// IsError, says how the tool failed.
type ToolResult struct {
	CallID, ID string
	Content    []convlog.Block
	IsError    bool
	Error      *convlog.ToolError
}

// ToolResult records the result of a started tool call.
func (se *Session) ToolResult(r ToolResult) error {
	return se.locked("ToolResult", inStep, func() error {
		c := se.rec.calls[r.CallID]
		switch {
		case r.CallID == "":
			return se.refuse("ToolResult", ErrEmptyID, "the result needs its call's id")
		case c == nil:
			return se.refuse("ToolResult", ErrUnknownCall, "no answer of turn %d asked for tool call %s", se.rec.turn, termtext.Quote(r.CallID))
		case c.resolved:
			return se.refuse("ToolResult", ErrOrder, "tool call %s has its result already", termtext.Quote(r.CallID))
		case c.startSeq < 0:
			return se.refuse("ToolResult", ErrOrder, "tool call %s has not started (ToolCall)", termtext.Quote(r.CallID))
		case r.Error != nil && !r.IsError:
			return se.refuse("ToolResult", ErrInvalid, "an error is carried only by a result marked IsError")
		case r.Error != nil && (r.Error.Name == "" || r.Error.Code == ""):
			return se.refuse("ToolResult", ErrInvalid, "a tool error needs a name and a code")
		}
		if err := se.checkNewID("ToolResult", r.ID); err != nil {
			return err
		}
		msg, err := convlog.NewToolMessage(r.ID, r.CallID, r.IsError, r.Content)
		if err != nil {
			return se.refuse("ToolResult", ErrInvalid, "%v", err)
		}
		d, _ := convlog.EncodeData(convlog.ToolResultData{Turn: se.rec.turn, Step: se.rec.step, Message: msg.JSON(), Error: r.Error})
		return se.record(convlog.Event{Type: convlog.TypeToolResult, Data: d, SurfaceOp: &convlog.SurfaceOp{}, SourceEventSeqs: []int64{c.startSeq}})
	})
}

// Compaction is a summary of the older history. The summary replaces every
// message between the system prompt and KeepFrom ("": all). Provider and
// Model wrote it (MaxTokens, Usage: their call); TokenCount is what it
// replaced (0: bytes / 4). ID and CheckpointID ("": new ids) name the
// compaction and the summary's message; CommandID ("": none) is the id
// Command returned for the command that asked for it.
type Compaction struct {
	ID, KeepFrom, Summary string
	Provider, Model       string
	MaxTokens             int64
	Usage                 *convlog.Usage
	TokenCount            int64
	CheckpointID          string
	CommandID             string
}

// Compact records a compaction, manual (nothing running or waiting) or
// automatic (before a model call of the running turn), as one durable batch;
// the full history stays in the log.
func (se *Session) Compact(c Compaction) error {
	return se.replacing("Compact", func(r *recState) error {
		switch _, ok := r.commands[c.CommandID]; {
		case !r.turnOpen && len(r.inbox) > 0:
			return se.refuse("Compact", ErrOrder, "a manual compaction needs nothing waiting (%d message(s) are)", len(r.inbox))
		case c.Summary == "":
			return se.refuse("Compact", ErrInvalid, "the compaction needs its summary")
		case c.Provider == "" || c.Model == "":
			return se.refuse("Compact", ErrInvalid, "the compaction needs the provider and model that wrote it")
		case c.TokenCount < 0:
			return se.refuse("Compact", ErrInvalid, "a token count cannot be negative")
		case c.CommandID != "" && !ok:
			return se.refuse("Compact", ErrUnknownCall, "no command %s was run in the session (Command)", termtext.Quote(c.CommandID))
		}
		if c.ID == "" {
			c.ID = NewMessageID()
		} else if r.compactions[c.ID] {
			return se.refuse("Compact", ErrDuplicateID, "compaction id %s is used already", termtext.Quote(c.ID))
		}
		if c.CheckpointID == "" {
			c.CheckpointID = NewMessageID()
		} else if err := se.checkNewID("Compact", c.CheckpointID); err != nil {
			return err
		}
		nodes := r.hist.Surface()
		first, end := r.protected(nodes), len(nodes)
		if c.KeepFrom != "" {
			if end = surfaceAt(nodes, c.KeepFrom); end < 0 {
				return se.refuse("Compact", ErrUnknownMessage, "message %s is not in the history the model reads", termtext.Quote(c.KeepFrom))
			}
		}
		if end <= first {
			return se.refuse("Compact", ErrOrder, "nothing before message %s to summarise", termtext.Quote(c.KeepFrom))
		}
		seqs, count := shadow(nodes[first:end], c.TokenCount)
		var turn *int64
		if r.turnOpen {
			t := r.turn
			turn = &t
		}
		summary := []convlog.Block{convlog.TextBlock(c.Summary)}
		msg, err := convlog.NewMessage(c.CheckpointID, "user", convlog.CheckpointSource(c.ID, c.CommandID), summary)
		if err != nil {
			return se.refuse("Compact", ErrInvalid, "%v", err)
		}
		defer se.indexPoint(false)
		return se.record(
			typed(convlog.TypeCompactionStart, convlog.CompactionStartData{CompactionID: c.ID, SourceCommandID: c.CommandID, Turn: turn}),
			typed(convlog.TypeCompactionSummary, convlog.CompactionSummaryData{CompactionID: c.ID, SourceCommandID: c.CommandID,
				Summary: summary, ShadowedRange: convlog.SeqRange{Start: seqs[0], End: seqs[len(seqs)-1]}, ShadowedSeqs: seqs,
				ShadowedTokenCount: count, Provider: c.Provider, Model: c.Model, MaxTokens: c.MaxTokens, Usage: c.Usage}),
			replacement(msg, seqs),
			typed(convlog.TypeCompactionEnd, convlog.CompactionEndData{CompactionID: c.ID, SourceCommandID: c.CommandID, Turn: turn}))
	})
}

// replacing runs fn, the body of call, a change of the history the model
// reads, once written; refused while a model call is in flight (a
// compaction a crash left open, OpenSession closed).
func (se *Session) replacing(call string, fn func(r *recState) error) error {
	return se.locked(call, written, func() error {
		if se.call != nil {
			return se.refuse(call, ErrOrder, "a model call is in flight")
		}
		return fn(&se.rec)
	})
}

// protected is the number of nodes heading the surface no compaction
// replaces: the system prompt's.
func (r *recState) protected(nodes []convlog.SurfaceNode) int {
	if len(nodes) > 0 && nodes[0].Seq == r.head {
		return 1
	}
	return 0
}

// surfaceAt is the index of message id among nodes, -1 when absent.
func surfaceAt(nodes []convlog.SurfaceNode, id string) int {
	return slices.IndexFunc(nodes, func(n convlog.SurfaceNode) bool { return n.Message != nil && n.Message.ID() == id })
}

// shadow prices span for a compaction: its seqs in order and count, or
// when count is 0 its size in tokens (bytes / 4).
func shadow(span []convlog.SurfaceNode, count int64) (seqs []int64, tokens int64) {
	seqs, tokens = make([]int64, len(span)), count
	for i, n := range span {
		seqs[i] = n.Seq
		if count == 0 && n.Message != nil {
			tokens += int64(len(n.Message.JSON())+3) / 4
		}
	}
	return seqs, tokens
}

// replacement is the user/message putting msg in place of the surface nodes
// seqs (in surface order), citing each.
func replacement(msg convlog.StoredMessage, seqs []int64) convlog.Event {
	return convlog.Event{Type: convlog.TypeUserMessage, Data: msg.JSON(), SourceEventSeqs: slices.Sorted(slices.Values(seqs)),
		SurfaceOp: &convlog.SurfaceOp{Replace: true, StartSeq: seqs[0], EndSeq: seqs[len(seqs)-1]}}
}

// SubagentReport admits the report of subagent childID as message id; a
// running turn's next Request records it, else the runtime starts a turn
// with the message returned.
func (se *Session) SubagentReport(childID, id, summary string, content []convlog.Block) (convlog.StoredMessage, error) {
	var msg convlog.StoredMessage
	err := se.locked("SubagentReport", written, func() error {
		oc, err := se.oc, se.oc.live()
		if err != nil {
			return err
		}
		if c := oc.st.info.Session(childID); c == nil || c.ParentSession != se.id {
			return se.refuse("SubagentReport", ErrInvalid, "session %s is not a subagent of this session", termtext.Quote(childID))
		}
		if err := se.checkNewID("SubagentReport", id); err != nil {
			return err
		}
		m, err := convlog.NewMessage(id, "user", convlog.SubagentSource(childID, summary), content)
		if err != nil {
			return se.refuse("SubagentReport", ErrInvalid, "%v", err)
		}
		target := convlog.SpliceNextTurn
		if se.rec.turnOpen {
			target = convlog.SpliceNextStep
		}
		if err := se.record(se.splice(target, m)); err != nil {
			return err
		}
		se.indexPoint(false)
		msg = m
		return nil
	})
	return msg, err
}

// HistoryEntry is one message of the history the model reads, the seq of
// its event, and whether an interrupt or a crash cut it off.
type HistoryEntry struct {
	Seq         int64
	Message     convlog.StoredMessage
	Interrupted bool
}

// History returns the history the model reads now.
func (se *Session) History() []HistoryEntry {
	unlock := se.st.lockSession(se)
	defer unlock()
	msgs := se.rec.hist.Messages()
	out := make([]HistoryEntry, len(msgs))
	for i, m := range msgs {
		out[i] = HistoryEntry{Seq: m.Seq, Message: m.Message, Interrupted: se.rec.interrupted[m.Seq]}
	}
	return out
}

// seqOf is the seq of the surface event that recorded message id.
func (se *Session) seqOf(call, id string) (seq int64, err error) {
	err = se.locked(call, written, func() error {
		if err := se.flush(); err != nil {
			return err
		}
		if p := se.oc.st.info.Session(se.id); p != nil && p.ParentSession != "" {
			return se.refuse(call, ErrInvalid, "session %s is a subagent of %s; only a root session is forked", termtext.Quote(se.id), termtext.Quote(p.ParentSession))
		}
		s, ok := se.w.NextSeq()-1, true
		if id != "" {
			s, ok = se.rec.surfaceSeq[id]
		}
		if !ok {
			return se.refuse(call, ErrUnknownMessage, "no message %s was recorded in the session", termtext.Quote(id))
		}
		if call == "Rewind" && !se.rec.userMsgs[id] {
			return se.refuse(call, ErrInvalid, "message %s is not one of the user's", termtext.Quote(id))
		}
		// A copy cut inside the inherited history would lose its end-seed
		// marker; the compactions in it are the source's, no new seed.
		if s < se.rec.endSeed {
			return se.refuse(call, ErrInvalid, "message %s is in the history the session inherited from its fork source", termtext.Quote(id))
		}
		seq = s
		return nil
	})
	return seq, err
}

// Fork copies this root session through message throughID ("": all) into
// the new conversation newConv as its root session newSession, without
// subagents, queued input or the archived state. After a compaction the
// fork is seeded with the history the model reads and depends on this
// conversation; otherwise the events are copied and an open turn closed as
// "forked".
func (se *Session) Fork(newConv, newSession, throughID string) error {
	seq, err := se.seqOf("Fork", throughID)
	if err != nil {
		return err
	}
	_, err = se.st.fork(se.convID, se.id, newConv, newSession, seq, -1)
	return err
}

// Rewind is a fork that stops just before the user's message beforeID (and
// its turn and admission when it opens one) and returns its text for the
// composer. Any other message id is refused (ErrInvalid).
func (se *Session) Rewind(newConv, newSession, beforeID string) (string, error) {
	if beforeID == "" {
		return "", se.refuse("Rewind", ErrEmptyID, "a rewind names the user's message it stops before")
	}
	seq, err := se.seqOf("Rewind", beforeID)
	if err != nil {
		return "", err
	}
	return se.st.fork(se.convID, se.id, newConv, newSession, 0, seq)
}

// recState is what a Session knows of its log: every event written or read
// on opening passes through observe, so the calls check against the log.
type recState struct {
	turnOpen, stepOpen bool
	// turn and step: the open one, else the last started.
	turn, step int64
	calls      map[string]*toolCallState
	callOrder  []string
	// inbox: messages admitted and not yet recorded, for the next request.
	inbox      []convlog.StoredMessage
	ids        map[string]bool
	surfaceSeq map[string]int64 // the seq that first recorded each message
	userMsgs   map[string]bool  // messages first recorded as the user's (Rewind's targets)
	hist       convlog.History
	// interrupted: answers and tool results an interrupt or a crash cut off.
	interrupted map[int64]bool
	head        int64 // the seq of the system message heading the surface, -1: none
	system      []byte
	// header is the last request header as written; headerRun: this
	// session wrote one; series: the surface was replaced since.
	header            []byte
	provider, model   string
	headerRun, series bool
	headerSeq         int64 // the seq of header
	retryChains       map[retryKey]*retryChain
	pendingRetry      *retryChain
	compactions       map[string]bool
	endSeed           int64           // the seq of the inherited session/end-seed, -1: none
	context           []byte          // the last request/context's data
	commands          map[string]bool // command ids run: whether done
	dispatches        map[string]*dispatch
}

type toolCallState struct {
	name, args string
	step       int64
	startSeq   int64 // the tool/call, -1 before it
	resolved   bool
}

type retryKey struct {
	turn, step       int64
	provider, policy string
}

type retryChain struct {
	id            string
	n, turn, step int64
	started       bool // llm/retry-started was recorded for retry n
}

func newRecState() recState {
	return recState{calls: map[string]*toolCallState{}, ids: map[string]bool{}, surfaceSeq: map[string]int64{}, userMsgs: map[string]bool{},
		interrupted: map[int64]bool{}, head: -1, endSeed: -1, retryChains: map[retryKey]*retryChain{}, compactions: map[string]bool{},
		commands: map[string]bool{}, dispatches: map[string]*dispatch{}}
}

// observe takes one event, already written or queued with its seq.
func (r *recState) observe(e *convlog.Event) {
	if convlog.IsSurface(e.Type) {
		r.observeSurface(e)
	}
	switch e.Type {
	case convlog.TypeTurnStart:
		var d convlog.TurnStartData
		json.Unmarshal(e.Data, &d)
		r.turnOpen, r.turn, r.stepOpen, r.step = true, d.Turn, false, 0
		r.calls, r.callOrder, r.pendingRetry = map[string]*toolCallState{}, nil, nil
		clear(r.retryChains)
	case convlog.TypeTurnEnd:
		r.turnOpen, r.stepOpen = false, false
		r.calls, r.callOrder, r.pendingRetry = map[string]*toolCallState{}, nil, nil
	case convlog.TypeStepStart:
		var d convlog.TurnStep
		json.Unmarshal(e.Data, &d)
		r.stepOpen, r.step = true, d.Step
	case convlog.TypeStepEnd:
		r.stepOpen = false
	case convlog.TypeToolCall:
		var d convlog.ToolCallData
		json.Unmarshal(e.Data, &d)
		c := r.calls[d.CallID]
		if c == nil {
			c = &toolCallState{name: d.Name, args: d.Arguments, step: r.step}
			r.calls[d.CallID] = c
			r.callOrder = append(r.callOrder, d.CallID)
		}
		c.startSeq = e.Seq
	case convlog.TypeRequestHeader:
		r.header, r.headerSeq = bytes.Clone(rawjson.Get(e.Data, "header")), e.Seq
		var h convlog.EpochHeader
		json.Unmarshal(r.header, &h)
		r.provider, r.model, r.series = h.Config.Provider, h.Config.Model, false
	case convlog.TypeRequestContext:
		r.context = bytes.Clone(e.Data)
	case convlog.TypePTCStart, convlog.TypePTC:
		r.observeDispatch(e)
	case convlog.TypeCommandRun, convlog.TypeCommandDone:
		r.commands[str(rawjson.Get(e.Data, "commandId"))] = e.Type == convlog.TypeCommandDone
	case convlog.TypeTitleRequest: // its prompt's id is taken, though not in the history
		msgs, _ := rawjson.Elements(rawjson.Get(e.Data, "messages"), nil)
		for _, raw := range msgs {
			if m, err := convlog.ParseStoredMessage(raw); err == nil {
				r.ids[m.ID()] = true
			}
		}
	case convlog.TypeInboxSpliced:
		var d convlog.InboxSplicedData
		json.Unmarshal(e.Data, &d)
		for _, raw := range d.Inserted {
			if m, err := convlog.ParseStoredMessage(raw); err == nil {
				if !r.ids[m.ID()] {
					r.ids[m.ID()] = true
					r.inbox = append(r.inbox, m)
				}
			}
		}
	case convlog.TypeRetry:
		var d convlog.RetryData
		json.Unmarshal(e.Data, &d)
		k := retryKey{d.Turn, d.Step, d.Provider, d.PolicyKey}
		c := r.retryChains[k]
		if c == nil || c.id != d.RetryID {
			c = &retryChain{id: d.RetryID, turn: d.Turn, step: d.Step}
			r.retryChains[k] = c
		}
		c.n, c.started = d.Retry, false
		r.pendingRetry = c
	case convlog.TypeRetryStarted:
		if r.pendingRetry != nil {
			r.pendingRetry.started = true
		}
		r.pendingRetry = nil
	case convlog.TypeCompactionStart:
		var d convlog.CompactionStartData
		json.Unmarshal(e.Data, &d)
		r.compactions[d.CompactionID] = true
	case convlog.TypeEndSeed:
		if string(rawjson.Get(e.Data, "inherited")) == "true" {
			r.endSeed = e.Seq
		}
		// Turn numbers start afresh after inherited history.
		r.turnOpen, r.stepOpen, r.turn, r.step = false, false, 0, 0
		r.calls, r.callOrder = map[string]*toolCallState{}, nil
	}
}

func (r *recState) observeSurface(e *convlog.Event) {
	before := r.hist.Len()
	if err := r.hist.Apply(e); err != nil {
		return // a log the writer accepted applies
	}
	if e.SurfaceOp != nil && e.SurfaceOp.Replace {
		r.series = true
	}
	raw := e.Data
	if e.Type != convlog.TypeUserMessage {
		raw = rawjson.Get(e.Data, "message")
	}
	m, err := convlog.ParseStoredMessage(raw)
	if err != nil {
		return
	}
	id := m.ID()
	if _, ok := r.surfaceSeq[id]; !ok {
		r.surfaceSeq[id] = e.Seq
		if e.Type == convlog.TypeUserMessage && m.Source().Kind == convlog.SourceUser {
			r.userMsgs[id] = true
		}
	}
	r.ids[id] = true
	switch e.Type {
	case convlog.TypeSystemMessage:
		if before == 0 || (e.SurfaceOp != nil && e.SurfaceOp.Replace && e.SurfaceOp.StartSeq == r.head) {
			r.head = e.Seq
			r.system = bytes.Clone(rawjson.Get(m.JSON(), "content"))
		}
	case convlog.TypeUserMessage:
		for i, w := range r.inbox {
			if w.ID() == id {
				r.inbox = append(r.inbox[:i:i], r.inbox[i+1:]...)
				break
			}
		}
	case convlog.TypeAssistantMessage:
		if string(rawjson.Get(e.Data, "interrupted")) == "true" {
			r.interrupted[e.Seq] = true
		}
		r.pendingRetry = nil
		for _, b := range toolCalls(rawjson.Get(m.JSON(), "content")) {
			if b.ID != "" && r.calls[b.ID] == nil {
				r.calls[b.ID] = &toolCallState{name: b.Name, args: b.Arguments, step: r.step, startSeq: -1}
				r.callOrder = append(r.callOrder, b.ID)
			}
		}
	case convlog.TypeToolResult:
		if c := r.calls[str(rawjson.Get(m.JSON(), "toolCallId"))]; c != nil {
			c.resolved = true
		}
		switch str(rawjson.Get(rawjson.Get(e.Data, "error"), "code")) {
		case convlog.CodeToolNotStarted, convlog.CodeToolInterrupted:
			r.interrupted[e.Seq] = true
		}
	}
}

// unresolved lists the open turn's tool calls without a result.
func (r *recState) unresolved() []string {
	var out []string
	for _, id := range r.callOrder {
		if c := r.calls[id]; c != nil && !c.resolved {
			out = append(out, id)
		}
	}
	return out
}

// toolCalls decodes the tool-call blocks of a content array.
func toolCalls(content []byte) []convlog.Block {
	var blocks []convlog.Block
	var raw []struct{ Type, ID, Name, Arguments string }
	if json.Unmarshal(content, &raw) != nil {
		return nil
	}
	for _, b := range raw {
		if b.Type == convlog.BlockToolCall {
			blocks = append(blocks, convlog.Block{Type: b.Type, ID: b.ID, Name: b.Name, Arguments: b.Arguments})
		}
	}
	return blocks
}

// str is a JSON string's value ("" for anything else).
func str(raw []byte) string {
	s, _ := rawjson.String(raw)
	return s
}
