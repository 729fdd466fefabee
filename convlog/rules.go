package convlog

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
)

// The rules beyond one line (docs/FORMAT.md, "Validation"), checked by one
// Validator for the writer, inspect and reindex alike.

// The kinds of rule an event can break; a *RuleError wraps one.
var (
	// ErrMessageIdentity: a stored message without an id, a role or a
	// source with a producer-owned kind.
	ErrMessageIdentity = errors.New("stored message without identity or source")
	// ErrTurnPath: an event outside its place in the turn's path.
	ErrTurnPath = errors.New("event outside the turn's path")
	// ErrHistory: a surface operation that does not apply to the history,
	// or an inherited history marked wrongly.
	ErrHistory = errors.New("event does not apply to the history")
)

// RuleError is an event that breaks a rule; the writer returns it before
// anything of the batch is written.
type RuleError struct {
	Seq  int64
	Type string
	Msg  string
	// Member is the member the problem is in ("data.stream[2].dt"), ""
	// when it is the event as a whole.
	Member string
	// Kind is ErrPayload, ErrWrongLog, ErrMessageIdentity, ErrTurnPath,
	// ErrHistory or ErrRelationship.
	Kind error
}

func (e *RuleError) Error() string {
	if e.Member != "" {
		return fmt.Sprintf("%s at seq %d: %s: %s", e.Type, e.Seq, e.Member, e.Msg)
	}
	return fmt.Sprintf("%s at seq %d: %s", e.Type, e.Seq, e.Msg)
}

func (e *RuleError) Unwrap() error { return e.Kind }

// Rule is the name of the rule broken: payload, wrong-log, message,
// turn-path, history or relationship (docs/FORMAT.md, "Test vectors").
func (e *RuleError) Rule() string {
	for _, r := range ruleNames {
		if r.kind == e.Kind {
			return r.name
		}
	}
	return "other"
}

var ruleNames = []struct {
	kind error
	name string
}{{ErrPayload, "payload"}, {ErrWrongLog, "wrong-log"}, {ErrMessageIdentity, "message"}, {ErrTurnPath, "turn-path"},
	{ErrHistory, "history"}, {ErrRelationship, "relationship"}}

// Validator checks the events of one log in order, in a few words per
// surface message and open tool call: a version 4 session log whole, an
// older one's turn path only, a conversation log's payloads and turns.
type Validator struct {
	// strict (the writer's): a refused event changes nothing. A reader's
	// validator still replays the history past a misplaced event.
	strict  bool
	session bool
	version int
	hist    History
	path    pathState
	// seeded: the log begins with inherited history, exempt from the path,
	// until its session/end-seed (versions 2-4) or seq seedLen (0-1).
	seeded, inSeed bool
	seedLen        int64
	marker         bool

	calls   []string
	lastMsg []byte

	// id is the header's id; rel the relationships' state (relations.go),
	// bi what the last message's content held.
	id      string
	rel     relState
	journal journal
	bi      blockInfo
	// turns: a conversation log's turns, each recorded once.
	turns TurnRecords
}

// NewValidator returns a validator for the log whose header is h.
func NewValidator(h *Header) *Validator {
	v := &Validator{session: h.Type == SessionLog, version: h.Version, seedLen: -1, id: h.ID}
	v.hist.skipBodies = true
	v.path.version, v.path.j, v.rel.j, v.turns.j = h.Version, &v.journal, &v.journal, &v.journal
	switch {
	case h.Version <= 1 && h.SeedLength != nil:
		v.seeded, v.inSeed, v.seedLen = true, *h.SeedLength > 0, *h.SeedLength
	case h.Version >= 2 && h.IsSeeded:
		v.seeded, v.inSeed = true, true
	}
	return v
}

func newStrictValidator(h *Header) *Validator {
	v := NewValidator(h)
	v.strict = true
	return v
}

// Message is the stored message the last checked surface event carries
// (raw), or nil.
func (v *Validator) Message() []byte { return v.lastMsg }

