package convlog

import (
	"cmp"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"

	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
)

// pathRole is what an event type is to a turn's path (docs/FORMAT.md, "A
// turn's path"), which a pathState follows event by event.
type pathRole uint8

const (
	roleNone pathRole = iota
	roleTurnStart
	roleTurnEnd
	roleStepStart
	roleStepEnd
	roleInStep  // belongs to the open step: requests, attempts, prompts
	roleAnswer  // assistant/message: in the open step; announces tool calls
	roleAttempt // assistant/attempt: in the open step; a model call without an answer
	roleRetry   // llm/retry, llm/retry-started: the attempt before is retried
	roleToolCall
	roleToolResult
	roleSplice  // agent/inbox/spliced: input taken from the inbox
	roleEndSeed // session/end-seed
)

// TurnEndKinds are the reasons a turn/end may give (data.reason.kind).
var TurnEndKinds = []string{"completed", "aborted", "blocked", "error", "max-tokens", "interrupted", "forked"}

// eventFields are the members of an event's data the path reads.
type eventFields struct {
	turn, step       int64
	hasTurn, hasStep bool
	// callID: tool/call's callId, or the call a tool result answers.
	callID []byte
	// toolCalls: an answer's tool-call blocks; advertised (version 4)
	// their names and arguments too.
	toolCalls  []string
	advertised []advertised
	name, args []byte // tool/call's, raw
	hasError   bool
	reasonKind string
	hasReason  bool
	// spliceNext: a non-empty "next-turn" inbox splice.
	spliceNext       bool
	inherited        bool
	target, inserted []byte
}

// read takes the fields, and data's member msgKey into msg, in one walk of
// data or none when the reader kept its members.
func (f *eventFields) read(e *Event, msgKey string, msg *[]byte) error {
	if e.scanned {
		for _, m := range e.dataMembers {
			f.member(m, msgKey, msg)
		}
	} else if err := rawjson.EachMember(e.Data, func(m member) bool {
		f.member(m, msgKey, msg)
		return true
	}); err != nil {
		return err
	}
	f.spliceNext = string(f.target) == `"next-turn"` && len(f.inserted) > 0 && f.inserted[0] == '[' && !rawjson.EmptyArray(f.inserted)
	return nil
}

func (f *eventFields) member(m member, msgKey string, msg *[]byte) {
	switch string(m.Key) {
	case "turn":
		f.turn, f.hasTurn = rawjson.Int(m.Value)
	case "step":
		f.step, f.hasStep = rawjson.Int(m.Value)
	case "callId":
		f.callID = unquoted(m.Value)
	case "name":
		f.name = m.Value
	case "arguments":
		f.args = m.Value
	case "error":
		f.hasError = true
	case "reason":
		f.hasReason = true
		f.reasonKind = str(rawjson.Get(m.Value, "kind"))
	case "target":
		f.target = m.Value
	case "inserted":
		f.inserted = m.Value
	case "inherited":
		f.inherited = string(m.Value) == "true"
	default:
		if msgKey != "" && string(m.Key) == msgKey {
			*msg = m.Value
		}
	}
}

// callRec is one tool call of the open turn.
type callRec struct {
	seq      int64 // the event that made it known
	started  bool  // a tool/call recorded it
	resolved bool  // its tool/result came
	// sig is the hash of the name and arguments the answer asked with (0:
	// not known).
	sig uint64
}

// callSig is the signature a tool/call must repeat of its answer's block.
func callSig(name, args []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(idSeeds[0])
	h.Write(name)
	h.WriteByte(0)
	h.Write(args)
	return h.Sum64() | 1
}

// pathState is where a session's path stands.
type pathState struct {
	version            int
	open, stepOpen     bool
	turn, step         int64
	lastTurn, lastStep int64
	lastReason         string // the last turn/end's reason kind
	// spliced: the previous event was a non-empty next-turn splice.
	spliced bool
	// afterInherited: no turn started since inherited history, whose turns
	// a fork may not copy: the next turn may take any greater number.
	afterInherited bool
	calls          map[string]callRec
	order          []string // the open turn's calls, as they became known
	// pending counts the calls of calls without their result.
	pending int
	// attempt is the open step's last assistant/attempt that neither an
	// answer nor a retry followed: a model call cut off.
	attempt    []byte
	attemptSeq int64
	j          *journal
}

