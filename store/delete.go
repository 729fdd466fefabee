package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/termtext"
)

// ErrHasDependents is wrapped by the error refusing to delete a conversation
// forks read older history from.
var ErrHasDependents = errors.New("forks made after a compaction read older history from it")

// checkDelete refuses deleting check, among all, when a readable
// conversation not in all reads older history from one of them.
func (s *Store) checkDelete(check, all []string) error {
	if len(check) == 0 {
		return nil
	}
	tree, err := s.Walk()
	if err != nil {
		return err
	}
	dependents := map[string][]string{}
	for _, c := range tree.Conversations {
		if l := c.ConversationLog(); l != nil && !slices.Contains(all, c.ID) {
			if info, err := l.ReadConversation(); err == nil && !info.Deleting {
				for _, d := range Dependencies(info) {
					dependents[d] = append(dependents[d], c.ID)
				}
			}
		}
	}
	for _, id := range check {
		if deps := dependents[id]; len(deps) > 0 {
			sort.Strings(deps)
			for i, d := range deps {
				deps[i] = termtext.Quote(d)
			}
			return &wordedError{err: ErrHasDependents, msg: fmt.Sprintf("conversation %s is the fork source of %s, which read older history from it; deleting it would break them",
				termtext.Quote(id), strings.Join(deps, ", "))}
		}
	}
	return nil
}

// deleteOne records the tombstone durably, then removes the directory.
func (s *Store) deleteOne(convID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.markDeleting(convID); err != nil {
		return err
	}
	return s.removeConversation(convID)
}

// MarkDeleting records the tombstone only, as an interrupted deletion
// leaves it (for fixtures and crash tests).
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
	if err := runningError(info); err != nil {
		return err
	}
	if err := s.appendEvent(oc, eventDeleteStarted, nil); err != nil {
		return err
	}
	s.tellRemoved(convID)
	return nil
}

// runningError refuses deleting a conversation while a turn runs.
func runningError(info *ConversationInfo) error {
	if !info.RunningTurn {
		return nil
	}
	var running []string
	for _, t := range info.Turns {
		if t.Outcome == "" {
			running = append(running, fmt.Sprintf("session %s turn %d", termtext.Quote(t.SessionID), t.Turn))
		}
	}
	return fmt.Errorf("cannot delete conversation %s: %w (%s); wait for it to end or interrupt it",
		termtext.Quote(info.ID), ErrTurnRunning, strings.Join(running, ", "))
}

// What DeleteAll does with each conversation (Outcome.Action).
const (
	DeleteActionDelete      = "delete"          // record the tombstone, then remove the directory
	DeleteActionFinish      = "finish-deletion" // its deletion was recorded: remove the directory
	DeleteActionRemoveEmpty = "remove-empty"    // a killed delete left its directory empty
	DeleteActionAlready     = "already-deleted" // gone, and a killed delete's journal names it
)

// DeleteOptions configure DeleteAll. Force deletes a conversation forks read
// older history from. Done is called for each conversation once it is gone
// (already: a killed delete removed it) to update metadata.db; its error
// stops the command.
type DeleteOptions struct {
	Force bool
	Done  func(convID string, already bool) error
}

// DeleteAll deletes convIDs as one command that a rerun finishes after a
// kill. It checks them all first: each must exist (or be in an earlier
// delete's journal), be no link, run no turn and, unless opts.Force, leave no
// fork without its history (ErrHasDependents); then it publishes its journal
// and deletes each, tombstone first, ctx stopping it between two.
func (s *Store) DeleteAll(ctx context.Context, convIDs []string, opts DeleteOptions) error {
	if err := s.writable(); err != nil {
		return err
	}
	items, journals, err := s.checkDeleteAll(convIDs, opts.Force)
	if err != nil {
		return err
	}
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	own, err := s.writeDeleteJournal(ctx, ids)
	if err != nil {
		return err
	}
	for _, it := range items {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch it.Action {
		case DeleteActionAlready:
		case DeleteActionRemoveEmpty:
			if err := s.removeEmpty(it.ID); err != nil {
				return err
			}
		default:
			if err := s.deleteOne(it.ID); err != nil {
				return err
			}
		}
		if opts.Done != nil {
			if err := opts.Done(it.ID, it.Action == DeleteActionAlready); err != nil {
				return err
			}
		}
	}
	return s.removeJournals(s.expiredJournals(journals, own))
}

