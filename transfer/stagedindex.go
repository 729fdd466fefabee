package transfer

import (
	"container/heap"
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// An import into a store without conversations and without metadata.db
// builds the index reindex would build on the store once the archive is
// placed (reindex.Run). Built after the placement, it ran alone on one
// core for a third of the import's time; so the rows are written while
// the archive is still being extracted and its logs read (a
// reindex.Staged in the staging directory, outside the tree), one
// conversation at a time as soon as its logs are extracted and read, in
// the order the store's walk lists them. Once the conversations are
// placed, reindex.Staged.Publish checks that the store's walk lists
// exactly them with the fingerprints they had in staging (a directory
// rename keeps every log's stat identity) and swaps the database in as
// reindex does. Whatever it cannot stand for (a conversation mapped to
// another working directory, which appends to its log; an archive whose
// conversations come too far out of order; a store that was not empty
// under the lock) is found there, and the index is then built as before.

// stagedReorder is how many conversations the staged index holds back
// before writing the first of them by name: an archive lists them by id
// (the store's walk lists them by directory name, which sorts the same
// way) but for fork ancestors, which come before their forks. One that
// comes after a conversation already written leaves the staged index
// unused.
const stagedReorder = 16

// stagedIndex builds the staged index beside the extraction.
type stagedIndex struct {
	ctx    context.Context
	checks *logChecks
	// convDir is the staging tree's conversations/.
	convDir string
	ix      *reindex.Staged

	mu   sync.Mutex
	cond *sync.Cond
	// queue are the conversation directories whose entries have all been
	// named, in archive order, with their entry names.
	queue []namedDir
	ended bool // the extraction ended: no more directories
	// cur is the directory whose entries are being named; seen those
	// named so far.
	cur  namedDir
	seen map[string]bool
	// lost: the archive named a directory's entries apart.
	lost bool

	done chan struct{}
	err  error // the builder's, once done
}

type namedDir struct {
	dir   string
	names []string
}

// mayStageIndex reports whether an import into dataDir may build its
// index in staging: no metadata.db, no conversation. It is checked again,
// under the lock, when the index is published.
func mayStageIndex(dataDir string) bool {
	if _, err := os.Lstat(store.IndexPath(dataDir)); !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	ents, err := os.ReadDir(filepath.Join(dataDir, store.ConversationsDirName))
	return errors.Is(err, fs.ErrNotExist) || err == nil && len(ents) == 0
}

// startStagedIndex starts the builder; nil when the database cannot be
// made (the index is then built after the placement).
func startStagedIndex(ctx context.Context, dbPath, tree string, checks *logChecks, opts reindex.Options) *stagedIndex {
	si := &stagedIndex{ctx: ctx, checks: checks, convDir: filepath.Join(tree, store.ConversationsDirName),
		seen: map[string]bool{}, done: make(chan struct{})}
	si.cond = sync.NewCond(&si.mu)
	opts.Prereads = func(p string) *reindex.Preread {
		rel, err := filepath.Rel(tree, p)
		if err != nil {
			return nil
		}
		return checks.readPreread(filepath.ToSlash(rel))
	}
	opts.ConversationPrereads = func(p string) *reindex.ConversationPreread {
		rel, err := filepath.Rel(tree, p)
		if err != nil {
			return nil
		}
		return checks.takeConversation(filepath.ToSlash(rel))
	}
	checks.keepConv = true
	ix, err := reindex.NewStaged(ctx, dbPath, opts)
	if err != nil {
		checks.keepConv = false
		return nil
	}
	si.ix = ix
	go si.build()
	return si
}

// onEntry follows the archive's entries as they are named (the
// extraction's reading goroutine).
func (si *stagedIndex) onEntry(name string) {
	dir, nested := "", false
	if rest, ok := strings.CutPrefix(name, store.ConversationsDirName+"/"); ok {
		if d, file, ok := strings.Cut(rest, "/"); ok {
			dir, nested = d, strings.Contains(file, "/")
		}
	}
	si.mu.Lock()
	defer si.mu.Unlock()
	if nested {
		// Not an export's layout (the staged index takes a conversation's
		// files from their names).
		si.lost = true
	}
	if dir == si.cur.dir {
		if dir != "" {
			si.cur.names = append(si.cur.names, name)
		}
		return
	}
	si.closeDir()
	if dir == "" {
		return
	}
	if si.seen[dir] {
		si.lost = true
	}
	si.seen[dir] = true
	si.cur = namedDir{dir: dir, names: []string{name}}
}

// closeDir queues the directory being named. si.mu is held.
func (si *stagedIndex) closeDir() {
	if si.cur.dir != "" {
		si.queue = append(si.queue, si.cur)
		si.cond.Broadcast()
	}
	si.cur = namedDir{}
}

// ended says the extraction ended, whole (ok) or not.
func (si *stagedIndex) extractionEnded(ok bool) {
	si.mu.Lock()
	if ok {
		si.closeDir()
	} else {
		si.lost = true
	}
	si.ended = true
	si.cond.Broadcast()
	si.mu.Unlock()
}

// next is the next directory named whole; ok false once there is none
// left (or the staged index cannot be used).
func (si *stagedIndex) next() (namedDir, bool) {
	si.mu.Lock()
	defer si.mu.Unlock()
	for len(si.queue) == 0 && !si.ended && !si.lost {
		si.cond.Wait()
	}
	if si.lost || len(si.queue) == 0 {
		return namedDir{}, false
	}
	d := si.queue[0]
	si.queue = si.queue[1:]
	return d, true
}

var errStagedLost = errors.New("the archive's conversations came out of order")

// build writes the conversations as they are extracted and read, by name
// with stagedReorder of them held back.
func (si *stagedIndex) build() {
	defer close(si.done)
	var held dirHeap
	files := map[string][]string{}
	add := func(d string) error {
		// The directory holds what the archive named in it (reindex's
		// Publish walks the store as placed).
		c, ok := store.ConversationDirOf(filepath.Join(si.convDir, d), files[d])
		delete(files, d)
		if !ok {
			return reindex.ErrNotStaged
		}
		return si.ix.Add(si.ctx, c)
	}
	for {
		d, ok := si.next()
		if !ok {
			break
		}
		// Every log of the directory read (as the index will take it from
		// its read), else it is not indexed here.
		for _, name := range d.names {
			if !si.checks.awaitRead(name) {
				si.err = errStagedLost
				return
			}
		}
		for _, name := range d.names {
			files[d.dir] = append(files[d.dir], path.Base(name))
		}
		heap.Push(&held, d.dir)
		for held.Len() > stagedReorder {
			if si.err = add(heap.Pop(&held).(string)); si.err != nil {
				return
			}
		}
	}
	si.mu.Lock()
	lost := si.lost
	si.mu.Unlock()
	if lost {
		si.err = errStagedLost
		return
	}
	for held.Len() > 0 {
		if si.err = add(heap.Pop(&held).(string)); si.err != nil {
			return
		}
	}
}

// wait waits for the builder; the staged index is usable when it returns
// nil.
func (si *stagedIndex) wait() error {
	<-si.done
	return si.err
}

// abandon stops using the staged index and removes it.
func (si *stagedIndex) abandon() {
	si.mu.Lock()
	si.lost = true
	si.cond.Broadcast()
	si.mu.Unlock()
	<-si.done
	si.ix.Abandon()
}

type dirHeap []string

func (h dirHeap) Len() int           { return len(h) }
func (h dirHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h dirHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dirHeap) Push(x any)        { *h = append(*h, x.(string)) }
func (h *dirHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