func (p *pathState) setCall(id string, rec callRec) {
	if _, ok := p.calls[id]; !ok {
		p.order = append(p.order, id)
	}
	set(p.j, &p.calls, id, rec)
}

// unresolved is a call of the open turn that a version 4 log leaves
// without its result ("" when none).
func (p *pathState) unresolved() string {
	if p.version < CurrentVersion || p.pending == 0 {
		return ""
	}
	for _, id := range p.order {
		if !p.calls[id].resolved {
			return id
		}
	}
	return ""
}

// idOf is id as the string order holds when it can, so that recording a
// call's events makes no new string.
func (p *pathState) idOf(id []byte) string {
	for i := len(p.order) - 1; i >= max(0, len(p.order)-8); i-- {
		if p.order[i] == string(id) {
			return p.order[i]
		}
	}
	return string(id)
}

// newTurnCalls forgets the calls of the turn that ended; the writer, which
// may go back to them, starts a new map.
func (p *pathState) newTurnCalls() {
	p.attempt, p.pending = nil, 0
	if p.j.on || p.calls == nil {
		p.calls, p.order = nil, nil
		return
	}
	clear(p.calls)
	p.order = p.order[:0]
}

// check says what is wrong with e at this point of the path, "" when
// nothing.
func (p *pathState) check(e *Event, role pathRole, f *eventFields, spliced bool) string {
	switch role {
	case roleTurnStart:
		if !f.hasTurn || f.turn < 1 {
			return "turn/start needs a turn number (a positive integer)"
		}
		if p.open {
			if p.closesByUpgrade(f, spliced) {
				return ""
			}
			return fmt.Sprintf("turn %d starts while turn %d is still open: a turn must end before the next one starts", f.turn, p.turn)
		}
		if f.turn <= p.lastTurn {
			return fmt.Sprintf("turn/start opens turn %d, but turn %d was already started", f.turn, p.lastTurn)
		}
		if p.version >= CurrentVersion && f.turn != p.lastTurn+1 && !p.afterInherited {
			return fmt.Sprintf("turn/start opens turn %d, but the next turn is %d: turns are numbered 1, 2, 3, ...", f.turn, p.lastTurn+1)
		}
	case roleTurnEnd:
		switch {
		case !p.open && f.hasTurn:
			return fmt.Sprintf("turn/end of turn %d without its turn/start", f.turn)
		case !p.open:
			return "turn/end without its turn/start"
		case f.hasTurn && f.turn != p.turn:
			return fmt.Sprintf("turn/end closes turn %d, but turn %d is open", f.turn, p.turn)
		case p.stepOpen:
			return fmt.Sprintf("turn %d ends while its step %d is still open", p.turn, p.step)
		}
		if id := p.unresolved(); id != "" {
			return fmt.Sprintf("turn/end leaves unresolved tool call %s: every call the turn made gets its result first", termtext.Quote(id))
		}
		if p.version >= 1 {
			if !f.hasReason || f.reasonKind == "" {
				return "turn/end needs a reason with a kind (" + strings.Join(TurnEndKinds, ", ") + ")"
			}
			if !slices.Contains(TurnEndKinds, f.reasonKind) {
				return fmt.Sprintf("turn/end reason kind %s is not one of %s", termtext.Quote(f.reasonKind), strings.Join(TurnEndKinds, ", "))
			}
		}
	case roleStepStart:
		switch {
		case !p.open:
			return "step/start outside a turn"
		case f.hasTurn && f.turn != p.turn:
			return fmt.Sprintf("step/start names turn %d, but turn %d is open", f.turn, p.turn)
		case p.stepOpen:
			return fmt.Sprintf("step starts while step %d of turn %d is still open", p.step, p.turn)
		case !f.hasStep || f.step < 1:
			return "step/start needs a step number (a positive integer)"
		case f.step <= p.lastStep:
			return fmt.Sprintf("step/start opens step %d, but step %d of turn %d was already started", f.step, p.lastStep, p.turn)
		case p.version >= CurrentVersion && f.step != p.lastStep+1:
			return fmt.Sprintf("step/start opens step %d, but the next step of turn %d is %d", f.step, p.turn, p.lastStep+1)
		}
	case roleStepEnd:
		switch {
		case !p.open:
			return "step/end outside a turn"
		case !p.stepOpen:
			return fmt.Sprintf("step/end without its step/start (no step of turn %d is open)", p.turn)
		case (f.hasTurn && f.turn != p.turn) || (f.hasStep && f.step != p.step):
			return fmt.Sprintf("step/end closes step %d of turn %d, but step %d of turn %d is open", f.step, f.turn, p.step, p.turn)
		}
		if id := p.unresolved(); id != "" {
			return fmt.Sprintf("step/end leaves unresolved tool call %s: every call the step made gets its result first", termtext.Quote(id))
		}
	case roleInStep, roleAnswer, roleAttempt, roleToolCall, roleToolResult:
		switch {
		case !p.open:
			return "outside a step (no turn is open): " + belongs(e, role)
		case !p.stepOpen:
			return fmt.Sprintf("outside a step (turn %d has no open step): %s", p.turn, belongs(e, role))
		case (f.hasTurn && f.turn != p.turn) || (f.hasStep && f.hasTurn && f.step != p.step):
			return fmt.Sprintf("names step %d of turn %d, but step %d of turn %d is open", f.step, f.turn, p.step, p.turn)
		}
		switch role {
		case roleAnswer:
			if p.version >= CurrentVersion {
				for _, id := range f.toolCalls {
					if rec, ok := p.calls[id]; ok && !rec.resolved {
						return fmt.Sprintf("assistant/message repeats advertised tool call %s, which has no result yet", termtext.Quote(id))
					}
				}
			}
		case roleToolCall:
			if len(f.callID) == 0 {
				return "tool/call needs a callId"
			}
			rec, ok := p.calls[string(f.callID)]
			if ok && rec.started {
				return fmt.Sprintf("tool call %s is recorded twice", termtext.Quote(string(f.callID)))
			}
			if p.version >= CurrentVersion {
				switch {
				case !ok || rec.resolved:
					return fmt.Sprintf("tool/call %s has no advertised tool lifecycle: no answer of turn %d asked for it (or it has its result)", termtext.Quote(string(f.callID)), p.turn)
				case rec.sig != 0 && rec.sig != callSig(f.name, f.args):
					return fmt.Sprintf("tool/call %s does not match one advertised tool call: its name and arguments are not the answer's", termtext.Quote(string(f.callID)))
				}
			}
		case roleToolResult:
			if len(f.callID) == 0 {
				if p.version >= CurrentVersion {
					return "a tool result needs the id of its call"
				}
				return ""
			}
			rec, ok := p.calls[string(f.callID)]
			if !ok {
				return fmt.Sprintf("tool result for call %s, which no answer or tool/call of turn %d made", termtext.Quote(string(f.callID)), p.turn)
			}
			if rec.resolved {
				return fmt.Sprintf("tool call %s already has its result", termtext.Quote(string(f.callID)))
			}
		}
	}
	return ""
}

