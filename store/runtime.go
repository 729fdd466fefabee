package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/convlog/upgrade"
	"github.com/convkit/convkit/internal/termtext"
)

// NewConversation describes a conversation to start: its id, working
// directory (absolute) and root session.
type NewConversation struct {
	ID        string
	Cwd       string
	SessionID string
	Agent     string
	Model     string
}

// Session is one agent session of a conversation, open for the runtime to
// record its turns. Get one from NewConversation, OpenSession or Spawn; calls
// of one conversation run in order, of different ones in parallel.
type Session struct {
	st         *Store
	convID, id string
	// oc is nil until a new conversation is written; cmu orders the calls
	// on its sessions (oc.mu once there is oc).
	oc  *openConv
	cmu *sync.Mutex
	w   *convlog.Writer
	// pending: a new conversation not written yet (until BeginTurn).
	pending *NewConversation
	closed  bool
	// broken: a batch failed after its calls were taken; reopen to record.
	broken   error
	repaired *ClosedTurn
	rec      recState
	// inBatch: the calls are staged for Batch to write, deferPoint and
	// deferTurns the index change they make.
	inBatch    bool
	deferPoint bool
	deferTurns []TurnInfo
	notes      []SessionEvent // the messages of the staged calls
	call       *ModelCall
}

type sessionKey struct{ conv, session string }

// NewConversation returns the root session of a new conversation, whose
// directory must be free; nothing is written until the first BeginTurn.
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
		return nil, fmt.Errorf("conversation %s: the root session needs an agent and a model", termtext.Quote(c.ID))
	}
	if _, err := s.newConversationDir(c.ID); err != nil {
		return nil, err
	}
	key := sessionKey{c.ID, c.SessionID}
	for k := range s.sessions {
		if k.conv == c.ID {
			return nil, fmt.Errorf("conversation %s: %w", termtext.Quote(c.ID), ErrConversationExists)
		}
	}
	se := &Session{st: s, convID: c.ID, id: c.SessionID, pending: &c, rec: newRecState(), cmu: new(sync.Mutex)}
	s.sessions[key] = se
	return se, nil
}

// OpenSession opens session sessionID of convID to record, once per Store:
// an older log is upgraded first, and a turn a crash left open is closed as
// repair closes it (Repaired).
func (s *Store) OpenSession(convID, sessionID string) (*Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key := sessionKey{convID, sessionID}
	if s.sessions[key] != nil {
		return nil, fmt.Errorf("conversation %s session %s: %w", termtext.Quote(convID), termtext.Quote(sessionID), ErrSessionOpen)
	}
	oc, err := s.liveConv(convID)
	if err != nil {
		return nil, err
	}
	if oc.st.info.Session(sessionID) == nil {
		return nil, fmt.Errorf("conversation %s has no session %s", termtext.Quote(convID), termtext.Quote(sessionID))
	}
	l, err := s.FindLog(convID, sessionID)
	if err != nil {
		return nil, err
	}
	se := &Session{st: s, convID: convID, id: sessionID, oc: oc, cmu: oc.mu, rec: newRecState()}
	observe := func(e *convlog.Event) {
		c := e.Clone()
		c.Known = true
		se.rec.observe(&c)
	}
	if se.w, _, err = upgrade.OpenAppend(l.Path, convlog.WriterOptions{Observe: observe}); err != nil {
		return nil, err
	}
	se.repaired, err = s.closeTurnState(oc, sessionID, se.w.Turn(), se.w.NextSeq(), filepath.Base(se.w.Path()), se.w, observe, false)
	if err != nil {
		se.w.Close()
		return nil, err
	}
	if se.repaired != nil {
		s.tellIndex(oc, true)
	}
	// Waiting messages are kept in memory only: a restart loses them.
	se.rec.inbox = nil
	s.sessions[key] = se
	return se, nil
}

// Repaired is what OpenSession closed of a turn a crash had left open.
func (se *Session) Repaired() *ClosedTurn { return se.repaired }

