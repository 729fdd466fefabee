package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/display"
	"github.com/convkit/convkit/upgrade"
)

// The runtime's sessions: how a turn is recorded, stage by stage, in the
// session log and the conversation log (docs/FORMAT.md, "What a turn
// records"). The package doc is the manual.

// EventInboxSpliced records input taken from the conversation's inbox into
// a session: {"target":SpliceNextTurn|SpliceCurrentTurn,"inserted":[message]}.
const EventInboxSpliced = "agent/inbox/spliced"

// Splice targets.
const (
	// SpliceNextTurn admits the prompt that starts the next turn.
	SpliceNextTurn = "next-turn"
	// SpliceCurrentTurn hands a steering message to the running turn,
	// which reads it before its next model call.
	SpliceCurrentTurn = "current-turn"
)

// Errors of the session API.
var (
	ErrSessionOpen = errors.New("the session is already open")
	ErrNoTurn      = errors.New("no turn is running")
	ErrClosed      = errors.New("the session is closed")
)

// NewConversation describes a conversation to start: its id, working
// directory (an absolute path) and root session.
type NewConversation struct {
	ID        string
	Cwd       string
	SessionID string
	Agent     string
	Model     string
}

// Session is one agent session of a conversation, open for the runtime:
// its log open for appending, and the conversation log's record of its
// turns. Get one from NewConversation, OpenSession or Session.Spawn; a
// Session is used under the Store's lock, so its methods may be called
// from several goroutines.
type Session struct {
	st     *Store
	convID string
	id     string
	w      *convlog.Writer
	// pending is a new conversation nothing of which is written yet: it is
	// kept from its first message (BeginTurn).
	pending *NewConversation
	closed  bool
	// repaired is what OpenSession closed of a turn a crash left open.
	repaired *ClosedTurn
}

type sessionKey struct{ conv, session string }

// NewConversation returns the root session of a new conversation. Nothing
// is written: the conversation is kept from its first message (the first
// BeginTurn writes its logs); one that is opened and left without a
// message leaves nothing behind. The directory must be free.
func (s *Store) NewConversation(c NewConversation) (*Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return nil, err
	}
	if err := checkCwd(c.Cwd); err != nil {
		return nil, err
	}
	if _, err := EncodeBase(c.SessionID); err != nil {
		return nil, fmt.Errorf("session id: %w", err)
	}
	if c.Agent == "" || c.Model == "" {
		return nil, fmt.Errorf("conversation %s: the root session needs an agent and a model", display.Quote(c.ID))
	}
	if _, err := s.newConversationDir(c.ID); err != nil {
		return nil, err
	}
	key := sessionKey{c.ID, c.SessionID}
	for k := range s.sessions {
		if k.conv == c.ID {
			return nil, fmt.Errorf("conversation %s: %w", display.Quote(c.ID), ErrConversationExists)
		}
	}
	se := &Session{st: s, convID: c.ID, id: c.SessionID, pending: &c}
	s.sessions[key] = se
	return se, nil
}

// OpenSession opens session sessionID of conversation convID for the
// runtime's next write, in one call: a log of an older format version is
// upgraded first and its version 4 successor published beside the untouched
// original (the lazy upgrade; upgrade.Publish), and a turn a crash left
// open is closed as repair closes it (Repaired says what was closed). A
// session is open once per Store.
func (s *Store) OpenSession(convID, sessionID string) (*Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := sessionKey{convID, sessionID}
	if s.sessions[key] != nil {
		return nil, fmt.Errorf("conversation %s session %s: %w", display.Quote(convID), display.Quote(sessionID), ErrSessionOpen)
	}
	oc, err := s.liveConv(convID)
	if err != nil {
		return nil, err
	}
	if oc.st.info.Session(sessionID) == nil {
		return nil, fmt.Errorf("conversation %s has no session %s", display.Quote(convID), display.Quote(sessionID))
	}
	path, err := s.SessionLogFile(convID, sessionID)
	if err != nil {
		return nil, err
	}
	w, _, err := upgrade.OpenAppend(path, upgrade.PublishOptions{}, convlog.WriterOptions{})
	if err != nil {
		return nil, err
	}
	se := &Session{st: s, convID: convID, id: sessionID, w: w}
	if se.repaired, err = s.closeCrashedTurn(oc, sessionID, w, false); err != nil {
		w.Close()
		return nil, err
	}
	s.sessions[key] = se
	return se, nil
}

