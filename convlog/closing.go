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
			d = append(d, `,"source":{"kind":"model","provider":`...)
			d = rawjson.AppendString(d, ts.Provider)
			d = append(d, `,"model":`...)
			d = rawjson.AppendString(d, ts.Model)
			d = append(d, `},"id":`...)
			d = rawjson.AppendString(d, fmt.Sprintf("interrupted-answer-%d", ts.AttemptSeq))
			d = append(d, `},"stream":[],"interrupted":true}`...)
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

// partialContent rebuilds what a cut-off model call produced from the
// stream of its assistant/attempt, read as the format documents it
// (content.go's checkStream admitted it): blocks in the order their index
// first appears; a block-start opens one (its type), text and reasoning
// deltas (text-chunks and reasoning-chunks records, text-delta and
// reasoning-delta chunks) add to theirs, the first block-end fixes one as
// it is. What it returns is a JSON array of the text and reasoning blocks
// whose text is not all white space (a block the stream finished as it
// was; an unfinished one from its deltas, marked "interrupted":true), or
// nil when there is none: tool calls it had not finished asking for never
// ran.
func partialContent(attempt []byte) []byte {
	type block struct {
		kind  string
		text  []byte
		final []byte
	}
	var order []*block
	byIndex := map[int64]*block{}
	get := func(index []byte, kind string) *block {
		i, _ := rawjson.Int(index)
		b := byIndex[i]
		if b == nil {
			b = &block{kind: kind}
			byIndex[i] = b
			order = append(order, b)
		} else if b.kind == "" {
			b.kind = kind
		}
		return b
	}
	addText := func(b *block, raw []byte) {
		if b.final == nil {
			b.text, _ = rawjson.AppendUnquote(b.text, raw)
		}
	}
	for it := rawjson.Array(rawjson.Get(attempt, "stream")); ; {
		rec, ok := it.Next()
		if !ok {
			break
		}
		switch typ := str(rawjson.Get(rec, "type")); typ {
		case "text-chunks", "reasoning-chunks":
			b := get(rawjson.Get(rec, "index"), strings.TrimSuffix(typ, "-chunks"))
			for ti := rawjson.Array(rawjson.Get(rec, "texts")); ; {
				t, ok := ti.Next()
				if !ok {
					break
				}
				addText(b, t)
			}
		case "tool-call-chunks":
			get(rawjson.Get(rec, "index"), "tool-call")
		case "chunk":
			c := rawjson.Get(rec, "chunk")
			index := rawjson.Get(c, "index")
			switch ct := str(rawjson.Get(c, "type")); ct {
			case "text-delta", "reasoning-delta":
				addText(get(index, strings.TrimSuffix(ct, "-delta")), rawjson.Get(c, "text"))
			case "tool-call-delta":
				get(index, "tool-call")
			case "block-start":
				get(index, str(rawjson.Get(c, "blockType")))
			case "block-end":
				blk := rawjson.Get(c, "block")
				if b := get(index, str(rawjson.Get(blk, "type"))); b.final == nil {
					b.final = blk
				}
			}
		}
	}
	out := []byte{'['}
	n := 0
	for _, b := range order {
		var blk []byte
		switch {
		case b.kind != "text" && b.kind != "reasoning":
			continue // a tool call that was not finished never ran
		case b.final != nil:
			if t, _ := rawjson.String(rawjson.Get(b.final, "text")); strings.TrimSpace(t) == "" {
				continue
			}
			blk = b.final
		case strings.TrimSpace(string(b.text)) != "":
			blk = rawjson.AppendString([]byte(`{"type":`), b.kind)
			blk = append(blk, `,"text":`...)
			blk = rawjson.AppendString(blk, string(b.text))
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
