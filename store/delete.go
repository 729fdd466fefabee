package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/durable"
)

// ErrHasDependents is wrapped by the *DependentsError of a refused delete.
var ErrHasDependents = errors.New("forks made after a compaction read older history from it")

// DependentsError refuses deleting ID: the conversations Dependents read
// older history from it (forks made after a compaction).
type DependentsError struct {
	ID         string
	Dependents []string
}

func (e *DependentsError) Error() string {
	q := make([]string, len(e.Dependents))
	for i, d := range e.Dependents {
		q[i] = fmt.Sprintf("%q", d)
	}
	return fmt.Sprintf("conversation %q is the fork source of %s, which read older history from it; deleting it would break them",
		e.ID, strings.Join(q, ", "))
}

func (e *DependentsError) Unwrap() error { return ErrHasDependents }

// CheckDelete is the dependents guard: it refuses deleting the conversations
// convIDs together, with a *DependentsError, when a conversation not among
// them reads older history from one of them (a fork made after a
// compaction). It walks the store: its cost grows with the store.
func (s *Store) CheckDelete(convIDs ...string) error {
	going := map[string]bool{}
	for _, id := range convIDs {
		going[id] = true
	}
	for _, id := range convIDs {
		deps, err := s.Dependents(id)
		if err != nil {
			return err
		}
		var kept []string
		for _, d := range deps {
			if !going[d] {
				kept = append(kept, d)
			}
		}
		if len(kept) > 0 {
			return &DependentsError{ID: id, Dependents: kept}
		}
	}
	return nil
}

// Delete removes a conversation for good: refused while a turn runs, and
// (CheckDelete) while forks made after a compaction read older history
// from it, it records the conversation/delete-started tombstone durably,
// then removes the directory and fsyncs conversations/. A crash in between
// leaves the tombstone, and FinishDeletion (reindex) completes the job.
// Deleting a conversation that already carries a tombstone finishes it.
func (s *Store) Delete(convID string) error {
	if err := s.writable(); err != nil {
		return err
	}
	if err := s.CheckDelete(convID); err != nil {
		return err
	}
	return s.DeleteUnguarded(convID)
}

// DeleteUnguarded is Delete without the dependents guard: for a caller
// that checked a set of conversations with CheckDelete before deleting
// them one by one, or was told to break the forks that depend on it
// (convkit delete --force).
func (s *Store) DeleteUnguarded(convID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.markDeleting(convID); err != nil {
		return err
	}
	return s.removeConversation(convID)
}

// MarkDeleting is Delete's first step alone: it checks that no turn runs and
// records the tombstone, leaving the directory in place as an interrupted
// deletion would. The runtime calls Delete; fixtures and crash tests use this
// to produce an interrupted deletion.
func (s *Store) MarkDeleting(convID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.markDeleting(convID)
}

func (s *Store) markDeleting(convID string) error {
	if err := s.writable(); err != nil {
		return err
	}
	oc, err := s.conv(convID)
	if err != nil {
		return err
	}
	info := &oc.st.info
	if info.Deleting {
		return nil
	}
	if info.RunningTurn {
		var running []string
		for _, t := range info.Turns {
			if t.Running() {
				running = append(running, fmt.Sprintf("session %q turn %d", t.SessionID, t.Turn))
			}
		}
		return fmt.Errorf("cannot delete conversation %q: %w (%s); wait for it to end or interrupt it",
			convID, ErrTurnRunning, strings.Join(running, ", "))
	}
	ev, err := s.event(EventDeleteStarted, nil)
	if err != nil {
		return err
	}
	return oc.appendEvents(ev) // durable: Append fsyncs
}

// FinishDeletion completes a deletion whose tombstone was found (reindex
// calls it). A conversation without a tombstone is refused; one already gone
// is done.
func (s *Store) FinishDeletion(convID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	oc, err := s.conv(convID)
	if errors.Is(err, ErrNoConversation) {
		dir, derr := ConversationPath(s.dataDir, convID)
		if derr != nil {
			return derr
		}
		if _, serr := os.Lstat(dir); errors.Is(serr, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	if !oc.st.info.Deleting {
		return fmt.Errorf("conversation %q has no deletion tombstone; delete it with Delete", convID)
	}
	return s.removeConversation(convID)
}

// removeConversation removes the directory of a tombstoned conversation. The
// conversation log (holding the tombstone) goes last, so a crash never
// leaves session logs without the record that they are being deleted.
func (s *Store) removeConversation(convID string) error {
	dir, err := s.conversationDir(convID)
	if err != nil {
		return err
	}
	if oc := s.convs[convID]; oc != nil {
		oc.w.Close()
		delete(s.convs, convID)
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var last []string
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if n, ok := convlog.ParseName(e.Name()); ok && n.Base == ConversationLogBase && e.Type().IsRegular() {
			last = append(last, p)
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("delete conversation %q: %w", convID, err)
		}
	}
	if len(entries) > 0 {
		if err := durable.SyncDir(dir); err != nil {
			return err
		}
	}
	for _, p := range last {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete conversation %q: %w", convID, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("delete conversation %q: %w", convID, err)
	}
	return durable.SyncDir(ConversationsDir(s.dataDir))
}
