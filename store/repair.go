package store

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/convlog/upgrade"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/termtext"
)

// RepairOptions tune Repair: DryRun changes nothing; OnEvent receives each
// change as it is made (or found, dry).
type RepairOptions struct {
	DryRun  bool
	OnEvent func(RepairChange)
}

// RepairChange is one change Repair made: Kind is ItemTurnClosed (Turn says
// how), ItemDeletionFinished, ItemEmptyRemoved or ItemTempRemoved.
type RepairChange struct {
	Kind ItemKind    `json:"kind"`
	ID   string      `json:"id,omitempty"` // the conversation, as Item names it
	Path string      `json:"path"`
	Turn *ClosedTurn `json:"turn,omitempty"`
}

// RepairResult is what Repair did; an empty directory removed counts as a
// deletion finished.
type RepairResult struct {
	DryRun            bool           `json:"dryRun"`
	Changes           []RepairChange `json:"changes"`
	Skipped           []Item         `json:"skipped"` // ItemSkipped: found and left alone
	TurnsClosed       int            `json:"turnsClosed"`
	DeletionsFinished int            `json:"deletionsFinished"`
	TempsRemoved      int            `json:"tempsRemoved"`
}

// Repair brings a store a crash left behind to a consistent state by
// appending only: open turns are closed as interrupted, interrupted deletions
// finished and temporary files removed. It needs runtime.lock; sessions open
// in this Store are left alone, unreadable conversations skipped.
func (s *Store) Repair(ctx context.Context, opts RepairOptions) (*RepairResult, error) {
	if err := s.writable(); err != nil {
		return nil, err
	}
	res := &RepairResult{DryRun: opts.DryRun, Changes: []RepairChange{}, Skipped: []Item{}}
	change := func(c RepairChange) {
		switch c.Kind {
		case ItemTurnClosed:
			res.TurnsClosed++
		case ItemDeletionFinished, ItemEmptyRemoved:
			res.DeletionsFinished++
		case ItemTempRemoved:
			res.TempsRemoved++
		}
		res.Changes = append(res.Changes, c)
		if opts.OnEvent != nil {
			opts.OnEvent(c)
		}
	}
	tree, err := s.Walk()
	if err != nil {
		return nil, err
	}
	temps := append(append([]string(nil), tree.Temps...), s.TempIndexes()...)
	for _, p := range temps {
		if !opts.DryRun {
			if err := os.Remove(p); err != nil {
				res.Skipped = append(res.Skipped, Item{Kind: ItemSkipped, Path: p, Reason: termtext.Reason(p, err)})
				continue
			}
		}
		change(RepairChange{Kind: ItemTempRemoved, Path: p})
	}
	for _, c := range tree.Conversations {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		skip, err := s.repairConversation(c, tree.Problems, temps, opts.DryRun, change)
		if err != nil {
			return nil, err
		}
		if skip != nil {
			res.Skipped = append(res.Skipped, *skip)
		}
	}
	return res, nil
}

