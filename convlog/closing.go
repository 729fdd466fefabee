package convlog

import (
	"fmt"
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
//     with "interrupted":true holding what its stream had produced (see
//     partialContent), its source the model the last request/header
//     named, its own stream empty (the attempt keeps it);
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
	q := func(s string) []byte { return rawjson.AppendString(nil, s) }
	step, stepOpen := ts.Step, ts.StepOpen
	stepData := func() []byte { return fmt.Appendf(nil, `{"turn":%d,"step":%d}`, ts.Turn, step) }
	if !stepOpen && len(ts.Calls) > 0 {
		step++
		add("step/start", stepData(), nil, nil)
		stepOpen = true
	}
	if ts.CutOff && stepOpen {
		if content := partialContent(ts.attempt); content != nil {
			add(TypeAssistantMessage, fmt.Appendf(nil, `{"turn":%d,"step":%d,"message":{"role":"assistant","content":%s,"source":{"kind":"model","provider":%s,"model":%s},"id":%s},"stream":[],"interrupted":true}`,
				ts.Turn, step, content, q(ts.Provider), q(ts.Model), q(fmt.Sprintf("interrupted-answer-%d", ts.AttemptSeq))), &SurfaceOp{}, nil)
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
		add(TypeToolResult, fmt.Appendf(nil, `{"turn":%d,"step":%d,"message":{"role":"tool","source":{"kind":"tool","callId":%s},"toolCallId":%s,"content":[{"type":"text","text":%s}],"isError":true,"id":%s},"error":{"name":%s,"code":%s}}`,
			ts.Turn, step, q(c.ID), q(c.ID), q(text), q(id), q(name), q(code)), &SurfaceOp{}, []int64{c.Seq})
	}
	if stepOpen {
		add("step/end", stepData(), nil, nil)
	}
	add(TypeTurnEnd, fmt.Appendf(nil, `{"turn":%d,"reason":{"kind":%s}}`, ts.Turn, q(reason)), nil, nil)
	return evs
}

// partialContent is what a cut-off model call had produced: the stream of
// its assistant/attempt assembled as the live call's is, of which
// Stream.Partial keeps the text and reasoning; nil when none, or the
// chunks do not assemble.
func partialContent(attempt []byte) []byte {
	s := storedStream(rawjson.Get(attempt, "stream"))
	content, err := s.Partial()
	if err != nil || rawjson.EmptyArray(content) {
		return nil
	}
	return content
}

// storedStream is a stream as stored, its records' chunks fed to a Stream;
// usage and finish chunks are no content.
func storedStream(records []byte) *Stream {
	var s Stream
	index := func(raw []byte) int {
		n, _ := rawjson.Int(raw)
		return int(n)
	}
	for _, rec := range elements(records) {
		typ := str(rawjson.Get(rec, "type"))
		switch typ {
		case "text-chunks", "reasoning-chunks", "tool-call-chunks":
			t, _ := rawjson.Int(rawjson.Get(rec, "time0"))
			i := index(rawjson.Get(rec, "index"))
			dt := rawjson.Array(rawjson.Get(rec, "dt"))
			pieces := "texts"
			if typ == "tool-call-chunks" {
				pieces = "args"
			}
			id, name := str(rawjson.Get(rec, "id")), str(rawjson.Get(rec, "name"))
			for k, p := range elements(rawjson.Get(rec, pieces)) {
				if k > 0 {
					g, _ := dt.Next()
					d, _ := rawjson.Int(g)
					t += d
				}
				if typ == "tool-call-chunks" {
					s.ToolCall(t, i, id, name, str(p))
				} else {
					s.textDelta(strings.TrimSuffix(typ, "-chunks"), t, i, str(p))
				}
			}
		case "chunk":
			t, _ := rawjson.Int(rawjson.Get(rec, "time"))
			c := rawjson.Get(rec, "chunk")
			i := index(rawjson.Get(c, "index"))
			switch ct := str(rawjson.Get(c, "type")); ct {
			case "text-delta", "reasoning-delta":
				s.textDelta(strings.TrimSuffix(ct, "-delta"), t, i, str(rawjson.Get(c, "text")))
			case "tool-call-delta":
				s.ToolCall(t, i, str(rawjson.Get(c, "id")), str(rawjson.Get(c, "name")), str(rawjson.Get(c, "argumentsDelta")))
			case "block-start":
				s.BlockStart(t, i, str(rawjson.Get(c, "blockType")))
			case "block-end":
				// Fixed verbatim, whatever it holds: a stored block is
				// not rebuilt from what this build knows of it.
				blk := rawjson.Get(c, "block")
				if i >= 0 {
					if b := s.block(i, str(rawjson.Get(blk, "type"))); b.fixed == nil {
						b.fixed, b.typ = blk, str(rawjson.Get(blk, "type"))
					}
				}
			}
		}
	}
	return &s
}