// Check checks the next event of the log, whose data must be validated
// JSON. A *RuleError says which rule it breaks, and the state is then as if
// the event had not been seen. The order: the type, the schema, a stored
// message, the turn's path, the relationships, the history.
func (v *Validator) Check(e *Event) error {
	v.lastMsg = nil
	if e.Packed > 0 {
		return nil
	}
	info := e.info
	if info == nil || info.name != e.Type {
		info = eventTypes[e.Type]
	}
	rerr := func(kind error, format string, args ...any) error {
		return &RuleError{Seq: e.Seq, Type: e.Type, Msg: fmt.Sprintf(format, args...), Kind: kind}
	}
	// first is the problem reported. A reader's validator goes on past a
	// schema problem, so that one bad event is one problem.
	var first error
	keep := func(err error) bool {
		if first == nil {
			first = err
		}
		return v.strict
	}
	sc := info // nil for an opaque record
	if !e.Known && e.Ignorable {
		sc = nil
	}
	if sc != nil && (sc.log == inSession) != v.session {
		if e.Ignorable {
			return nil // an opaque record in this kind of log
		}
		return rerr(ErrWrongLog, "a %s log's event type in a %s log: each kind of log has its own types", logNames[sc.log], logNames[inSession+inConversation-sc.log])
	}
	current := v.version >= CurrentVersion
	if current && sc != nil && sc.data != nil {
		// A request's header mostly repeats the one before, byte for byte
		// (its tools are most of it), and the logs of a store hold a
		// handful of headers, while a request's reason changes: a header
		// that repeats one admitted is not checked again (its check reads
		// it alone), the rest of the data is.
		var sum uint64
		var checked []byte
		if sc == headerSchema {
			if checked = e.dataMember("header"); checked != nil {
				sum = contentHash(checked)
			}
			if sum == 0 || admittedHeaders[(sum>>1)%uint64(len(admittedHeaders))].Load() != sum {
				checked = nil
			}
		}
		var p *problem
		if e.scanned {
			p = sc.data.checkKept(e.Data, e.dataMembers, checked)
		} else {
			p = sc.data.checkWalked(e.Data, checked)
		}
		if p != nil && keep(ruleProblem(e, p.in("data"))) {
			return first
		}
		if p == nil && sum != 0 && checked == nil {
			admittedHeaders[(sum>>1)%uint64(len(admittedHeaders))].Store(sum)
		}
	}
	if !v.session {
		if first == nil && (e.Type == "turn/started" || e.Type == "turn/ended") {
			return v.convTurn(e)
		}
		return first
	}
	if v.inSeed && v.seedLen >= 0 && e.Seq >= v.seedLen {
		v.inSeed = false
	}
	spliced := v.path.spliced
	v.path.spliced = false
	if info == nil || (!e.Known && e.Ignorable) {
		return nil
	}
	role := info.role
	if role == 0 && !info.surface {
		if current && !v.inSeed && first == nil {
			if p := v.relations(e, &eventFields{}, nil, nil); p != nil {
				return ruleProblem(e, p)
			}
		}
		return first
	}
	var f eventFields
	var msg []byte
	if info.surface && info.msgPath == "" {
		msg = e.Data
	}
	if info.msgPath != "" || role != 0 {
		if err := f.read(e, info.msgPath, &msg); err != nil {
			switch {
			case info.surface && current:
				return cmp.Or(first, rerr(ErrMessageIdentity, "data is not a JSON object: a surface event carries a stored message"))
			case role == roleEndSeed || info.surface:
				return first
			}
			return cmp.Or(first, rerr(ErrTurnPath, "data is not a JSON object"))
		}
	}
	var mf messageFields
	msgPath := "data.message"
	if info.msgPath == "" {
		msgPath = "data"
	}
	if msg != nil {
		ok := true
		switch {
		case info.msgPath == "" && e.scanned:
			mf = messageOf(e.dataMembers) // data is the message
		case info.msgPath == "message" && e.msgScanned:
			mf = messageOf(e.msgMembers)
		default:
			mf, ok = scanMessage(msg)
		}
		if current {
			if !ok {
				return cmp.Or(first, rerr(ErrMessageIdentity, "message is not a JSON object"))
			}
			if ierr := mf.identityError(); ierr != nil {
				return cmp.Or(first, rerr(ErrMessageIdentity, "%v", ierr))
			}
			if e.Type == TypeToolResult && (!nonEmptyString(mf.toolCallID) || !bytes.Equal(unquoted(mf.toolCallID), unquoted(mf.sourceCallID))) {
				return cmp.Or(first, rerr(ErrMessageIdentity, "tool result %s needs a toolCallId equal to its source's callId (toolCallId %s, source callId %s)",
					termtext.Quote(str(mf.id)), termtext.Quote(str(mf.toolCallID)), termtext.Quote(str(mf.sourceCallID))))
			}
			v.bi.calls, v.bi.additions = v.bi.calls[:0], v.bi.additions[:0]
			if p := checkMessageBody(&mf, info.msg, &v.bi); p != nil && keep(ruleProblem(e, p.in(msgPath))) {
				return first
			}
			if e.Type == TypeToolResult && f.hasError && string(mf.isError) != "true" &&
				keep(rerr(ErrPayload, "tool result %s carries error metadata (data.error) but is not an error (isError is not true)", termtext.Quote(str(mf.id)))) {
				return first
			}
		}
		f.callID = unquoted(mf.toolCallID)
		if len(f.callID) == 0 {
			f.callID = unquoted(mf.sourceCallID)
		}
		if e.Type == TypeAssistantMessage {
			v.calls = v.calls[:0]
			if current {
				for _, c := range v.bi.calls {
					v.calls = append(v.calls, str(c.id))
				}
				f.advertised = v.bi.calls
			} else {
				v.calls = toolCallIDs(mf.content, v.calls)
			}
			f.toolCalls = v.calls
		}
	} else if info.surface && current {
		return cmp.Or(first, rerr(ErrMessageIdentity, "data has no %s: a surface event carries a stored message", termtext.Quote(info.msgPath)))
	}
	if role == roleEndSeed && f.inherited && !v.seeded {
		return cmp.Or(first, rerr(ErrHistory, "an inherited session/end-seed marker in a log whose header is not seeded"))
	}
	// blocked: the event breaks the path, a relationship or the history,
	// and is not applied.
	blocked := false
	block := func(err error) bool {
		blocked = true
		return keep(err)
	}
	// The inherited history's path is followed where it holds, so a fork's
	// closers find the turn it left open, but never reported.
	pathOK := true
	if perr := v.path.check(e, role, &f, spliced); perr != "" {
		pathOK = false
		if !v.inSeed && block(rerr(ErrTurnPath, "%s", perr)) {
			return first
		}
	}
	if current && !v.inSeed && !blocked {
		if p := v.relations(e, &f, &v.bi, &mf); p != nil && block(ruleProblem(e, p)) {
			return first
		}
	}
	wasEmpty := len(v.hist.nodes) == 0
	if info.surface && current {
		if p := v.surfaceRules(e); p != nil && block(ruleProblem(e, p)) {
			return first
		}
		if p := v.messageID(e, mf.id, msg, e.Type == TypeUserMessage); p != nil && block(ruleProblem(e, p.in(msgPath+".id"))) {
			return first
		}
		// A reader replays the history even past a path problem. The
		// interpreters read only the role and content: the stub has those.
		sm := StoredMessage{role: roleOf(mf.role), raw: stubContent(mf.content)}
		if err := info.interpret(&v.hist, e, sm); err != nil && block(rerr(ErrHistory, "%v", err)) {
			return first
		}
	}
	if blocked {
		return first
	}
	if pathOK && (!v.inSeed || current) {
		v.path.apply(e, role, &f)
	}
	if e.Type == TypeSystemMessage && current && e.SurfaceOp != nil && !e.SurfaceOp.Replace && wasEmpty {
		v.rel.head = true // the protected system head
	}
	if role == roleEndSeed && f.inherited {
		v.marker = true
		v.rel.comp = compaction{}
		if v.inSeed {
			v.inSeed = false
			if !current {
				// The path starts afresh: the inherited turns are numbered
				// as the source's.
				v.path = pathState{version: v.path.version, j: v.path.j}
			}
			v.path.afterInherited = true
		}
	}
	v.lastMsg = msg
	return first
}