// enter takes the session for one call and checks it can record.
func (se *Session) enter() (unlock func(), err error) {
	unlock = se.st.lockSession(se)
	if se.closed {
		err = fmt.Errorf("conversation %s session %s: %w", termtext.Quote(se.convID), termtext.Quote(se.id), ErrClosed)
	} else if se.broken != nil {
		err = fmt.Errorf("conversation %s session %s: a batch could not be written (%v); open the session again: %w",
			termtext.Quote(se.convID), termtext.Quote(se.id), se.broken, ErrClosed)
	} else if se.w != nil {
		err = se.st.writable()
	}
	if err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// record writes events as one durable batch, or stages them into Batch's,
// giving them seqs and (when zero) the store's time.
func (se *Session) record(evs ...convlog.Event) error {
	if len(evs) == 0 {
		return nil
	}
	now, seq := se.st.nowMs(), se.w.NextSeq()
	for i := range evs {
		if evs[i].Time == 0 {
			evs[i].Time = now
		}
		evs[i].Seq = seq + int64(i)
	}
	err := se.w.Stage(evs)
	if err == nil && !se.inBatch {
		err = se.w.Flush()
	}
	if err != nil {
		if se.inBatch {
			se.dropBatch(err)
		}
		return err
	}
	for i := range evs {
		se.rec.observe(&evs[i])
	}
	se.note(evs, !se.inBatch)
	return nil
}

// recordNow records evs and writes Batch's events so far: the session log
// is durable before the conversation log hears of it.
func (se *Session) recordNow(evs ...convlog.Event) error {
	if err := se.record(evs...); err != nil {
		return err
	}
	return se.flush()
}

// flush writes Batch's events so far, before another log is written.
func (se *Session) flush() error {
	size := se.w.Size()
	if err := se.w.Flush(); err != nil {
		se.dropBatch(err)
		return err
	}
	if se.w.Size() != size {
		se.note(nil, true)
	}
	return nil
}

// dropBatch breaks the session, whose staged calls the writer dropped.
func (se *Session) dropBatch(err error) { se.broken, se.notes = err, nil }

// Batch runs fn and writes its calls as one durable append (one frame, one
// fsync); a crash during fn loses them all, and an event the format refuses
// or a failed write drops them: the session must then be opened again.
func (se *Session) Batch(fn func() error) error {
	unlock, err := se.enter()
	if err != nil {
		return err
	}
	if se.inBatch || se.w == nil {
		unlock()
		if se.inBatch {
			return se.refuse("Batch", ErrOrder, "a batch is already open")
		}
		return se.refuse("Batch", ErrOrder, "nothing is written before the first message (BeginTurn)")
	}
	se.inBatch = true
	unlock()
	ferr := fn()
	unlock, err = se.enter()
	if err != nil {
		return errors.Join(ferr, err)
	}
	defer unlock()
	se.inBatch = false
	err = se.flush()
	if err == nil {
		point, turns := se.deferPoint, se.deferTurns
		se.deferPoint, se.deferTurns = false, nil
		se.indexPoint(point, turns...)
	}
	return errors.Join(ferr, err)
}

// BeginTurn starts the session's next turn with prompt, admitted unless it
// was already, and returns its number; a new conversation is written first.
// The prompt is recorded at the turn's first Request.
func (se *Session) BeginTurn(prompt convlog.StoredMessage) (int64, error) {
	unlock, err := se.enter()
	if err != nil {
		return 0, err
	}
	defer unlock()
	s := se.st
	if prompt.ID() == "" {
		return 0, se.refuse("BeginTurn", ErrEmptyID, "the turn's input needs an id (convlog.NewUserMessage)")
	}
	if prompt.Role() != "user" {
		return 0, se.refuse("BeginTurn", ErrInvalid, "a turn starts with a stored user message (id %s, role %s)", termtext.Quote(prompt.ID()), termtext.Quote(prompt.Role()))
	}
	if se.call != nil {
		return 0, se.refuse("BeginTurn", ErrOrder, "a model call is in flight")
	}
	_, text := convlog.MessageText(prompt.JSON())
	if se.pending != nil {
		return 1, se.create(prompt, text)
	}
	oc, err := se.oc, se.oc.live()
	if err != nil {
		return 0, err
	}
	if i, ok := oc.st.open[se.id]; ok || se.rec.turnOpen {
		t := se.rec.turn
		if ok {
			t = oc.st.info.Turns[i].Turn
		}
		return 0, se.refuse("BeginTurn", ErrTurnRunning, "turn %d is still running", t)
	}
	admitted := slices.ContainsFunc(se.rec.inbox, func(m convlog.StoredMessage) bool { return m.ID() == prompt.ID() })
	if !admitted && se.rec.ids[prompt.ID()] {
		return 0, se.refuse("BeginTurn", ErrDuplicateID, "message id %s is used already", termtext.Quote(prompt.ID()))
	}
	turn := se.rec.turn
	for _, t := range oc.st.info.Turns {
		if t.SessionID == se.id && t.Turn > turn {
			turn = t.Turn
		}
	}
	turn++
	var admission []convlog.Event
	if !admitted {
		admission = append(admission, se.splice(convlog.SpliceNextTurn, prompt))
	}
	if err := se.recordNow(admission...); err != nil {
		return 0, err
	}
	if err := s.beginTurn(oc, se.id, turn, text); err != nil {
		return 0, err
	}
	if err := se.record(turnStart(turn)); err != nil {
		return 0, err
	}
	se.indexPoint(true, lastTurn(oc, se.id)...)
	return turn, nil
}

// splice is the admission of msg into the inbox, at its end.
func (se *Session) splice(target string, msg convlog.StoredMessage) convlog.Event {
	return typed(convlog.TypeInboxSpliced, convlog.InboxSplicedData{Target: target, Start: int64(len(se.rec.inbox)),
		Inserted: []json.RawMessage{msg.JSON()}})
}

func turnStart(turn int64) convlog.Event {
	return typed(convlog.TypeTurnStart, convlog.TurnStartData{Turn: turn})
}

// create writes a new conversation at its first message: the session log
// first, the conversation log last, or nothing.
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
	admission := se.splice(convlog.SpliceNextTurn, prompt)
	admission.Time = s.nowMs()
	w, err := convlog.Create(filepath.Join(dir, name), h, []convlog.Event{admission},
		convlog.WriterOptions{Compression: s.comp})
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	evs := []convlog.Event{
		s.convEvent(EventConversationCreated, CreatedData{Cwd: c.Cwd, Agents: []string{c.Agent}, Models: []string{c.Model}}),
		s.convEvent(EventSessionStarted, SessionStartedData{SessionID: c.SessionID, Agent: c.Agent, Model: c.Model}),
		s.convEvent(EventTurnStarted, TurnStartedData{SessionID: c.SessionID, Turn: 1}),
	}
	if title := AutoTitle(text); title != "" {
		evs = append(evs, s.convEvent(EventConversationTitle, TitleData{Title: title}))
	}
	if err := s.createLog(c.ID, dir, evs, se.cmu); err != nil {
		w.Close()
		os.RemoveAll(dir)
		return err
	}
	s.mapMu.Lock()
	se.oc = s.convs[c.ID]
	s.mapMu.Unlock()
	se.w, se.pending = w, nil
	se.rec.observe(&admission)
	if err := se.record(turnStart(1)); err != nil {
		return err
	}
	if !se.inBatch {
		s.tellIndex(se.oc, true)
	} else {
		se.deferPoint = true
	}
	return nil
}

