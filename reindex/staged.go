package reindex

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"

	"github.com/convkit/convkit/contract"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/machine"
	"github.com/convkit/convkit/store"
)

// ErrNotStaged is wrapped by Staged's methods when the index being built
// cannot stand for the one Run would build on the store as it is (a
// conversation skipped, added out of order, or found different once
// placed): the caller abandons it and runs Run instead.
var ErrNotStaged = errors.New("the staged index does not stand for the store")

// Staged builds, ahead of time, the index Run would rebuild on a store
// whose conversations are still being written elsewhere on its file system
// (an import's staging tree) and then moved into it by renaming their
// directories, which keeps every log's stat identity: Add replays each
// conversation where it is, in the order the store's walk will list it,
// into a new database outside the store, and Publish, once they are
// placed, checks that the store's walk lists exactly those conversations
// with the same logs and fingerprints, brings why each will not open here
// up to date (the fork sources present, the working directories now),
// and swaps the database in as Run does. The rows, and the order they are
// written in (the search table's row numbers), are Run's, so the index is
// the one Run builds.
type Staged struct {
	opts  Options
	path  string
	db    *index.DB
	w     *index.Writer
	convs []stagedRow
	res   Result
	err   error
}

// stagedRow is what Publish checks of one conversation written.
type stagedRow struct {
	id, name    string
	logs        []string // the current generation of each log, in walk order
	fingerprint string
	needs       machine.Needs
	written     []string
}

// NewStaged starts a staged index in a new database at path, which must
// not exist and must be on the store's file system.
func NewStaged(ctx context.Context, path string, opts Options) (*Staged, error) {
	opts.defaults()
	db, err := index.Create(path)
	if err != nil {
		os.Remove(path)
		return nil, err
	}
	w, err := db.Begin(ctx)
	if err != nil {
		db.Close()
		os.Remove(path)
		return nil, err
	}
	return &Staged{opts: opts, path: path, db: db, w: w}, nil
}

// Add reads the conversation c (in its staging directory) and writes its
// rows. Conversations must be added in the order of the store's walk (by
// directory name). An error wrapping ErrNotStaged (or any other) leaves
// the staged index unusable: Abandon it.
func (s *Staged) Add(ctx context.Context, c store.ConversationDir) error {
	if s.err != nil {
		return s.err
	}
	if n := len(s.convs); n > 0 && c.Name <= s.convs[n-1].name {
		return s.fail(fmt.Errorf("%w: conversation %s added after %s", ErrNotStaged, c.Name, s.convs[n-1].name))
	}
	// Fork sources are checked by Publish, against the store as placed.
	b := readConversationWith(ctx, c, readEnv{present: func(string) bool { return true },
		withText: !s.opts.NoText, machine: s.opts.Machine, prereads: s.opts.Prereads, convPrereads: s.opts.ConversationPrereads})
	switch {
	case b.err != nil:
		return s.fail(b.err)
	case b.skip != nil:
		return s.fail(fmt.Errorf("%w: %s: %s", ErrNotStaged, b.skip.Path, b.skip.Reason))
	case b.deleting || b.empty || b.conv == nil:
		return s.fail(fmt.Errorf("%w: conversation %s is not indexed as it is", ErrNotStaged, c.Name))
	}
	if err := s.w.Put(ctx, b.conv, b.msgs); err != nil {
		return s.fail(err)
	}
	row := stagedRow{id: c.ID, name: c.Name, fingerprint: b.fingerprint, needs: needsOf(b.conv), written: b.conv.WillNotOpen}
	for _, l := range c.Logs {
		row.logs = append(row.logs, l.Current.String())
	}
	s.convs = append(s.convs, row)
	s.res.Indexed++
	s.res.Replayed++
	s.res.Sessions += len(b.conv.Sessions)
	s.res.Turns += len(b.conv.Turns)
	s.res.Messages += len(b.msgs)
	s.res.FromPrereads += b.fromPrereads
	return nil
}

func (s *Staged) fail(err error) error {
	if s.err == nil {
		s.err = err
	}
	return s.err
}

