package store

import (
	"errors"

	"github.com/convkit/convkit/convlog"
)

// IndexKeeper keeps metadata.db current (reindex.NewKeeper). After each
// durable change listing or search depends on, the store tells it what
// changed: conversation-log changes, and session-log changes while no turn
// runs (a running turn's at its end). Changed is called under the
// conversation's lock, in order; its error is the keeper's to handle.
type IndexKeeper interface {
	Changed(ch *IndexChange)
}

// IndexChange is one conversation's durable change, valid during the
// Changed call only.
type IndexChange struct {
	// ID is the conversation; Conversation is what its log replays to now
	// (nil: its tombstone was recorded, or it is gone), Dir its directory.
	ID           string
	Conversation *ConversationInfo
	Dir          string
	// Whole: the change is not only appends (a new conversation, a fork, logs
	// a caller wrote, a crash's turn closed): its logs are to be read whole.
	Whole bool
	// Turns are the turns that started or ended (as Conversation holds
	// them now).
	Turns []TurnInfo
	// Sessions are the session logs appended to since the conversation's
	// last change was told, as they are now.
	Sessions []SessionLogState
	// Messages are the user and assistant messages those appends recorded, in
	// order.
	Messages []SessionEvent
}

// SessionLogState is a session log as it stands after a change.
type SessionLogState struct {
	ID, Path string
	// Events and Bytes are the log's event count and length.
	Events, Bytes int64
}

// SessionEvent is an event of a session log.
type SessionEvent struct {
	Session string
	Event   convlog.Event
}

// SetIndexKeeper sets the keeper the store tells its changes (nil: none).
func (s *Store) SetIndexKeeper(k IndexKeeper) {
	s.mu.Lock()
	s.keeper = k
	s.mu.Unlock()
}

// pendingIndex is what a conversation's sessions appended since its last
// change was told.
type pendingIndex struct {
	sessions map[string]*convlog.Writer
	order    []string
	messages []SessionEvent
}

// noteAppend takes the events se wrote (or queued) for the next change
// told.
func (se *Session) noteAppend(evs []convlog.Event) {
	oc := se.oc
	if se.st.keeper == nil || oc == nil {
		return
	}
	p := &oc.pending
	if p.sessions == nil {
		p.sessions = map[string]*convlog.Writer{}
	}
	if p.sessions[se.id] == nil {
		p.sessions[se.id] = se.w
		p.order = append(p.order, se.id)
	}
	for i := range evs {
		if evs[i].Type == convlog.TypeUserMessage || evs[i].Type == convlog.TypeAssistantMessage {
			p.messages = append(p.messages, SessionEvent{Session: se.id, Event: evs[i].Clone()})
		}
	}
}

// tellIndex tells the keeper of a change of the open conversation oc, with
// what its sessions appended since the last one.
func (s *Store) tellIndex(oc *openConv, whole bool, turns ...TurnInfo) {
	k := s.keeper
	if k == nil {
		return
	}
	ch := &IndexChange{ID: oc.st.info.ID, Conversation: &oc.st.info, Dir: oc.dir, Whole: whole, Turns: turns}
	p := &oc.pending
	for _, id := range p.order {
		w := p.sessions[id]
		ch.Sessions = append(ch.Sessions, SessionLogState{ID: id, Path: w.Path(), Events: w.NextSeq(), Bytes: w.Size()})
	}
	ch.Messages = p.messages
	k.Changed(ch)
	oc.pending = pendingIndex{}
}

// errNoChange tells change that fn had nothing to record.
var errNoChange = errors.New("no change")

// change runs fn on the live conversation convID under the Store's lock and
// tells the index of what it recorded.
func (s *Store) change(convID string, whole bool, fn func(oc *openConv) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	oc, err := s.liveConv(convID)
	if err != nil {
		return err
	}
	err = fn(oc)
	if err == nil {
		s.tellIndex(oc, whole)
	}
	if err == errNoChange {
		return nil
	}
	return err
}

// appendEvent appends one event of type typ with data v to oc's log.
func (s *Store) appendEvent(oc *openConv, typ string, v any) error {
	ev, err := s.event(typ, v)
	if err != nil {
		return err
	}
	return oc.appendEvents(ev)
}

// tellRemoved tells the keeper that conversation convID is being deleted.
func (s *Store) tellRemoved(convID string) {
	if s.keeper != nil {
		s.keeper.Changed(&IndexChange{ID: convID})
	}
}

// indexPoint tells the keeper of se's change when it is one: a change of the
// conversation log, or any change while no turn runs (inside Batch, the batch
// is written first).
func (se *Session) indexPoint(convChanged bool, turns ...TurnInfo) {
	if se.st.keeper == nil || se.oc == nil {
		return
	}
	if se.inBatch {
		se.deferPoint = se.deferPoint || convChanged
		se.deferTurns = append(se.deferTurns, turns...)
		return
	}
	if convChanged || !se.rec.turnOpen {
		se.st.tellIndex(se.oc, false, turns...)
	}
}

// lastTurn is the latest turn of session sessionID in oc.
func lastTurn(oc *openConv, sessionID string) []TurnInfo {
	ts := oc.st.info.Turns
	for i := len(ts) - 1; i >= 0; i-- {
		if ts[i].SessionID == sessionID {
			return []TurnInfo{ts[i]}
		}
	}
	return nil
}