// typedCall names, for each event type the recorder writes, the call that
// records it; Append refuses these types, so the recorder is their one writer.
var typedCall = map[string]string{
	convlog.TypeTurnStart: "BeginTurn", convlog.TypeTurnEnd: "EndTurn", convlog.TypeStepStart: "BeginStep",
	convlog.TypeStepEnd: "EndStep", convlog.TypeSystemMessage: "Request", convlog.TypeUserMessage: "Request",
	convlog.TypeRequestHeader: "Request", convlog.TypeInboxSpliced: "Steer", convlog.TypeRetryStarted: "BeginModelCall",
	convlog.TypeAssistantMessage: "Complete", convlog.TypeAssistantAttempt: "Fail", convlog.TypeRetry: "Retry",
	convlog.TypeToolCall: "ToolCall", convlog.TypeToolResult: "ToolResult", convlog.TypeSubagentCatalog: "Spawn",
	convlog.TypeCompactionStart: "Compact", convlog.TypeCompactionSummary: "Compact", convlog.TypeCompactionEnd: "Compact",
	convlog.TypeCompactionPrune: "Prune", convlog.TypeImageOffload: "Offload",
	convlog.TypeEndSeed: "Fork", convlog.TypeDeveloperMessage: "Developer",
	convlog.TypeSessionTitle: "Title", convlog.TypeTitleRequest: "TitleRequest", convlog.TypeRequestContext: "RequestContext",
	convlog.TypeCommandRun: "Command", convlog.TypeCommandDone: "CommandDone",
	convlog.TypePTCStart: "Dispatch", convlog.TypePTC: "DispatchResult",
}