// Abandon drops the staged index.
func (s *Staged) Abandon() {
	if s.w != nil {
		s.w.Rollback()
		s.w = nil
	}
	if s.db != nil {
		s.db.Close()
		s.db = nil
		for _, suffix := range []string{"", "-journal", "-wal", "-shm"} {
			os.Remove(s.path + suffix)
		}
	}
	if s.err == nil {
		s.err = fmt.Errorf("%w: abandoned", ErrNotStaged)
	}
}

// Publish makes the staged index metadata.db of st, the store the
// conversations were placed in, which must hold runtime.lock exclusively
// and have no metadata.db. It walks st as Run does: the walk must list
// the conversations added, in the same order, with the same logs and
// fingerprints, and nothing else (no problem, no temporary file), else
// the error wraps ErrNotStaged and nothing is published. Run's removal of
// a killed rebuild's temporary databases is done too. The result is Run's.
func (s *Staged) Publish(ctx context.Context, st *store.Store) (*Result, error) {
	if s.err != nil {
		return nil, s.err
	}
	if st.Lock() == nil || st.Lock().Mode() != store.LockExclusive {
		return nil, errors.New("reindex needs the store opened with the exclusive lock")
	}
	tree, err := st.WalkJobs(s.opts.Jobs)
	if err != nil {
		return nil, s.fail(err)
	}
	if len(tree.Problems) > 0 || len(tree.Temps) > 0 {
		return nil, s.fail(fmt.Errorf("%w: the store's walk finds more than the conversations placed", ErrNotStaged))
	}
	if len(tree.Conversations) != len(s.convs) {
		return nil, s.fail(fmt.Errorf("%w: %d conversations in the store, %d staged", ErrNotStaged, len(tree.Conversations), len(s.convs)))
	}
	for i, c := range tree.Conversations {
		row := &s.convs[i]
		same := c.ID == row.id && c.Name == row.name && len(c.Logs) == len(row.logs)
		for k := 0; same && k < len(c.Logs); k++ {
			same = c.Logs[k].Current.String() == row.logs[k] && len(c.Logs[k].Generations) == 1
		}
		if !same || dirFingerprint(c) != row.fingerprint {
			return nil, s.fail(fmt.Errorf("%w: conversation %s changed once placed", ErrNotStaged, c.Name))
		}
	}
	for _, p := range st.TempIndexes() {
		if os.Remove(p) == nil {
			s.opts.OnEvent(Event{Kind: EventRemovedIndex, Path: p})
		}
	}
	res := s.res
	res.SchemaVersion, res.Index = contract.Version, st.IndexPath()
	res.Skipped, res.DeletionsFinished, res.WillNotOpen, res.Warnings = []Skip{}, []string{}, []WillNotOpen{}, s.opts.warnings()
	// Why each will not open, as Run finds it once every conversation is
	// read (finishForks), and with the working directories as they are
	// now.
	present := presentIn(tree)
	for i, c := range tree.Conversations {
		row := &s.convs[i]
		reasons := s.opts.Machine.Check(row.needs, func(id string) bool { return present[id] })
		if !slices.Equal(reasons, row.written) {
			if err := s.w.SetWillNotOpen(ctx, row.id, reasons); err != nil {
				return nil, s.fail(err)
			}
		}
		if len(reasons) > 0 {
			res.WillNotOpen = append(res.WillNotOpen, WillNotOpen{ID: c.ID, Reasons: reasons})
			s.opts.OnEvent(Event{Kind: EventWillNotOpen, Path: c.Path, ID: c.ID, Reasons: reasons})
		}
	}
	if err := interrupted(ctx, nil); err != nil {
		return nil, s.fail(err)
	}
	w := s.w
	s.w = nil
	if err := w.Commit(); err != nil {
		return nil, s.fail(err)
	}
	db := s.db
	s.db = nil
	if err := db.Finish(); err != nil {
		os.Remove(s.path)
		return nil, s.fail(err)
	}
	if err := swap(s.path, st.IndexPath()); err != nil {
		os.Remove(s.path)
		return nil, s.fail(err)
	}
	s.err = errors.New("published")
	return &res, nil
}