// convTurn checks a conversation log's turn/started or turn/ended
// against the turns recorded before it.
func (v *Validator) convTurn(e *Event) error {
	session, ok := rawjson.String(e.dataMember("sessionId"))
	turn, isInt := rawjson.Int(e.dataMember("turn"))
	if !ok || !isInt {
		return nil // an older log's, whose schema is not checked
	}
	_, err := v.turns.Add(e, session, turn)
	return err
}

// admittedHeaders are the hashes of request headers this process found to
// keep their schema, one a slot, which any validator takes as checked.
var admittedHeaders [64]atomic.Uint64

// ruleProblem is a schema or relationship problem as a *RuleError.
func ruleProblem(e *Event, p *problem) *RuleError {
	kind := p.kind
	if kind == nil {
		kind = ErrPayload
	}
	return &RuleError{Seq: e.Seq, Type: e.Type, Member: p.path, Msg: p.msg, Kind: kind}
}

var logNames = [...]string{inSession: "session", inConversation: "conversation"}

// Finish reports what only the end shows: a seeded log (version 2 or later)
// without its session/end-seed. A turn still open is no problem.
func (v *Validator) Finish() error {
	if v.session && v.version >= 2 && v.seeded && !v.marker {
		return &RuleError{Seq: -1, Type: "session", Msg: "the header says the log is seeded, but no inherited session/end-seed marker ends its inherited history", Kind: ErrHistory}
	}
	return nil
}