// checkDeleteAll checks every conversation, writing nothing, and returns
// what is to be done with each (without repeats) and the journals.
func (s *Store) checkDeleteAll(convIDs []string, force bool) ([]Outcome, []journalFile, error) {
	journals, err := s.deleteJournals()
	if err != nil {
		return nil, nil, err
	}
	journaled := map[string]bool{}
	for _, j := range journals {
		for _, id := range j.ids {
			journaled[id] = true
		}
	}
	var items []Outcome
	var ids, live []string
	seen := map[string]bool{}
	for _, id := range convIDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		ids = append(ids, id)
		it, err := s.deleteItem(id, journaled[id])
		if err != nil {
			return nil, nil, err
		}
		if it.Action == DeleteActionDelete {
			live = append(live, id)
		}
		items = append(items, it)
	}
	if !force {
		if err := s.checkDelete(live, ids); err != nil {
			return nil, nil, err
		}
	}
	return items, journals, nil
}

// deleteItem finds what DeleteAll does with a conversation, or why not.
func (s *Store) deleteItem(convID string, journaled bool) (Outcome, error) {
	it := Outcome{ID: convID}
	dir, err := s.conversationDir(convID)
	if err != nil {
		return it, err
	}
	it.Path = dir
	ents, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist) && journaled:
		it.Action = DeleteActionAlready
		return it, nil
	case errors.Is(err, os.ErrNotExist):
		return it, fmt.Errorf("conversation %s: %w", termtext.Quote(convID), ErrNoConversation)
	case err != nil:
		return it, err
	case len(ents) == 0:
		it.Action = DeleteActionRemoveEmpty
		return it, nil
	}
	info, err := s.Conversation(convID)
	if err != nil {
		return it, err
	}
	it.Title, it.Action = info.Title, DeleteActionFinish
	if !info.Deleting {
		it.Action = DeleteActionDelete
		return it, runningError(info)
	}
	return it, nil
}

// removeEmpty removes a directory a killed delete left empty (os.Remove
// refuses one that gained an entry since).
func (s *Store) removeEmpty(convID string) error {
	dir, err := s.conversationDir(convID)
	if err != nil {
		return err
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("delete conversation %s: %w", termtext.Quote(convID), err)
	}
	return durable.SyncDir(ConversationsDir(s.dataDir))
}

// FinishDeletion completes a deletion whose tombstone was found; one
// without a tombstone is refused, one already gone is done.
func (s *Store) FinishDeletion(convID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	return s.finishDeletion(convID, true)
}

// removeConversation removes a tombstoned conversation's directory, its
// conversation log (the tombstone) last.
func (s *Store) removeConversation(convID string) error {
	dir, err := s.conversationDir(convID)
	if err != nil {
		return err
	}
	s.closeConversation(convID)
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
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
			return fmt.Errorf("delete conversation %s: %w", termtext.Quote(convID), err)
		}
	}
	if len(entries) > 0 {
		if err := durable.SyncDir(dir); err != nil {
			return err
		}
	}
	for _, p := range last {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("delete conversation %s: %w", termtext.Quote(convID), err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("delete conversation %s: %w", termtext.Quote(convID), err)
	}
	return durable.SyncDir(ConversationsDir(s.dataDir))
}

// Outcome is what a command did, or would do, with one conversation:
// rename, archive, unarchive and delete, and a delete's plan, which adds
// the directory and the regular files (and their bytes) it would remove.
type Outcome struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	Title  string `json:"title,omitempty"`
	Path   string `json:"path,omitempty"`
	Files  int    `json:"files,omitempty"`
	Bytes  int64  `json:"bytes,omitempty"`
}

// PlanDelete checks convIDs as DeleteAll does and returns what it would do.
func (s *Store) PlanDelete(convIDs []string, force bool) ([]Outcome, error) {
	items, _, err := s.checkDeleteAll(convIDs, force)
	if err != nil {
		return nil, err
	}
	for i, it := range items {
		if it.Action == DeleteActionDelete || it.Action == DeleteActionFinish {
			if items[i].Files, items[i].Bytes, err = filesIn(it.Path); err != nil {
				return nil, err
			}
		}
	}
	return items, nil
}

