package store

import (
	"errors"

	"github.com/convkit/convkit/convlog"
)

// IndexKeeper keeps metadata.db current (reindex.NewKeeper): the store tells
// it each durable change listing or search depends on (a running turn's at
// its end), under the conversation's lock, in order.
type IndexKeeper interface {
	Changed(ch *IndexChange)
}

// IndexChange is one conversation's durable change, valid during Changed
// only. Conversation is what its log replays to (nil: deleting or gone);
// Whole: not only appends, so its logs are to be read whole; Turns started
// or ended; Sessions were appended to since the last change told, recording
// Messages (user and assistant, in order).
type IndexChange struct {
	ID           string
	Conversation *ConversationInfo
	Dir          string
	Whole        bool
	Turns        []TurnInfo
	Sessions     []SessionLogState
	Messages     []SessionEvent
}

// SessionLogState is a session log's event count and length after a change.
type SessionLogState struct {
	ID, Path      string
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

type pendingIndex struct {
	sessions map[string]*convlog.Writer
	order    []string
	messages []SessionEvent
}

// noteAppend takes the events se wrote (or queued) for the next change.
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

// tellIndex tells the keeper of a change of oc.
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

// change runs fn on the live conversation convID and tells the index.
func (s *Store) change(convID string, fn func(oc *openConv) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	oc, err := s.liveConv(convID)
	if err != nil {
		return err
	}
	err = fn(oc)
	if err == nil {
		s.tellIndex(oc, false)
	}
	if err == errNoChange {
		return nil
	}
	return err
}

// appendEvent appends one event of type typ with data v to oc's log.
func (s *Store) appendEvent(oc *openConv, typ string, v any) error {
	b := &eventBatch{s: s}
	b.add(typ, v)
	return b.appendTo(oc)
}

// tellRemoved tells the keeper that conversation convID is being deleted.
func (s *Store) tellRemoved(convID string) {
	if s.keeper != nil {
		s.keeper.Changed(&IndexChange{ID: convID})
	}
}

// indexPoint tells the keeper of se's change of the conversation log, or of
// any while no turn runs (inside Batch, once it is written).
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
