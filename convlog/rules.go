package convlog

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/convkit/convkit/display"
)

// The rules an event must keep beyond its own line (docs/FORMAT.md,
// "Validation"): stored messages carry an identity and a source, surface
// operations apply to the history, and a session's turns follow their path
// (turn, step, request, answer, tool calls and results). One Validator
// checks them for the writer (before a batch is written), inspect
// --validate and reindex, so the three agree on what a valid log is.

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

// RuleError is an event that breaks a rule. The writer returns it (wrapped
// with the log's path) before anything of the batch is written; readers
// report it at the event's line.
type RuleError struct {
	Seq  int64
	Type string
	Msg  string
	// Kind is ErrMessageIdentity, ErrTurnPath or ErrHistory.
	Kind error
}

func (e *RuleError) Error() string { return fmt.Sprintf("%s at seq %d: %s", e.Type, e.Seq, e.Msg) }

func (e *RuleError) Unwrap() error { return e.Kind }

// Validator checks the events of one log, in order, against the rules
// beyond a single line. Its cost is a state machine per event over the
// members of the event's data (a scan of bytes already validated) and, for
// a surface event, of its message; memory is a few words per surface
// message (the history's structure, no bodies) and per tool call of the
// open turn.
//
// Version 4 session logs are checked whole. Older session logs are checked
// for the turn's path only, with the upgrade chain's repair: a turn left
// open and followed, after a non-empty "next-turn" agent/inbox/spliced, by
// the next turn's turn/start is closed as interrupted, as the v3→v4 step
// closes it (older versions get identities and sources from the upgrade).
// Conversation logs have no turns of this kind: nothing is checked.
type Validator struct {
	// strict (the writer's): a refused event changes nothing. A reader's
	// validator still replays the history past a misplaced event.
	strict  bool
	session bool
	version int
	reg     *Registry
	hist    History
	path    pathState
	// seeded: the log begins with inherited history, exempt from the path
	// (it is the source's), until the first inherited session/end-seed
	// (versions 2-4) or below seq seedLen (versions 0-1).
	seeded, inSeed bool
	seedLen        int64
	marker         bool

	calls   []string
	types   [16]*TypeInfo
	ntypes  int
	lastMsg []byte
}

// NewValidator returns a validator for the log whose header is h. reg nil
// is DefaultRegistry.
func NewValidator(h *Header, reg *Registry) *Validator {
	if reg == nil {
		reg = DefaultRegistry
	}
	v := &Validator{session: h.Type == SessionLog, version: h.Version, reg: reg, seedLen: -1}
	v.hist.SkipBodies = true
	v.path.version = h.Version
	switch {
	case h.Version <= 1 && h.SeedLength != nil:
		v.seeded, v.inSeed, v.seedLen = true, *h.SeedLength > 0, *h.SeedLength
	case h.Version >= 2 && h.IsSeeded:
		v.seeded, v.inSeed = true, true
	}
	return v
}

func newStrictValidator(h *Header, reg *Registry) *Validator {
	v := NewValidator(h, reg)
	v.strict = true
	return v
}

func (v *Validator) lookup(name string) *TypeInfo {
	for _, t := range v.types {
		if t != nil && t.Name == name {
			return t
		}
	}
	t := v.reg.Lookup(name)
	if t != nil {
		v.types[v.ntypes%len(v.types)] = t
		v.ntypes++
	}
	return t
}

// Message is the stored message the last checked surface event carries
// (raw, as stored), or nil: readers that want its text need not find it
// again.
func (v *Validator) Message() []byte { return v.lastMsg }