// Repaired is what OpenSession closed of a turn a crash had left open, or
// nil.
func (se *Session) Repaired() *ClosedTurn { return se.repaired }

// ID is the session's id; Conversation its conversation's.
func (se *Session) ID() string { return se.id }

// Conversation is the id of the session's conversation.
func (se *Session) Conversation() string { return se.convID }

// Turn reports where the session's turn stands (convlog.TurnState): the
// zero value for a new conversation not kept yet.
func (se *Session) Turn() convlog.TurnState {
	se.st.mu.Lock()
	defer se.st.mu.Unlock()
	if se.w == nil {
		return convlog.TurnState{}
	}
	return se.w.Turn()
}

// NextSeq is the seq the next appended event gets.
func (se *Session) NextSeq() int64 {
	se.st.mu.Lock()
	defer se.st.mu.Unlock()
	if se.w == nil {
		return 0
	}
	return se.w.NextSeq()
}

func (se *Session) usable() error {
	if se.closed {
		return fmt.Errorf("conversation %s session %s: %w", display.Quote(se.convID), display.Quote(se.id), ErrClosed)
	}
	return nil
}

func spliceEvent(target string, msg convlog.StoredMessage, ms int64) convlog.Event {
	d := append([]byte(`{"target":`), convlog.AppendJSONString(nil, target)...)
	d = append(d, `,"inserted":[`...)
	d = append(d, msg.JSON()...)
	d = append(d, "]}"...)
	return convlog.Event{Type: EventInboxSpliced, Time: ms, Data: d}
}

func userEvent(msg convlog.StoredMessage, ms int64) convlog.Event {
	return convlog.Event{Type: convlog.TypeUserMessage, Time: ms, Data: msg.JSON(), SurfaceOp: &convlog.SurfaceOp{}}
}

// BeginTurn starts the session's next turn with the user's prompt (a stored
// message of role user), and returns its number. It records, in order: the
// prompt's admission (agent/inbox/spliced, target next-turn) in the
// session log; turn/started in the conversation log, from which the chat
// reads as running (and, for the root session's first titled prompt, the
// automatic title); turn/start in the session log. For a new conversation
// it first writes the conversation: its session log (the header and the
// admission), then its conversation log (created, session/started,
// turn/started, title), which makes it a conversation.
//
// The runtime then appends the turn's steps with Append: step/start, the
// system prompt (system/message), the prompt itself (user/message), the
// request (request/header), each model call's answer (assistant/message,
// even an empty one), tool calls and results, step/end; and ends the turn
// with EndTurn or Interrupt.
func (se *Session) BeginTurn(prompt convlog.StoredMessage) (int64, error) {
	s := se.st
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := se.usable(); err != nil {
		return 0, err
	}
	if prompt.ID() == "" || prompt.Role() != "user" {
		return 0, fmt.Errorf("conversation %s session %s: a turn starts with a stored user message (id %s, role %s)", display.Quote(se.convID), display.Quote(se.id), display.Quote(prompt.ID()), display.Quote(prompt.Role()))
	}
	_, text := convlog.MessageText(prompt.JSON())
	if se.pending != nil {
		return 1, se.create(prompt, text)
	}
	oc, err := s.liveConv(se.convID)
	if err != nil {
		return 0, err
	}
	ts := se.w.Turn()
	if i, ok := oc.st.open[se.id]; ok || ts.Open {
		t := ts.Turn
		if ok {
			t = oc.st.info.Turns[i].Turn
		}
		return 0, fmt.Errorf("conversation %s session %s: turn %d is still running: %w", display.Quote(se.convID), display.Quote(se.id), t, ErrTurnRunning)
	}
	turn := ts.LastTurn
	for _, t := range oc.st.info.Turns {
		if t.SessionID == se.id && t.Turn > turn {
			turn = t.Turn
		}
	}
	turn++
	now := s.nowMs()
	if err := se.w.Append([]convlog.Event{spliceEvent(SpliceNextTurn, prompt, now)}); err != nil {
		return 0, err
	}
	if err := s.beginTurn(oc, se.id, turn, text); err != nil {
		return 0, err
	}
	if err := se.w.Append([]convlog.Event{turnStart(turn, s.nowMs())}); err != nil {
		return 0, err
	}
	return turn, nil
}

