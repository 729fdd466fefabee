package store

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/convkit/convkit/convlog"
)

// at is a read-only handle of dir for the reading methods. These tests
// read layouts that are not all stores yet (a missing conversations
// directory, say), so Open may take dir for a new store: read-only, that
// creates nothing.
func at(dir string) *Store {
	s, err := Open(context.Background(), dir, OpenOptions{Create: CreateAlways})
	if err != nil {
		panic(err)
	}
	return s
}

// lockDir takes runtime.lock of dir (made a store if it is not one) through
// Open, and hands the hold back.
func lockDir(ctx context.Context, dir string, opts LockOptions) (*Lock, error) {
	s, err := Open(ctx, dir, OpenOptions{Lock: opts, Create: CreateAlways})
	if err != nil {
		return nil, err
	}
	return s.Lock(), nil
}

// convLogPath is the path of generation version of conversation convID's
// own log in the store at dataDir.
func convLogPath(dataDir, convID string, version int, c convlog.Compression) (string, error) {
	dir, err := conversationPath(dataDir, convID)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, ConversationLogName(version, c)), nil
}

// sessLogPath is the path of generation version of session sessionID's
// log in conversation convID of the store at dataDir.
func sessLogPath(dataDir, convID, sessionID string, version int, c convlog.Compression) (string, error) {
	dir, err := conversationPath(dataDir, convID)
	if err != nil {
		return "", err
	}
	name, err := SessionLogName(sessionID, version, c)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// The conversation calls below are the tests' own, taking turn numbers: they
// write the states the recorder never leaves (a conversation without a
// turn, a turn only the conversation log records, a session whose log a
// test writes by hand).

// CreateConversation writes conversation id's log, naming agents and models.
func (s *Store) CreateConversation(id, cwd string, agents, models []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	dir, err := s.newConversationDir(id)
	if err != nil {
		return err
	}
	created := s.convEvent(EventConversationCreated, CreatedData{Cwd: cwd, Agents: append([]string{}, agents...), Models: append([]string{}, models...)})
	return s.createLog(id, dir, []convlog.Event{created}, nil)
}

// RegisterSession records session/started for a session whose log the test
// writes itself.
func (s *Store) RegisterSession(convID, sessionID, agent, model, parent string) error {
	return s.changeWhole(convID, func(oc *openConv) error {
		return s.appendEvent(oc, EventSessionStarted, SessionStartedData{SessionID: sessionID, Agent: agent, Model: model, ParentSession: parent})
	})
}

// StartSession publishes session sessionID's log, empty, and records
// session/started: the root session when parent is "".
func (s *Store) StartSession(convID, sessionID, agent, model, parent string) (*convlog.Writer, error) {
	if parent != "" {
		s.mu.Lock()
		defer s.mu.Unlock()
		oc, err := s.liveConv(convID)
		if err != nil {
			return nil, err
		}
		return s.startSession(oc, sessionID, agent, model, parent)
	}
	p, err := sessLogPath(s.dataDir, convID, sessionID, convlog.CurrentVersion, s.comp)
	if err != nil {
		return nil, err
	}
	h := &convlog.Header{Type: convlog.SessionLog, Version: convlog.CurrentVersion, ID: sessionID, CreatedAt: s.nowMs(), Cwd: "/"}
	if info, err := s.Conversation(convID); err == nil {
		h.Cwd = info.Cwd
	}
	w, err := convlog.Create(p, h, nil, convlog.WriterOptions{Compression: s.comp})
	if err == nil {
		err = s.RegisterSession(convID, sessionID, agent, model, "")
	}
	return w, err
}

// BeginTurn records turn/started (and the automatic title) for turn.
func (s *Store) BeginTurn(convID, sessionID string, turn int64, userText string) error {
	return s.changeWhole(convID, func(oc *openConv) error {
		if _, ok := oc.st.open[sessionID]; ok {
			return fmt.Errorf("conversation %s session %s: %w", convID, sessionID, ErrTurnRunning)
		}
		return s.beginTurn(oc, sessionID, turn, userText)
	})
}

// EndTurn records turn/ended for the session's running turn.
func (s *Store) EndTurn(convID, sessionID string, turn int64, outcome string) error {
	return s.changeWhole(convID, func(oc *openConv) error { return s.endTurn(oc, sessionID, turn, outcome) })
}

// del deletes one conversation as convkit delete does.
func (s *Store) del(convID string) error {
	return s.DeleteAll(context.Background(), []string{convID}, DeleteOptions{})
}

// ID is the session's id.
func (se *Session) ID() string { return se.id }

// Turn reports where the session's turn stands (zero before BeginTurn).
func (se *Session) Turn() convlog.TurnState {
	unlock := se.st.lockSession(se)
	defer unlock()
	if se.w == nil {
		return convlog.TurnState{}
	}
	return se.w.Turn()
}

// NextSeq is the seq the next recorded event gets.
func (se *Session) NextSeq() int64 {
	unlock := se.st.lockSession(se)
	defer unlock()
	if se.w == nil {
		return 0
	}
	return se.w.NextSeq()
}

// ResolveID is ResolveIDs of one ref.
func (s *Store) ResolveID(ref string) (string, error) {
	ids, err := s.ResolveIDs([]string{ref})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// changeWhole is change for the helpers above, whose logs the index must
// read whole.
func (s *Store) changeWhole(convID string, fn func(oc *openConv) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	oc, err := s.liveConv(convID)
	if err != nil {
		return err
	}
	if err := fn(oc); err != nil {
		return err
	}
	s.tellIndex(oc, true)
	return nil
}

// forkSeq forks through seq through (-1: all), a cut between the messages
// Session.Fork names.
func (s *Store) forkSeq(srcConv, srcSession, newConv, newSession string, through int64) error {
	_, err := s.fork(srcConv, srcSession, newConv, newSession, through, -1)
	return err
}

// rewindSeq rewinds to before the user's message at seq before.
func (s *Store) rewindSeq(srcConv, srcSession, newConv, newSession string, before int64) (string, error) {
	return s.fork(srcConv, srcSession, newConv, newSession, 0, before)
}
