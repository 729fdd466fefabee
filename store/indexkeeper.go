package store

import (
	"errors"
	"slices"

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
	sessions []SessionLogState
	messages []SessionEvent
}

// note takes the messages of evs for the next change, and once durable
// what se wrote; a batch's wait in se.notes until it is written.
func (se *Session) note(evs []convlog.Event, durable bool) {
	if se.st.keeper == nil || se.oc == nil {
		return
	}
	for i := range evs {
		if evs[i].Type == convlog.TypeUserMessage || evs[i].Type == convlog.TypeAssistantMessage {
			se.notes = append(se.notes, SessionEvent{Session: se.id, Event: evs[i].Clone()})
		}
	}
	if !durable {
		return
	}
	p := &se.oc.pending
	st := SessionLogState{ID: se.id, Path: se.w.Path(), Events: se.w.NextSeq(), Bytes: se.w.Size()}
	if i := slices.IndexFunc(p.sessions, func(l SessionLogState) bool { return l.ID == se.id }); i >= 0 {
		p.sessions[i] = st
	} else {
		p.sessions = append(p.sessions, st)
	}
	p.messages, se.notes = append(p.messages, se.notes...), nil
}

// tellIndex tells the keeper of a change of oc.
func (s *Store) tellIndex(oc *openConv, whole bool, turns ...TurnInfo) {
	k := s.keeper
	if k == nil {
		return
	}
	k.Changed(&IndexChange{ID: oc.st.info.ID, Conversation: &oc.st.info, Whole: whole, Turns: turns,
		Sessions: oc.pending.sessions, Messages: oc.pending.messages})
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
	return oc.appendEvents(s.convEvent(typ, v))
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