func turnStart(turn, ms int64) convlog.Event {
	return convlog.Event{Type: "turn/start", Time: ms, Data: fmt.Appendf(nil, `{"turn":%d}`, turn)}
}

// create writes a new conversation at its first message: the session log
// first, the conversation log last (until then the directory is nobody's,
// and a failure removes it), then the turn's start.
func (se *Session) create(prompt convlog.StoredMessage, text string) error {
	s, c := se.st, se.pending
	if err := s.writable(); err != nil {
		return err
	}
	dir, err := s.newConversationDir(c.ID)
	if err != nil {
		return err
	}
	name, err := SessionLogName(c.SessionID, convlog.CurrentVersion, s.comp)
	if err != nil {
		return err
	}
	h := &convlog.Header{Type: convlog.SessionLog, Version: convlog.CurrentVersion, ID: c.SessionID, CreatedAt: s.nowMs(), Cwd: c.Cwd}
	w, err := convlog.Create(filepath.Join(dir, name), h, []convlog.Event{spliceEvent(SpliceNextTurn, prompt, s.nowMs())},
		convlog.WriterOptions{Compression: s.comp})
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	var evs []convlog.Event
	add := func(typ string, v any) {
		if err == nil {
			var ev convlog.Event
			ev, err = s.event(typ, v)
			evs = append(evs, ev)
		}
	}
	add(EventConversationCreated, CreatedData{Cwd: c.Cwd, Agents: []string{c.Agent}, Models: []string{c.Model}})
	add(EventSessionStarted, SessionStartedData{SessionID: c.SessionID, Agent: c.Agent, Model: c.Model})
	add(EventTurnStarted, TurnStartedData{SessionID: c.SessionID, Turn: 1})
	if title := AutoTitle(text); title != "" {
		add(EventConversationTitle, TitleData{Title: title})
	}
	if err == nil {
		err = s.createLog(c.ID, dir, evs)
	}
	if err != nil {
		w.Close()
		os.RemoveAll(dir)
		return err
	}
	se.w, se.pending = w, nil
	return w.Append([]convlog.Event{turnStart(1, s.nowMs())})
}

// Append writes events to the session log as one durable batch (see
// convlog.Writer.Append): seqs are assigned, and a batch that breaks a rule
// of the format (a stored message without identity, an event outside its
// place in the turn's path) is refused with a *convlog.RuleError before
// anything is written.
func (se *Session) Append(events ...convlog.Event) error {
	s := se.st
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := se.usable(); err != nil {
		return err
	}
	if se.w == nil {
		return fmt.Errorf("conversation %s: nothing is written before the first message (BeginTurn)", display.Quote(se.convID))
	}
	if err := s.writable(); err != nil {
		return err
	}
	return se.w.Append(events)
}

// Steer hands a message the user sent while the turn runs to the running
// turn: its admission (agent/inbox/spliced, target current-turn) and the
// message (user/message) are recorded at once, so the next model call reads
// it.
func (se *Session) Steer(msg convlog.StoredMessage) error {
	s := se.st
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := se.usable(); err != nil {
		return err
	}
	if se.w == nil || !se.w.Turn().Open {
		return fmt.Errorf("conversation %s session %s: %w to steer", display.Quote(se.convID), display.Quote(se.id), ErrNoTurn)
	}
	now := s.nowMs()
	return se.w.Append([]convlog.Event{spliceEvent(SpliceCurrentTurn, msg, now), userEvent(msg, now)})
}

// OutcomeOf is the conversation log's outcome of a turn/end reason kind:
// completed, interrupted, or failed for every other.
func OutcomeOf(reason string) string {
	switch reason {
	case "completed":
		return OutcomeCompleted
	case "interrupted":
		return OutcomeInterrupted
	}
	return OutcomeFailed
}

// EndTurn ends the running turn: turn/end with reason kind (completed,
// error, max-tokens, aborted, blocked; Interrupt ends one as interrupted)
// in the session log, then turn/ended in the conversation log, after which
// the chat reads as idle. Its last step must have ended.
func (se *Session) EndTurn(reason string) error {
	s := se.st
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := se.usable(); err != nil {
		return err
	}
	if reason == "interrupted" || reason == "forked" {
		return fmt.Errorf("conversation %s session %s: a turn ends as %s through Interrupt or a fork, not EndTurn", display.Quote(se.convID), display.Quote(se.id), reason)
	}
	if se.w == nil || !se.w.Turn().Open {
		return fmt.Errorf("conversation %s session %s: %w", display.Quote(se.convID), display.Quote(se.id), ErrNoTurn)
	}
	oc, err := s.liveConv(se.convID)
	if err != nil {
		return err
	}
	turn := se.w.Turn().Turn
	d := fmt.Appendf(nil, `{"turn":%d,"reason":{"kind":`, turn)
	d = append(convlog.AppendJSONString(d, reason), "}}"...)
	if err := se.w.Append([]convlog.Event{{Type: convlog.TypeTurnEnd, Time: s.nowMs(), Data: d}}); err != nil {
		return err
	}
	return s.endTurn(oc, se.id, turn, OutcomeOf(reason))
}