// Append records events no call records (a plugin's, or a format type the
// recorder does not type) as one durable batch; one that breaks a format
// rule is a *convlog.RuleError.
func (se *Session) Append(events ...convlog.Event) error {
	return se.locked("Append", written, func() error {
		for _, e := range events {
			if call, ok := typedCall[e.Type]; ok {
				return se.refuse("Append", ErrInvalid, "%s events are recorded by %s", termtext.Quote(e.Type), call)
			}
		}
		if err := se.record(events...); err != nil {
			return err
		}
		se.indexPoint(false)
		return nil
	})
}

// Steer admits a message the user sent while the turn runs for the next
// Request; one the turn did not read starts the next turn.
func (se *Session) Steer(msg convlog.StoredMessage) error {
	return se.locked("Steer", anytime, func() error {
		if se.w == nil || !se.rec.turnOpen {
			return se.refuse("Steer", ErrNoTurn, "no turn is running to steer")
		}
		if err := se.checkNewID("Steer", msg.ID()); err != nil {
			return err
		}
		if msg.Role() != "user" {
			return se.refuse("Steer", ErrInvalid, "a steering message has role user, not %s", termtext.Quote(msg.Role()))
		}
		return se.record(se.splice(convlog.SpliceNextStep, msg))
	})
}

// OutcomeOf is the conversation log's outcome of a turn/end reason kind.
func OutcomeOf(reason string) string {
	switch reason {
	case convlog.EndCompleted:
		return OutcomeCompleted
	case convlog.EndInterrupted:
		return OutcomeInterrupted
	}
	return OutcomeFailed
}

// EndTurn ends the running turn, whose last step has ended, with
// OutcomeCompleted or OutcomeFailed and its failure.
func (se *Session) EndTurn(outcome string, failure *convlog.LLMFailure) error {
	return se.locked("EndTurn", anytime, func() error {
		reason := convlog.TurnEndReason{Kind: convlog.EndCompleted}
		switch outcome {
		case OutcomeCompleted:
			if failure != nil {
				return se.refuse("EndTurn", ErrInvalid, "a completed turn carries no failure")
			}
		case OutcomeFailed:
			if err := failure.Check(); err != nil {
				return se.refuse("EndTurn", ErrInvalid, "a failed turn carries its error: %v", err)
			}
			f := *failure
			reason = convlog.TurnEndReason{Kind: convlog.EndError, Error: &f}
		case OutcomeInterrupted:
			return se.refuse("EndTurn", ErrInvalid, "a turn ends as interrupted through Interrupt")
		default:
			return se.refuse("EndTurn", ErrInvalid, "turn outcome %s is not %s or %s", termtext.Quote(outcome), OutcomeCompleted, OutcomeFailed)
		}
		if se.w == nil || !se.rec.turnOpen {
			return se.refuse("EndTurn", ErrNoTurn, "no turn is running")
		}
		if se.call != nil {
			return se.refuse("EndTurn", ErrOrder, "a model call is in flight: complete it, retry it or fail it first")
		}
		if se.rec.stepOpen {
			return se.refuse("EndTurn", ErrOrder, "step %d is still open (EndStep)", se.rec.step)
		}
		oc, err := se.oc, se.oc.live()
		if err != nil {
			return err
		}
		turn := se.rec.turn
		if err := se.recordNow(typed(convlog.TypeTurnEnd, convlog.TurnEndData{Turn: turn, Reason: reason})); err != nil {
			return err
		}
		if err := se.st.endTurn(oc, se.id, turn, outcome); err != nil {
			return err
		}
		se.indexPoint(true, lastTurn(oc, se.id)...)
		return nil
	})
}

