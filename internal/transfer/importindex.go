package transfer

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"sync"

	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// stagedIndex builds the index of an import into an empty store in the
// staging, each conversation as soon as its logs are extracted and read,
// so the SQLite writer works beside the extraction rather than alone after
// placement; placement waits for it and links it in after the
// conversations. Anything unusual (a conversation's entries apart, a
// failed read, a deletion to finish) leaves it unbuilt: the index is then
// built after placement as before.
type stagedIndex struct {
	cancel context.CancelFunc
	done   chan struct{}
	path   string
	res    *reindex.Result
	err    error

	mu     sync.Mutex
	wake   *sync.Cond
	cur    string          // the conversation directory being extracted
	left   map[string]int  // its entries and others' extracted, not yet read
	ended  map[string]bool // no entry of it is to come
	ready  []string        // complete, for the build
	closed bool            // the extraction and its reads are over
	broken bool
}

var errNotStaged = errors.New("the index was not built in the staging")

// startIndex starts the build when the store has neither conversations
// nor an index; s is extracted into from now on.
func (imp *Staged) startIndex(ctx context.Context) {
	if imp.opts.DryRun || !emptyStore(imp.s) {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	ix := &stagedIndex{cancel: cancel, done: make(chan struct{}), left: map[string]int{}, ended: map[string]bool{}}
	ix.wake = sync.NewCond(&ix.mu)
	go func() {
		defer close(ix.done)
		ix.res, ix.err = imp.buildStaged(ctx, ix)
	}()
	imp.index = ix
}

func (imp *Staged) buildStaged(ctx context.Context, ix *stagedIndex) (*reindex.Result, error) {
	var s *store.Store
	var b *reindex.Build
	for {
		dir, ok := ix.next()
		if !ok {
			break
		}
		var err error
		if b == nil {
			// Its own handle, locked as reindex wants it, once the
			// extraction (into an empty directory) has begun.
			if s, err = store.Open(ctx, imp.stage.Tree(), store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}}); err != nil {
				return nil, err
			}
			defer s.Close()
			ix.path = s.IndexPath()
			if b, err = reindex.NewBuild(ctx, s, reindex.Options{Machine: imp.mach, Prereads: imp.prereads(s), ReportAs: imp.dataDir}); err != nil {
				return nil, err
			}
		}
		var c store.ConversationDir
		id, err := store.DecodeSegment(dir)
		if err == nil {
			c, _, err = s.WalkConversation(id)
		}
		if err == nil {
			err = b.Add(ctx, c)
		}
		if l := c.ConversationLog(); l != nil {
			if pr := imp.checks.preread(store.ConversationsDirName + "/" + dir + "/" + l.Current.String()); pr != nil {
				pr.Info = nil // taken: memory stays flat
			}
		}
		if err != nil {
			ix.stop()
			b.Abort()
			return nil, err
		}
	}
	if b == nil || ix.isBroken() {
		if b != nil {
			b.Abort()
		}
		return nil, errNotStaged
	}
	return b.Finish(ctx)
}

// convDir is the conversation directory of an entry ("": none).
func convDir(name string) string {
	rest, ok := strings.CutPrefix(name, store.ConversationsDirName+"/")
	dir, _, ok2 := strings.Cut(rest, "/")
	if !ok || !ok2 {
		return ""
	}
	return dir
}

// entry is Extract's OnEntry: the entries of a conversation come together.
func (ix *stagedIndex) entry(name string) {
	dir := convDir(name)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if dir != ix.cur {
		if ix.cur != "" {
			ix.end(ix.cur)
		}
		ix.cur = dir
		ix.broken = ix.broken || ix.ended[dir]
	}
	if dir != "" {
		ix.left[dir]++
	}
}

func (ix *stagedIndex) end(dir string) {
	ix.ended[dir] = true
	if ix.left[dir] == 0 {
		ix.ready = append(ix.ready, dir)
		ix.wake.Broadcast()
	}
}

// read records the read of an entry's log.
func (ix *stagedIndex) read(name string, lr *logRead) {
	dir := convDir(name)
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if lr.err != nil || lr.replayErr != nil || lr.info != nil && lr.info.Deleting {
		ix.broken = true
		ix.wake.Broadcast()
	}
	if ix.left[dir]--; ix.left[dir] == 0 && ix.ended[dir] {
		ix.ready = append(ix.ready, dir)
		ix.wake.Broadcast()
	}
}

// close: every log extracted was read; one left unread leaves it unbuilt.
func (ix *stagedIndex) close() {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.cur != "" {
		ix.end(ix.cur)
	}
	for _, n := range ix.left {
		ix.broken = ix.broken || n != 0
	}
	ix.closed = true
	ix.wake.Broadcast()
}

func (ix *stagedIndex) stop() {
	ix.cancel()
	ix.mu.Lock()
	ix.broken = true
	ix.wake.Broadcast()
	ix.mu.Unlock()
}

func (ix *stagedIndex) isBroken() bool {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.broken
}

// next is the next complete conversation; false once there is none to come.
func (ix *stagedIndex) next() (string, bool) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for len(ix.ready) == 0 && !ix.closed && !ix.broken {
		ix.wake.Wait()
	}
	if len(ix.ready) == 0 || ix.broken {
		return "", false
	}
	dir := ix.ready[0]
	ix.ready = ix.ready[1:]
	return dir, true
}

// emptyStore: s has no index and no conversation.
func emptyStore(s *store.Store) bool {
	if _, err := os.Lstat(s.IndexPath()); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	ents, err := os.ReadDir(s.ConversationsDir())
	return errors.Is(err, fs.ErrNotExist) || err == nil && len(ents) == 0
}

// readyIndex waits for the index built in the staging and returns it when
// it is the store's after placement: built, the store still empty, every
// conversation imported as archived (no working directory mapped).
func (imp *Staged) readyIndex() *stagedIndex {
	ix := imp.index
	if ix == nil {
		return nil
	}
	<-ix.done
	if ix.err != nil || imp.res.Counts.CwdMapped > 0 || imp.res.Counts.Imported != len(imp.res.Conversations) || !emptyStore(imp.st) {
		return nil
	}
	return ix
}

// publishIndex links the staged index into the placed store, never over a
// file; false: it was not, and the index is built as usual.
func (imp *Staged) publishIndex(ix *stagedIndex) bool {
	if err := os.Link(ix.path, imp.st.IndexPath()); err != nil {
		return false
	}
	if err := durable.SyncDir(imp.dataDir); err != nil {
		os.Remove(imp.st.IndexPath())
		return false
	}
	imp.built(ix.res)
	return true
}
