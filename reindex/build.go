package reindex

import (
	"context"
	"os"
	"sort"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/store"
)

// A Build rebuilds an index from conversations handed to it one at a time,
// each once its logs are complete (an import's extraction), so the writer
// works while they are still being made. Its methods are called from one
// goroutine.
type Build struct {
	j     *job
	db    *index.DB
	w     *index.Writer
	tmp   string
	convs []store.ConversationDir
}

// NewBuild starts a rebuild of the index of s, locked as Run wants it.
func NewBuild(ctx context.Context, s *store.Store, opts Options) (*Build, error) {
	j, err := newJob(s, opts)
	if err != nil {
		return nil, err
	}
	j.present = map[string]bool{}
	return j.newBuild(ctx)
}

func (j *job) newBuild(ctx context.Context) (*Build, error) {
	tmp, err := j.s.NewTempIndex()
	if err != nil {
		return nil, err
	}
	b := &Build{j: j, tmp: tmp}
	if b.db, err = index.Create(tmp); err != nil {
		os.Remove(tmp)
		return nil, err
	}
	if b.w, err = b.db.Begin(ctx); err != nil {
		b.discard()
		return nil, err
	}
	return b, nil
}

// Add reads conversation c and writes its rows, as Run would.
func (b *Build) Add(ctx context.Context, c store.ConversationDir) error {
	j := b.j
	j.present[c.ID] = true
	b.convs = append(b.convs, c)
	bt := readConversationWith(ctx, c, readEnv{present: func(id string) bool { return j.present[id] },
		withText: !j.opts.NoText, machine: j.opts.Machine, prereads: j.opts.Prereads})
	if bt.err != nil {
		return bt.err
	}
	return j.apply(ctx, b.w, bt)
}

// Finish checks the forks against every conversation added, then commits
// and swaps the index in; on an error nothing is.
func (b *Build) Finish(ctx context.Context) (*Result, error) {
	if err := b.j.commit(ctx, b.w, &store.Tree{Conversations: b.convs}, nil); err != nil {
		b.discard()
		return nil, err
	}
	if err := b.publish(ctx); err != nil {
		return nil, err
	}
	res := b.j.res
	sort.Slice(res.Skipped, func(i, j int) bool { return res.Skipped[i].Path < res.Skipped[j].Path })
	return res, nil
}

// publish finishes the committed index and swaps it in; on an error it is removed.
func (b *Build) publish(ctx context.Context) error {
	if err := b.db.Finish(); err != nil {
		b.discard()
		return err
	}
	// Interrupted while the index was finished (the checkpoint and fsync
	// take a while): not swapped in either.
	err := ctx.Err()
	if err == nil {
		err = swap(b.tmp, b.j.s.IndexPath())
	}
	if err != nil {
		os.Remove(b.tmp)
	}
	return err
}

// Abort drops the index being built.
func (b *Build) Abort() {
	b.w.Rollback()
	b.discard()
}

func (b *Build) discard() {
	b.db.Close()
	os.Remove(b.tmp)
}