// repairConversation repairs one conversation directory; one it cannot read
// is a skip.
func (s *Store) repairConversation(c ConversationDir, problems []Item, temps []string, dry bool, change func(RepairChange)) (*Item, error) {
	convLog := c.ConversationLog()
	if convLog == nil {
		ents, err := os.ReadDir(c.Path)
		kind, remove := ItemEmptyRemoved, []string{c.Path}
		switch {
		case err == nil && len(ents) == 0:
		case err == nil && interruptedCreate(c, ents, temps):
			kind, remove = ItemTempRemoved, []string{c.Logs[0].Path, c.Path}
		default:
			return &Item{Kind: ItemSkipped, ID: c.ID, Path: c.Path, Reason: "no conversation log (metadata[.vN].jsonl[.zst]): an incomplete create, or not a conversation; left as it is"}, nil
		}
		if !dry {
			for _, p := range remove {
				if err := os.Remove(p); err != nil {
					return nil, err
				}
			}
			if err := durable.SyncDir(filepath.Dir(c.Path)); err != nil {
				return nil, err
			}
		}
		change(RepairChange{Kind: kind, ID: c.ID, Path: c.Path})
		return nil, nil
	}
	info, err := convLog.ReadConversation()
	if err != nil {
		return &Item{Kind: ItemSkipped, ID: c.ID, Path: convLog.Path, Reason: "unreadable conversation log: " + termtext.Reason(convLog.Path, err)}, nil
	}
	if info.ID != c.ID {
		return &Item{Kind: ItemSkipped, ID: c.ID, Path: convLog.Path, Reason: fmt.Sprintf("conversation log names id %s, but its directory is %s", termtext.Quote(info.ID), termtext.Quote(c.ID))}, nil
	}
	if info.Deleting {
		if !dry {
			s.mu.Lock()
			err := s.finishDeletion(c.ID, false)
			s.mu.Unlock()
			if err != nil {
				return nil, err
			}
		}
		change(RepairChange{Kind: ItemDeletionFinished, ID: c.ID, Path: c.Path})
		return nil, nil
	}
	// The sessions with something open, in their log or the conversation's.
	type target struct {
		log   *Log
		state convlog.TurnState
		next  int64
	}
	var targets []target
	seen := map[string]bool{}
	sessions := c.SessionLogs()
	for i := range sessions {
		l := &sessions[i]
		seen[l.ID] = true
		ts, next, err := readTurnState(l.Path)
		if err != nil {
			if runningIn(info, l.ID) {
				return &Item{Kind: ItemSkipped, ID: c.ID, Path: l.Path, Reason: "unreadable session log with a running turn: " + termtext.Reason(l.Path, err)}, nil
			}
			continue
		}
		if ts.Open || ts.Compaction != nil || runningIn(info, l.ID) {
			targets = append(targets, target{log: l, state: ts, next: next})
		}
	}
	// Closing a turn whose session log is missing or refused would
	// contradict that log once it is back.
	for _, t := range info.Turns {
		if t.Outcome == "" && !seen[t.SessionID] {
			return missingSessionLog(c, problems, t), nil
		}
	}
	if len(targets) == 0 {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	oc, err := s.conv(c.ID)
	if err != nil {
		return &Item{Kind: ItemSkipped, ID: c.ID, Path: convLog.Path, Reason: termtext.Reason(convLog.Path, err)}, nil
	}
	for _, t := range targets {
		if s.sessions[sessionKey{c.ID, t.log.ID}] != nil {
			continue // open in this Store: it is live
		}
		closed, err := s.repairSession(oc, t.log, t.state, t.next, dry)
		if err != nil {
			return nil, err
		}
		if closed != nil {
			change(RepairChange{Kind: ItemTurnClosed, ID: c.ID, Path: t.log.Path, Turn: closed})
			if !dry {
				s.tellIndex(oc, true)
			}
		}
	}
	return nil, nil
}

// interruptedCreate reports whether c, without a conversation log, holds
// only what a new conversation's first message writes before it.
func interruptedCreate(c ConversationDir, ents []os.DirEntry, temps []string) bool {
	if len(c.Logs) != 1 || len(c.Logs[0].Generations) != 1 || c.Logs[0].Current.Version != convlog.CurrentVersion {
		return false
	}
	for _, e := range ents {
		p := filepath.Join(c.Path, e.Name())
		if p != c.Logs[0].Path && !slices.Contains(temps, p) {
			return false
		}
	}
	r, err := convlog.Open(c.Logs[0].Path, convlog.ReaderOptions{})
	if err != nil {
		return false
	}
	defer r.Close()
	if r.Header().Type != convlog.SessionLog || r.Header().ParentSession != "" {
		return false
	}
	n := 0
	for e, err := range r.Events() {
		if err != nil || e.Type != convlog.TypeInboxSpliced {
			return false
		}
		n++
	}
	return n > 0
}

// missingSessionLog is the skip of c, whose running turn t has no readable
// session log.
func missingSessionLog(c ConversationDir, problems []Item, t TurnInfo) *Item {
	base, err := EncodeBase(t.SessionID)
	if err == nil {
		for _, p := range problems {
			if filepath.Dir(p.Path) != c.Path {
				continue
			}
			if n, ok := convlog.ParseName(filepath.Base(p.Path)); ok && n.Base == base {
				return &Item{Kind: ItemSkipped, ID: c.ID, Path: p.Path, Reason: fmt.Sprintf("session %s has a running turn (turn %d) and its log cannot be read (%s): the turn is left open",
					termtext.Quote(t.SessionID), t.Turn, p.Reason)}
			}
		}
	}
	return &Item{Kind: ItemSkipped, ID: c.ID, Path: c.Path, Reason: fmt.Sprintf("session %s has a running turn (turn %d) and no session log (%s[.vN].jsonl[.zst]): the turn is left open",
		termtext.Quote(t.SessionID), t.Turn, base)}
}

func runningIn(info *ConversationInfo, sessionID string) bool {
	return slices.ContainsFunc(info.Turns, func(t TurnInfo) bool { return t.SessionID == sessionID && t.Outcome == "" })
}

// repairSession closes session l's open turn, in its log and the
// conversation log.
func (s *Store) repairSession(oc *openConv, l *Log, state convlog.TurnState, next int64, dry bool) (*ClosedTurn, error) {
	if !state.Open && state.Compaction == nil && !onlyInConversation(oc, l.ID, state) {
		return s.closeTurnState(oc, l.ID, state, next, "", nil, nil, dry)
	}
	if dry {
		c, err := s.closeTurnState(oc, l.ID, state, next, filepath.Base(l.Path), nil, nil, true)
		if c != nil && l.Current.Version < convlog.CurrentVersion {
			c.Upgraded, _ = upgrade.SuccessorPath(l.Path, l.Current.Compression)
			c.SessionLog = filepath.Base(c.Upgraded)
		}
		return c, err
	}
	w, current, err := upgrade.OpenAppend(l.Path, convlog.WriterOptions{})
	if err != nil {
		return nil, err
	}
	defer w.Close()
	c, err := s.closeTurnState(oc, l.ID, w.Turn(), w.NextSeq(), filepath.Base(w.Path()), w, nil, false)
	if c != nil && current != l.Path {
		c.Upgraded = current
	}
	return c, err
}

// readTurnState reads a session log as the writer would, read-only, and
// reports where its turn stands and its next seq. An older log is read as
// its successor, which the repair appends to and whose rules track an open
// compaction.
func readTurnState(path string) (convlog.TurnState, int64, error) {
	src, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		return convlog.TurnState{}, 0, err
	}
	var r interface {
		Header() *convlog.Header
		Events() iter.Seq2[*convlog.Event, error]
		RuleProblem(error) error
		Close() error
	} = src
	if src.Header().Version < convlog.CurrentVersion {
		if r, err = upgrade.FromReader(src, path, upgrade.Options{}); err != nil {
			return convlog.TurnState{}, 0, err
		}
	}
	defer r.Close()
	v := convlog.NewValidator(r.Header())
	var next int64
	for e, err := range r.Events() {
		if err != nil {
			return convlog.TurnState{}, 0, err
		}
		if err := v.Check(e); err != nil {
			return convlog.TurnState{}, 0, r.RuleProblem(err)
		}
		next = e.Seq + max(e.Packed, 1)
	}
	return v.Turn(), next, nil
}

// finishDeletion is FinishDeletion; strict refuses an id whose directory is
// there without a readable conversation.
func (s *Store) finishDeletion(convID string, strict bool) error {
	oc, err := s.conv(convID)
	if errors.Is(err, ErrNoConversation) {
		if !strict {
			return nil
		}
		dir, derr := conversationPath(s.dataDir, convID)
		if derr != nil {
			return derr
		}
		if _, serr := os.Lstat(dir); errors.Is(serr, os.ErrNotExist) {
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	if !oc.st.info.Deleting {
		hint := ""
		if strict {
			hint = "; delete it with DeleteAll"
		}
		return fmt.Errorf("conversation %s has no deletion tombstone%s", termtext.Quote(convID), hint)
	}
	return s.removeConversation(convID)
}