// belongs says what an event outside a step should have been inside.
func belongs(e *Event, role pathRole) string {
	what := map[pathRole]string{roleAnswer: "an answer", roleAttempt: "a model call", roleToolCall: "a tool call", roleToolResult: "a tool result"}[role]
	if e.Type == "request/header" || e.Type == "request/context" {
		what = "a request"
	}
	return cmp.Or(what, "it") + " belongs to a step"
}

// closesByUpgrade: a restart that an older version's upgrade closes as
// interrupted (v3→v4 item 6).
func (p *pathState) closesByUpgrade(f *eventFields, spliced bool) bool {
	return p.version < CurrentVersion && !p.stepOpen && spliced && f.turn == p.turn+1
}

// apply moves the path past e, which check accepted.
func (p *pathState) apply(e *Event, role pathRole, f *eventFields) {
	switch role {
	case roleTurnStart:
		p.open, p.turn, p.lastTurn, p.afterInherited = true, f.turn, f.turn, false
		p.stepOpen, p.step, p.lastStep = false, 0, 0
		p.newTurnCalls()
	case roleTurnEnd:
		p.open, p.stepOpen, p.lastReason = false, false, f.reasonKind
		p.newTurnCalls()
	case roleStepStart:
		p.stepOpen, p.step, p.lastStep = true, f.step, f.step
		p.attempt = nil
	case roleStepEnd:
		p.stepOpen, p.attempt = false, nil
	case roleAnswer:
		p.attempt = nil
		for i, id := range f.toolCalls {
			rec, ok := p.calls[id]
			if ok && (!rec.resolved || p.version < CurrentVersion) {
				continue
			}
			rec = callRec{seq: e.Seq}
			if i < len(f.advertised) {
				rec.sig = callSig(f.advertised[i].name, f.advertised[i].args)
			}
			p.setCall(id, rec)
			p.pending++
		}
	case roleAttempt:
		p.attempt, p.attemptSeq = append([]byte(nil), e.Data...), e.Seq
	case roleRetry:
		p.attempt = nil
	case roleToolCall:
		rec, ok := p.calls[string(f.callID)]
		if !ok {
			rec = callRec{seq: e.Seq}
			p.pending++
		}
		rec.started = true
		p.setCall(p.idOf(f.callID), rec)
	case roleToolResult:
		if rec, ok := p.calls[string(f.callID)]; ok {
			if !rec.resolved {
				p.pending--
			}
			rec.resolved = true
			p.setCall(p.idOf(f.callID), rec)
		}
	case roleSplice:
		p.spliced = f.spliceNext
	}
}