// Interrupt ends the running turn as the user's interrupt does: whatever
// the agent had produced is kept and what was unfinished is marked. The
// partial answer of the model call in flight, when given (a stored message
// of role assistant: the text and reasoning streamed so far), is recorded
// with "interrupted":true; every tool call without a result gets an
// interrupted error result; the open step ends; turn/end gives reason
// interrupted; the conversation log records turn/ended (interrupted). On
// the next turn the model reads that the previous one was interrupted.
func (se *Session) Interrupt(partial *convlog.StoredMessage) error {
	s := se.st
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := se.usable(); err != nil {
		return err
	}
	if se.w == nil || !se.w.Turn().Open {
		return fmt.Errorf("conversation %s session %s: %w to interrupt", display.Quote(se.convID), display.Quote(se.id), ErrNoTurn)
	}
	oc, err := s.liveConv(se.convID)
	if err != nil {
		return err
	}
	ts := se.w.Turn()
	if partial != nil {
		if !ts.StepOpen || partial.Role() != "assistant" {
			return fmt.Errorf("conversation %s session %s: a partial answer is an assistant message of the open step", display.Quote(se.convID), display.Quote(se.id))
		}
		d := fmt.Appendf(nil, `{"turn":%d,"step":%d,"message":`, ts.Turn, ts.Step)
		d = append(d, partial.JSON()...)
		d = append(d, `,"interrupted":true}`...)
		if err := se.w.Append([]convlog.Event{{Type: convlog.TypeAssistantMessage, Time: s.nowMs(), Data: d, SurfaceOp: &convlog.SurfaceOp{}}}); err != nil {
			return err
		}
		ts = se.w.Turn()
	}
	if err := se.w.Append(convlog.CloseTurn(ts, se.w.NextSeq(), s.nowMs(), "interrupted")); err != nil {
		return err
	}
	if _, ok := oc.st.open[se.id]; ok {
		return s.endTurn(oc, se.id, oc.st.info.Turns[oc.st.open[se.id]].Turn, OutcomeInterrupted)
	}
	return nil
}

// Spawn starts a subagent of this session: a new session of the same
// conversation (origin subagent, delegation depth one more), its log
// published with its header. Its first turn starts with the task message
// (BeginTurn).
func (se *Session) Spawn(childID, agent, model string) (*Session, error) {
	if err := se.usable(); err != nil {
		return nil, err
	}
	if se.w == nil {
		return nil, fmt.Errorf("conversation %s: nothing is written before the first message (BeginTurn)", display.Quote(se.convID))
	}
	w, err := se.st.StartSession(se.convID, childID, agent, model, se.id)
	if err != nil {
		return nil, err
	}
	child := &Session{st: se.st, convID: se.convID, id: childID, w: w}
	se.st.mu.Lock()
	se.st.sessions[sessionKey{se.convID, childID}] = child
	se.st.mu.Unlock()
	return child, nil
}

// Close closes the session's log. A running turn stays running: the
// runtime ends it first, or a later OpenSession or convkit repair closes it
// as interrupted. A new conversation that never got its first message
// leaves nothing.
func (se *Session) Close() error {
	s := se.st
	s.mu.Lock()
	defer s.mu.Unlock()
	return se.closeLocked()
}

func (se *Session) closeLocked() error {
	if se.closed {
		return nil
	}
	se.closed = true
	delete(se.st.sessions, sessionKey{se.convID, se.id})
	if se.w != nil {
		return se.w.Close()
	}
	return nil
}

// closeSessions closes the open sessions of conversation convID (it is
// being deleted).
func (s *Store) closeSessions(convID string) {
	for k, se := range s.sessions {
		if k.conv == convID {
			se.closeLocked()
		}
	}
}

