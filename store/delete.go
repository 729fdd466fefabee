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

// Delete removes a conversation for good: refused while a turn runs, it
// records the conversation/delete-started tombstone durably, then removes the
// directory and fsyncs conversations/. A crash in between leaves the
// tombstone, and FinishDeletion (reindex) completes the job. Deleting a
// conversation that already carries a tombstone finishes it.
func (s *Store) Delete(convID string) error {
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