// Check checks the next event of the log. The event must come from a Reader
// or the writer's own parse (its data is validated JSON). A nil error means
// the event keeps every rule; a *RuleError says which it breaks, and the
// validator's state is then as if the event had not been seen.
func (v *Validator) Check(e *Event) error {
	v.lastMsg = nil
	if !v.session || e.Packed > 0 {
		return nil
	}
	if v.inSeed && v.seedLen >= 0 && e.Seq >= v.seedLen {
		v.inSeed = false
	}
	spliced := v.path.spliced
	v.path.spliced = false
	info := e.info
	if info == nil || info.Name != e.Type {
		info = v.lookup(e.Type)
	}
	if info == nil || (!e.Known && e.Ignorable) {
		return nil
	}
	role := info.role
	if role == 0 && !info.Surface {
		return nil
	}
	rerr := func(kind error, format string, args ...any) *RuleError {
		return &RuleError{Seq: e.Seq, Type: e.Type, Msg: fmt.Sprintf(format, args...), Kind: kind}
	}
	var f eventFields
	var msg []byte
	if info.Surface && info.MessagePath == "" {
		msg = e.Data
	}
	if info.MessagePath != "" || role != 0 {
		if err := f.read(e, info.MessagePath, &msg); err != nil {
			switch {
			case info.Surface && v.version >= CurrentVersion:
				return rerr(ErrMessageIdentity, "data is not a JSON object: a surface event carries a stored message")
			case role == roleEndSeed || info.Surface:
				return nil
			}
			return rerr(ErrTurnPath, "data is not a JSON object")
		}
	}
	var mf messageFields
	if msg != nil {
		ok := true
		switch {
		case info.MessagePath == "" && e.scanned:
			mf = messageOf(e.dataMembers) // data is the message
		case info.MessagePath == "message" && e.msgScanned:
			mf = messageOf(e.msgMembers)
		default:
			mf, ok = scanMessage(msg)
		}
		if v.version >= CurrentVersion {
			if !ok {
				return rerr(ErrMessageIdentity, "message is not a JSON object")
			}
			if ierr := mf.identityError(); ierr != nil {
				return rerr(ErrMessageIdentity, "%v", ierr)
			}
			if e.Type == TypeToolResult && (!nonEmptyString(mf.toolCallID) || !bytes.Equal(unquoted(mf.toolCallID), unquoted(mf.sourceCallID))) {
				return rerr(ErrMessageIdentity, "tool result %s needs a toolCallId equal to its source's callId (toolCallId %s, source callId %s)",
					display.Quote(str(mf.id)), display.Quote(str(mf.toolCallID)), display.Quote(str(mf.sourceCallID)))
			}
		}
		f.callID = unquoted(mf.toolCallID)
		if len(f.callID) == 0 {
			f.callID = unquoted(mf.sourceCallID)
		}
		if e.Type == TypeAssistantMessage {
			v.calls = toolCallIDs(mf.content, v.calls[:0])
			f.toolCalls = v.calls
		}
	} else if info.Surface && v.version >= CurrentVersion {
		return rerr(ErrMessageIdentity, "data has no %s: a surface event carries a stored message", display.Quote(info.MessagePath))
	}
	if role == roleEndSeed && f.inherited {
		if !v.seeded {
			return rerr(ErrHistory, "an inherited session/end-seed marker in a log whose header is not seeded")
		}
	}
	var first *RuleError
	if !v.inSeed {
		if perr := v.path.check(e, role, &f, spliced); perr != "" {
			first = rerr(ErrTurnPath, "%s", perr)
			if v.strict {
				return first
			}
		}
	}
	if info.Surface && v.version >= CurrentVersion {
		// A reader replays the history even past a path problem, so that
		// one misplaced event is one problem.
		// Interpreters read the role, the kind and whether the answer is
		// empty: the stub is made of those, without decoding more.
		sm := StoredMessage{role: roleOf(mf.role), raw: stubContent(mf.content)}
		if err := info.Interpret(&v.hist, e, sm); err != nil && first == nil {
			return rerr(ErrHistory, "%v", trimEventPrefix(err, e))
		}
	}
	if first != nil {
		return first
	}
	if !v.inSeed {
		v.path.apply(e, role, &f)
	}
	if role == roleEndSeed && f.inherited {
		v.marker = true
		if v.inSeed {
			v.inSeed = false
			v.path.afterSeed()
		}
	}
	v.lastMsg = msg
	return nil
}

// Finish reports what only the end of the log shows: a seeded log (version
// 2 or later) without its inherited session/end-seed marker. A turn still
// open is not a problem: it is running, or a crash left it (Turn says so).
func (v *Validator) Finish() error {
	if v.session && v.version >= 2 && v.seeded && !v.marker {
		return &RuleError{Seq: -1, Type: "session", Msg: "the header says the log is seeded, but no inherited session/end-seed marker ends its inherited history", Kind: ErrHistory}
	}
	return nil
}

// trimEventPrefix drops the "type at seq N: " an interpreter's error starts
// with: RuleError says it once.
func trimEventPrefix(err error, e *Event) string {
	s := err.Error()
	p := fmt.Sprintf("%s at seq %d", e.Type, e.Seq)
	if rest, ok := strings.CutPrefix(s, p); ok {
		return strings.TrimPrefix(strings.TrimPrefix(rest, ":"), " ")
	}
	return s
}

// stubContent stands for a message's content when bodies are not kept: an
// empty answer stays empty.
func stubContent(content []byte) []byte {
	if emptyArray(content) {
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
	nodes          int
	saved          []historyNode
	inSeed, marker bool
}

// mark saves the state before events are checked. Appends to the history
// are undone by length; a replacement (a compaction: rare) makes a copy.
func (v *Validator) mark(events []Event) validatorMark {
	m := validatorMark{path: v.path, nodes: len(v.hist.nodes), inSeed: v.inSeed, marker: v.marker}
	for i := range events {
		if events[i].SurfaceOp != nil && events[i].SurfaceOp.Replace {
			m.saved = append([]historyNode(nil), v.hist.nodes...)
			break
		}
	}
	v.path.journal = v.path.journal[:0]
	v.path.journaling = true
	return m
}

// reset goes back to the state mark saved.
func (v *Validator) reset(m validatorMark) {
	v.path.rollback()
	journal := v.path.journal
	v.path = m.path
	v.path.journal = journal[:0]
	v.inSeed, v.marker = m.inSeed, m.marker
	if m.saved != nil {
		v.hist.nodes = m.saved
	} else {
		v.hist.nodes = v.hist.nodes[:m.nodes]
	}
}

// commit ends a batch that was written.
func (v *Validator) commit() {
	v.path.journaling = false
	v.path.journal = v.path.journal[:0]
}