// ClosedTurn is a turn a crash had left open, closed as interrupted by
// appending (docs/FORMAT.md, "Closing an interrupted turn").
type ClosedTurn struct {
	Conversation string `json:"conversation"`
	Session      string `json:"session"`
	Turn         int64  `json:"turn"`
	// SessionLog is the session log appended to ("" when only the
	// conversation log recorded the turn); Appended the types of the
	// events appended to it, in order.
	SessionLog string   `json:"sessionLog,omitempty"`
	Appended   []string `json:"appended"`
	// ToolCalls are the calls that got an interrupted result;
	// PartialAnswer is set when a cut-off model call's output was kept as
	// an interrupted answer.
	ToolCalls     []string `json:"toolCalls"`
	PartialAnswer bool     `json:"partialAnswer"`
	// Outcome is the conversation log's turn/ended outcome recorded, ""
	// when the conversation log had the turn ended already.
	Outcome string `json:"outcome,omitempty"`
	// Upgraded is the version 4 successor published first for a session
	// log of an older version (the lazy upgrade), "" otherwise.
	Upgraded string `json:"upgraded,omitempty"`
}

// Describe says in one line what was (or, dry, would be) appended.
func (c *ClosedTurn) Describe() string {
	var parts []string
	if c.Upgraded != "" {
		parts = append(parts, fmt.Sprintf("(the v4 successor %s first)", filepath.Base(c.Upgraded)))
	}
	if len(c.Appended) > 0 {
		what := strings.Join(c.Appended, ", ")
		if len(c.ToolCalls) > 0 {
			what += fmt.Sprintf(" (interrupted tool calls: %s)", strings.Join(c.ToolCalls, ", "))
		}
		parts = append(parts, fmt.Sprintf("%s to %s", what, c.SessionLog))
	}
	if c.Outcome != "" {
		parts = append(parts, fmt.Sprintf("turn/ended (%s) to the conversation log", c.Outcome))
	}
	s := strings.Join(parts, "; ")
	return strings.Replace(s, "first); ", "first) ", 1)
}

// closeCrashedTurn closes, by appending, what a crash left open of session
// sessionID in the open conversation oc: the session log's open turn
// (w, open for appending: convlog.CloseTurn, reason interrupted) and the
// conversation log's running turn of the session (turn/ended with the
// outcome the session log gave it, else interrupted). dry computes the same
// and writes nothing. Nil when nothing was open.
func (s *Store) closeCrashedTurn(oc *openConv, sessionID string, w *convlog.Writer, dry bool) (*ClosedTurn, error) {
	ts := w.Turn()
	return s.closeTurnState(oc, sessionID, ts, w.NextSeq(), filepath.Base(w.Path()), func(evs []convlog.Event) error {
		if dry {
			return nil
		}
		return w.Append(evs)
	}, dry)
}

func (s *Store) closeTurnState(oc *openConv, sessionID string, ts convlog.TurnState, next int64, logName string,
	appendFn func([]convlog.Event) error, dry bool) (*ClosedTurn, error) {
	c := &ClosedTurn{Conversation: oc.st.info.ID, Session: sessionID, Appended: []string{}, ToolCalls: []string{}}
	if ts.Open {
		evs := convlog.CloseTurn(ts, next, s.nowMs(), "interrupted")
		if err := appendFn(evs); err != nil {
			return nil, err
		}
		c.Turn, c.SessionLog = ts.Turn, logName
		for _, e := range evs {
			c.Appended = append(c.Appended, e.Type)
			if e.Type == convlog.TypeAssistantMessage {
				c.PartialAnswer = true
			}
		}
		for _, call := range ts.Calls {
			c.ToolCalls = append(c.ToolCalls, call.ID)
		}
	}
	if i, ok := oc.st.open[sessionID]; ok {
		t := oc.st.info.Turns[i].Turn
		outcome := OutcomeInterrupted
		if !ts.Open && ts.LastTurn == t && ts.LastEnd != "" {
			// The session log ended the turn; the crash came before the
			// conversation log heard of it.
			outcome = OutcomeOf(ts.LastEnd)
		}
		if !dry {
			if err := s.endTurn(oc, sessionID, t, outcome); err != nil {
				return nil, err
			}
		}
		c.Turn, c.Outcome = t, outcome
	}
	if !ts.Open && c.Outcome == "" {
		return nil, nil
	}
	return c, nil
}