// Interrupt ends the running turn as the user's interrupt does: the call in
// flight, if given, is kept as an interrupted answer and open tool calls get
// interrupted errors.
func (se *Session) Interrupt(call *ModelCall) error {
	return se.locked("Interrupt", anytime, func() error {
		if se.w == nil || !se.rec.turnOpen {
			return se.refuse("Interrupt", ErrNoTurn, "no turn is running to interrupt")
		}
		if call != nil && call != se.call {
			return se.refuse("Interrupt", ErrOrder, "the model call given is not the one in flight")
		}
		oc, err := se.oc, se.oc.live()
		if err != nil {
			return err
		}
		var partial []convlog.Event
		if c := se.call; c != nil && call != nil {
			c.mu.Lock()
			content, err := c.stream.Partial()
			if err == nil && string(content) != "[]" {
				var ev convlog.Event
				id := fmt.Sprintf("interrupted-answer-%d", se.w.NextSeq())
				msg, merr := convlog.NewStoredMessage(id, "assistant", convlog.ModelSource(c.provider, c.model), content)
				if ev, err = se.answerEvent(msg, c, true); merr != nil {
					err = merr
				}
				partial = append(partial, ev)
			}
			c.mu.Unlock()
			if err != nil {
				return se.refuse("Interrupt", ErrInvalid, "%v", err)
			}
		}
		if c := se.call; c != nil {
			c.mu.Lock()
			c.done = true
			c.mu.Unlock()
			se.call = nil
		}
		// CloseTurn reads the writer's turn, which the partial answer is in.
		if err := se.recordNow(partial...); err != nil {
			return err
		}
		if err := se.recordNow(convlog.CloseTurn(se.w.Turn(), se.w.NextSeq(), se.st.nowMs(), convlog.EndInterrupted)...); err != nil {
			return err
		}
		if _, ok := oc.st.open[se.id]; ok {
			if err := se.st.endTurn(oc, se.id, oc.st.info.Turns[oc.st.open[se.id]].Turn, OutcomeInterrupted); err != nil {
				return err
			}
		}
		se.indexPoint(true, lastTurn(oc, se.id)...)
		return nil
	})
}

// Spawn starts a subagent session one level below this one; its first turn
// starts with the task and it reports back with SubagentReport.
func (se *Session) Spawn(childID, agent, model string) (*Session, error) {
	if err := se.locked("Spawn", written, se.flush); err != nil {
		return nil, err
	}
	s := se.st
	s.mu.Lock()
	oc, err := s.liveConv(se.convID)
	var w *convlog.Writer
	if err == nil {
		w, err = s.startSession(oc, childID, agent, model, se.id)
	}
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	child := &Session{st: s, convID: se.convID, id: childID, w: w, rec: newRecState(), oc: se.oc, cmu: se.cmu}
	s.sessions[sessionKey{se.convID, childID}] = child
	s.mu.Unlock()
	return child, se.locked("Spawn", anytime, func() error {
		catalog := typed(convlog.TypeSubagentCatalog, convlog.SubagentCatalogData{Version: 0, Mode: "continuable", Label: agent,
			ChildID: childID, ChildCreatedAt: w.Header().CreatedAt})
		if err := se.record(catalog); err != nil {
			return err
		}
		child.note(nil, true)
		se.indexPoint(true)
		return nil
	})
}

// Close closes the session's log; a running turn stays running.
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
		return errors.Join(se.flush(), se.w.Close())
	}
	return nil
}