// stubContent stands for a message's content when bodies are not kept: an
// empty answer stays empty. It is shared: never written to.
func stubContent(content []byte) []byte {
	if rawjson.EmptyArray(content) {
		return emptyStub
	}
	return fullStub
}

var emptyStub, fullStub = []byte(`{"content":[]}`), []byte(`{"content":[null]}`)

func memberValue(ms []member, key string) []byte {
	for _, m := range ms {
		if string(m.Key) == key {
			return m.Value
		}
	}
	return nil
}

// validatorMark is a validator's state before a batch, for the writer to
// go back to when the batch is refused.
type validatorMark struct {
	path           pathState
	rel            relScalars
	nodes          int
	saved          []SurfaceNode
	inSeed, marker bool
}

// mark saves the state before events are checked. Appends to the history
// are undone by length; a replacement (a compaction: rare) makes a copy.
func (v *Validator) mark(events []Event) validatorMark {
	m := validatorMark{path: v.path, rel: v.rel.relScalars, nodes: len(v.hist.nodes), inSeed: v.inSeed, marker: v.marker}
	for i := range events {
		if events[i].SurfaceOp != nil && events[i].SurfaceOp.Replace {
			m.saved = append([]SurfaceNode(nil), v.hist.nodes...)
			break
		}
	}
	v.journal.on = true
	return m
}

// reset goes back to the state mark saved.
func (v *Validator) reset(m validatorMark) {
	v.journal.end(true)
	v.rel.relScalars = m.rel
	v.path = m.path
	v.inSeed, v.marker = m.inSeed, m.marker
	if m.saved != nil {
		v.hist.nodes = m.saved
	} else {
		v.hist.nodes = v.hist.nodes[:m.nodes]
	}
}

// commit ends a batch that was written.
func (v *Validator) commit() { v.journal.end(false) }