// filesIn counts the regular files directly in dir and their bytes.
func filesIn(dir string) (int, int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	n, size := 0, int64(0)
	for _, ent := range ents {
		fi, err := os.Lstat(filepath.Join(dir, ent.Name()))
		if err != nil {
			return 0, 0, err
		}
		if fi.Mode().IsRegular() {
			n++
			size += fi.Size()
		}
	}
	return n, size, nil
}

// A rerun of a killed delete must tell the conversations it removed from ids
// never in the store, so DeleteAll first publishes a journal,
// <data-dir>/.delete-<16 hex>.journal, naming them; at most maxJournals are
// kept, for journalAge.
const (
	journalPrefix   = ".delete-"
	journalSuffix   = ".journal"
	maxJournalBytes = 16 << 20 // the ids of one command line
	journalAge      = 30 * 24 * time.Hour
	maxJournals     = 256
)

type deleteJournal struct {
	IDs []string `json:"ids"`
}

type journalFile struct {
	path  string
	ids   []string // nil when unreadable: a kill while it was written, before any deletion
	mtime time.Time
}

func isJournalName(name string) bool {
	hexPart, ok := strings.CutPrefix(name, journalPrefix)
	if !ok {
		return false
	}
	hexPart, ok = strings.CutSuffix(hexPart, journalSuffix)
	if !ok || len(hexPart) != 16 {
		return false
	}
	_, err := hex.DecodeString(hexPart)
	return err == nil
}

// deleteJournals lists the journals (regular files) in the data directory.
func (s *Store) deleteJournals() ([]journalFile, error) {
	ents, err := os.ReadDir(s.dataDir)
	if err != nil {
		return nil, err
	}
	var out []journalFile
	for _, e := range ents {
		if !isJournalName(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		j := journalFile{path: filepath.Join(s.dataDir, e.Name())}
		f, err := durable.OpenRegular(j.path, os.O_RDONLY)
		if err != nil {
			continue
		}
		if fi, err := f.Stat(); err == nil {
			j.mtime = fi.ModTime()
		}
		b, err := io.ReadAll(io.LimitReader(f, maxJournalBytes+1))
		f.Close()
		if err == nil && len(b) <= maxJournalBytes {
			j.ids = parseJournal(b)
		}
		out = append(out, j)
	}
	return out, nil
}

// parseJournal reads a journal's ids, or nil when b is not one.
func parseJournal(b []byte) []string {
	var dj deleteJournal
	if json.Unmarshal(bytes.TrimSpace(b), &dj) != nil {
		return nil
	}
	ids := []string{}
	for _, id := range dj.IDs {
		if _, err := EncodeSegment(id); err == nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// writeDeleteJournal durably writes a new journal naming ids.
func (s *Store) writeDeleteJournal(ctx context.Context, ids []string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	path := filepath.Join(s.dataDir, journalPrefix+hex.EncodeToString(r[:])+journalSuffix)
	b, err := json.Marshal(deleteJournal{IDs: ids})
	if err != nil {
		return "", err
	}
	f, err := durable.CreateExcl(path)
	if err != nil {
		return "", fmt.Errorf("the delete journal: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = durable.SyncDir(s.dataDir)
	}
	if err != nil {
		os.Remove(path)
		return "", fmt.Errorf("write the delete journal %s: %w", path, err)
	}
	return path, nil
}

// expiredJournals are the journals to remove after a delete: unreadable
// ones, those older than journalAge and the oldest beyond maxJournals, never
// keep (this run's).
func (s *Store) expiredJournals(all []journalFile, keep string) []string {
	var out []string
	var kept []journalFile
	// File times are the system's clock, not the store's.
	cutoff := time.Now().Add(-journalAge)
	for _, j := range all {
		switch {
		case j.path == keep:
		case j.ids == nil, j.mtime.Before(cutoff):
			out = append(out, j.path)
		default:
			kept = append(kept, j)
		}
	}
	sort.Slice(kept, func(i, k int) bool { return kept[i].mtime.After(kept[k].mtime) })
	for i, j := range kept {
		if i+1 >= maxJournals { // this run's counts as one
			out = append(out, j.path)
		}
	}
	return out
}

func (s *Store) removeJournals(paths []string) error {
	var errs []error
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if len(paths) > 0 {
		errs = append(errs, durable.SyncDir(s.dataDir))
	}
	return errors.Join(errs...)
}