// TurnState is where a session's turn stands after the events read so far.
type TurnState struct {
	// Open: a turn started and has not ended (it runs, or a crash left it).
	Open     bool
	Turn     int64
	StepOpen bool
	// Step is the open step, or the last step of the open turn.
	Step int64
	// LastTurn is the highest turn started since the inherited history (0:
	// none); LastEnd is the last turn/end's reason kind.
	LastTurn int64
	LastEnd  string
	// Calls are the open turn's tool calls without a result, in order.
	Calls []OpenCall
	// CutOff: the open step's last model call is only an assistant/attempt
	// (at AttemptSeq), which no answer or retry followed.
	CutOff     bool
	AttemptSeq int64
	attempt    []byte
	// Provider and Model are the last request/header's, a closing answer's
	// source.
	Provider, Model string
	// Compaction is the end the open compaction needs (nil: none open).
	Compaction *CompactionEndData
}

// OpenCall is a tool call without a result.
type OpenCall struct {
	ID  string
	Seq int64 // the answer that asked for it, or its tool/call
	// Started: a tool/call recorded that it ran.
	Started bool
}

// Turn reports where the session's turn stands.
func (v *Validator) Turn() TurnState {
	p := &v.path
	ts := TurnState{Open: p.open, Turn: p.turn, StepOpen: p.stepOpen, Step: p.step, LastTurn: p.lastTurn, LastEnd: p.lastReason,
		Provider: v.rel.provider, Model: v.rel.model}
	if c := v.rel.comp; c.open {
		ts.Compaction = &CompactionEndData{CompactionID: c.id, SourceCommandID: c.cmd}
		if c.turn >= 0 {
			ts.Compaction.Turn = &c.turn
		}
	}
	if !p.open {
		return ts
	}
	for _, id := range p.order {
		if rec := p.calls[id]; !rec.resolved {
			ts.Calls = append(ts.Calls, OpenCall{ID: id, Seq: rec.seq, Started: rec.started})
		}
	}
	if p.attempt != nil && p.stepOpen {
		ts.CutOff, ts.AttemptSeq, ts.attempt = true, p.attemptSeq, p.attempt
	}
	return ts
}