// closeConversation closes convID's open sessions and log.
func (s *Store) closeConversation(convID string) {
	for k, se := range s.sessions {
		if k.conv == convID {
			se.closeLocked()
		}
	}
	if oc := s.convs[convID]; oc != nil {
		oc.w.Close()
		delete(s.convs, convID)
	}
}

// ClosedTurn is a turn a crash had left open, closed as interrupted by
// appending (docs/FORMAT.md): the Compaction closed first ("": none), the
// types Appended to SessionLog ("": none), the ToolCalls given an
// interrupted result, whether a PartialAnswer was kept, the Outcome
// recorded in the conversation log ("": none) and the v4 successor
// Upgraded first ("": none). Turn is 0 for a compaction between turns.
type ClosedTurn struct {
	Conversation  string   `json:"conversation"`
	Session       string   `json:"session"`
	Turn          int64    `json:"turn"`
	SessionLog    string   `json:"sessionLog,omitempty"`
	Appended      []string `json:"appended"`
	ToolCalls     []string `json:"toolCalls"`
	PartialAnswer bool     `json:"partialAnswer"`
	Outcome       string   `json:"outcome,omitempty"`
	Upgraded      string   `json:"upgraded,omitempty"`
	Compaction    string   `json:"compaction,omitempty"`
}

// Describe says in one line what was (or, dry, would be) appended.
func (c *ClosedTurn) Describe() string {
	var parts []string
	if c.Upgraded != "" {
		parts = append(parts, fmt.Sprintf("(the v4 successor %s first)", filepath.Base(c.Upgraded)))
	}
	if len(c.Appended) > 0 {
		what := strings.Join(c.Appended, ", ")
		if c.Compaction != "" {
			what += fmt.Sprintf(" (interrupted compaction: %s)", c.Compaction)
		}
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

// onlyInConversation reports whether sessionID's running turn is one the
// conversation log started and its session log (ts) never did.
func onlyInConversation(oc *openConv, sessionID string, ts convlog.TurnState) bool {
	i, ok := oc.st.open[sessionID]
	return ok && !ts.Open && oc.st.info.Turns[i].Turn == ts.LastTurn+1
}

// compactionInterrupted is the error of the compaction/end closing a
// compaction a crash left open.
const compactionInterrupted = "The compaction was interrupted before it ended."

// closeTurnState closes ts (appending to w, logName, which observe sees):
// its open compaction, with an error end, then its turn; and sessionID's
// running turn in the conversation log, with the session log's outcome
// when it ended the turn, else interrupted; dry records nothing.
func (s *Store) closeTurnState(oc *openConv, sessionID string, ts convlog.TurnState, next int64, logName string,
	w *convlog.Writer, observe func(*convlog.Event), dry bool) (*ClosedTurn, error) {
	appendFn := func(evs []convlog.Event) error {
		if dry {
			return nil
		}
		if err := w.Append(evs); err != nil || observe == nil {
			return err
		}
		for i := range evs {
			observe(&evs[i])
		}
		return nil
	}
	c := &ClosedTurn{Conversation: oc.st.info.ID, Session: sessionID, Appended: []string{}, ToolCalls: []string{}}
	if end := ts.Compaction; end != nil {
		// No turn starts or ends while a compaction is open.
		end.Error = compactionInterrupted
		e := typed(convlog.TypeCompactionEnd, end)
		e.Seq, e.Time = next, s.nowMs()
		if err := appendFn([]convlog.Event{e}); err != nil {
			return nil, err
		}
		next++
		c.Compaction, c.SessionLog, c.Appended = end.CompactionID, logName, append(c.Appended, e.Type)
	}
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
		if logName != "" && onlyInConversation(oc, sessionID, ts) {
			// A crash between turn/started and turn/start: the session log
			// records the turn too, or it could never number another.
			evs := append([]convlog.Event{turnStart(t)},
				convlog.CloseTurn(convlog.TurnState{Open: true, Turn: t}, next+1, s.nowMs(), "interrupted")...)
			evs[0].Seq, evs[0].Time = next, s.nowMs()
			if err := appendFn(evs); err != nil {
				return nil, err
			}
			c.SessionLog = logName
			for _, e := range evs {
				c.Appended = append(c.Appended, e.Type)
			}
		}
		if !ts.Open && ts.LastTurn == t && ts.LastEnd != "" {
			outcome = OutcomeOf(ts.LastEnd)
		}
		if !dry {
			if err := s.endTurn(oc, sessionID, t, outcome); err != nil {
				return nil, err
			}
		}
		c.Turn, c.Outcome = t, outcome
	}
	if !ts.Open && c.Outcome == "" && c.Compaction == "" {
		return nil, nil
	}
	return c, nil
}

// AutoTitle is the automatic title of a first user message: its first
// non-blank line, trimmed, of at most 40 characters.
func AutoTitle(text string) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if utf8.RuneCountInString(line) > maxAutoTitleRunes {
			r := []rune(line)
			line = strings.TrimRightFunc(string(r[:maxAutoTitleRunes]), func(r rune) bool { return r == ' ' || r == '\t' })
		}
		return line
	}
	return ""
}

func checkCwd(cwd string) error {
	if !filepath.IsAbs(cwd) || !strings.HasPrefix(cwd, "/") {
		return fmt.Errorf("working directory %s is not an absolute path", termtext.Quote(cwd))
	}
	return nil
}

// newConversationDir checks that convID is free and returns its directory.
func (s *Store) newConversationDir(convID string) (string, error) {
	dir, err := conversationPath(s.dataDir, convID)
	if err != nil {
		return "", err
	}
	if _, err := os.Lstat(dir); err == nil {
		return "", fmt.Errorf("conversation %s (%s): %w", termtext.Quote(convID), dir, ErrConversationExists)
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	return dir, nil
}

// createLog publishes a new conversation log holding first; mu orders the
// Session calls on it (nil: a new one).
func (s *Store) createLog(convID, dir string, first []convlog.Event, mu *sync.Mutex) error {
	path := filepath.Join(dir, ConversationLogName(convlog.CurrentVersion, s.comp))
	h := &convlog.Header{Type: convlog.ConversationLog, Version: convlog.CurrentVersion, ID: convID}
	if len(first) > 0 {
		h.CreatedAt = first[0].Time
	} else {
		h.CreatedAt = s.nowMs()
	}
	w, err := convlog.Create(path, h, first, convlog.WriterOptions{Compression: s.comp})
	if err != nil {
		return err
	}
	st := newConvState(h)
	for i := range first {
		first[i].Seq = int64(i)
		if err := st.apply(&first[i]); err != nil {
			w.Close()
			return err
		}
	}
	if mu == nil {
		mu = new(sync.Mutex)
	}
	s.mapMu.Lock()
	s.convs[convID] = &openConv{mu: mu, dir: dir, w: w, st: st}
	s.mapMu.Unlock()
	return nil
}

// startSession publishes subagent session sessionID's log, then records it:
// the conversation log never names a session without a log.
func (s *Store) startSession(oc *openConv, sessionID, agent, model, parentSession string) (*convlog.Writer, error) {
	info := &oc.st.info
	name, err := SessionLogName(sessionID, convlog.CurrentVersion, s.comp)
	if err != nil {
		return nil, err
	}
	if info.Session(sessionID) != nil {
		return nil, fmt.Errorf("conversation %s already has session %s", termtext.Quote(info.ID), termtext.Quote(sessionID))
	}
	p := info.Session(parentSession)
	if p == nil {
		return nil, fmt.Errorf("conversation %s has no session %s to be the parent of %s", termtext.Quote(info.ID), termtext.Quote(parentSession), termtext.Quote(sessionID))
	}
	h := &convlog.Header{Type: convlog.SessionLog, Version: convlog.CurrentVersion, ID: sessionID, CreatedAt: s.nowMs(),
		Cwd: info.Cwd, ParentSession: parentSession, Origin: "subagent", DelegationDepth: p.delegationDepth + 1}
	w, err := convlog.Create(filepath.Join(oc.dir, name), h, nil, convlog.WriterOptions{Compression: s.comp})
	if err != nil {
		return nil, err
	}
	if err := s.appendEvent(oc, EventSessionStarted, SessionStartedData{SessionID: sessionID, Agent: agent, Model: model, ParentSession: parentSession}); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// beginTurn records turn/started, with the root session's automatic title
// from userText while there is none.
func (s *Store) beginTurn(oc *openConv, sessionID string, turn int64, userText string) error {
	info := &oc.st.info
	evs := []convlog.Event{s.convEvent(EventTurnStarted, TurnStartedData{SessionID: sessionID, Turn: turn})}
	if sess := info.Session(sessionID); sess != nil && sess.ParentSession == "" && info.Title == "" && !oc.st.renamed {
		if title := AutoTitle(userText); title != "" {
			evs = append(evs, s.convEvent(EventConversationTitle, TitleData{Title: title}))
		}
	}
	return oc.appendEvents(evs...)
}

// endTurn records turn/ended for the session's running turn.
func (s *Store) endTurn(oc *openConv, sessionID string, turn int64, outcome string) error {
	if i, ok := oc.st.open[sessionID]; !ok || oc.st.info.Turns[i].Turn != turn {
		return fmt.Errorf("conversation %s session %s has no running turn %d", termtext.Quote(oc.st.info.ID), termtext.Quote(sessionID), turn)
	}
	return s.appendEvent(oc, EventTurnEnded, TurnEndedData{SessionID: sessionID, Turn: turn, Outcome: outcome})
}

// maxTitleRunes bounds a title in characters, or every renderer would carry
// titles of megabytes.
const maxTitleRunes = 256

// CheckTitle returns title trimmed as Rename records it: valid UTF-8, not
// empty, one line without control characters, at most 256 characters.
func CheckTitle(title string) (string, error) {
	title = strings.TrimSpace(title)
	if !utf8.ValidString(title) {
		return "", errors.New("a title must be valid UTF-8 text")
	}
	for i, r := range title {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == '\u2028' || r == '\u2029' {
			return "", fmt.Errorf("a title is one line of text without control characters (found %U at byte %d)", r, i)
		}
	}
	if title == "" {
		return "", errors.New("a title cannot be empty")
	}
	n := 0
	for i := range title {
		if n++; n > maxTitleRunes {
			return "", fmt.Errorf("a title is at most %d characters (this one is longer at byte %d)", maxTitleRunes, i)
		}
	}
	return title, nil
}

// Rename sets the title, ending automatic titles; one CheckTitle refuses is
// a *RecordError.
func (s *Store) Rename(convID, title string) error {
	title, err := CheckTitle(title)
	if err != nil {
		return &RecordError{Conversation: convID, Call: "Rename", Msg: err.Error(), Kind: ErrInvalid}
	}
	return s.change(convID, func(oc *openConv) error {
		return s.appendEvent(oc, eventConversationRenamed, renamedData{Title: title})
	})
}

// Archive hides the conversation from the main list.
func (s *Store) Archive(convID string) error { return s.setArchived(convID, true) }

// Unarchive brings an archived conversation back.
func (s *Store) Unarchive(convID string) error { return s.setArchived(convID, false) }

func (s *Store) setArchived(convID string, archived bool) error {
	typ := eventConversationUnarchived
	if archived {
		typ = eventConversationArchived
	}
	return s.change(convID, func(oc *openConv) error {
		if oc.st.info.Archived == archived {
			return errNoChange
		}
		return s.appendEvent(oc, typ, nil)
	})
}

// MapCwd records a new working directory (absolute).
func (s *Store) MapCwd(convID, to string) error {
	if err := checkCwd(to); err != nil {
		return err
	}
	return s.change(convID, func(oc *openConv) error {
		if oc.st.info.Cwd == to {
			return errNoChange
		}
		return s.appendEvent(oc, EventConversationCwdMapped, cwdMappedData{From: oc.st.info.Cwd, To: to})
	})
}
