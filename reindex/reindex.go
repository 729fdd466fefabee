// Package reindex rebuilds metadata.db from the logs: every conversation is
// replayed in a bounded-parallel pass into a new database beside the old one,
// which is then swapped in atomically, so a crash leaves the old index in
// place. Update keeps it current incrementally; Check compares logs and index
// without writing. A conversation that will not open on this machine
// (store.Machine) is still indexed, with its reasons, and reported.
//
// Run needs the store held with the exclusive lock. A runtime calls
// NewKeeper once after store.Open: it brings the index up to date and keeps
// it so as the store records. List lists from the index when it is
// current, else from the logs. Accept is the one rule of which
// conversations an index holds, shared with backup verify.
package reindex

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/contract"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/progress"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// maxIndexedText bounds the searchable text kept per message (index and memory).
const maxIndexedText = 32 << 10

// maxJobs bounds the readers: more would only contend for CPUs and memory.
const maxJobs = 64

// Options tune Run and Check.
type Options struct {
	Jobs     int               // conversations read at once (default: CPUs, at most 16)
	Progress progress.Progress // counts conversations done; the total is set first
	OnEvent  func(store.Item)  // each entry reported and file removed, as it happens
	NoText   bool              // leaves message text out (no search)
	Machine  *store.Machine    // checks each conversation opens here (nil: agents and models not)
	// Incremental updates metadata.db in one transaction, keeping the rows
	// whose fingerprint matches; an unusable one is rebuilt (FullReason).
	Incremental bool
	ReportAs    string   // reported for the store's directory (a restore's staging)
	Prereads    Prereads // session logs the caller read already, not read again
}

// WillNotOpen is a conversation that will not open on this machine, and why.
type WillNotOpen struct {
	ID      string   `json:"id"`
	Reasons []string `json:"reasons"`
}

// Result is what Run did.
type Result struct {
	SchemaVersion     int          `json:"schemaVersion"`
	Index             string       `json:"index"`
	Indexed           int          `json:"indexed"`
	Skipped           []store.Item `json:"skipped"`
	DeletionsFinished []string     `json:"deletionsFinished"`
	Sessions          int          `json:"sessions"`
	Turns             int          `json:"turns"`
	Messages          int          `json:"messages"`
	// WillNotOpen are the conversations indexed that will not open here.
	WillNotOpen []WillNotOpen `json:"willNotOpen"`
	// Warnings are said once per run (agents and models not checked).
	Warnings []string `json:"warnings"`
	// FullReason is why an Incremental run rebuilt all the same. Kept, Rechecked
	// (kept with new reasons), Replayed and Removed count conversations; Indexed,
	// Sessions, Turns and Messages the whole index.
	Incremental bool   `json:"incremental"`
	FullReason  string `json:"fullReason,omitempty"`
	Kept        int    `json:"kept"`
	Rechecked   int    `json:"rechecked"`
	Replayed    int    `json:"replayed"`
	Removed     int    `json:"removed"`
	// FromPrereads counts session logs indexed from their Preread.
	FromPrereads int `json:"-"`
}

func (o *Options) defaults() {
	if o.Jobs <= 0 {
		o.Jobs = min(runtime.NumCPU(), 16)
	}
	o.Jobs = min(o.Jobs, maxJobs)
	if o.Progress == nil {
		o.Progress = progress.Nop{}
	}
	if o.OnEvent == nil {
		o.OnEvent = func(store.Item) {}
	}
}

// warnings are what a run says once about its checks.
func (o *Options) warnings() []string {
	if o.Machine.Checked() {
		return []string{}
	}
	if o.Machine == nil || o.Machine.ConfigPath == "" {
		return []string{"agents and models were not checked: no runtime configuration was given"}
	}
	return []string{store.ConfigNotCheckedWarning(o.Machine.ConfigPath)}
}

// reporter rewrites the store's directory in reports (Options.ReportAs).
type reporter struct{ from, to string }

// path is p as reported.
func (r reporter) path(p string) string {
	if r.from == "" {
		return p
	}
	if rel, err := filepath.Rel(r.from, p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
		return filepath.Join(r.to, rel)
	}
	return p
}

// text is a reason with every mention of the store's directory replaced.
func (r reporter) text(s string) string {
	if r.from == "" {
		return s
	}
	return strings.ReplaceAll(s, r.from+string(filepath.Separator), r.to+string(filepath.Separator))
}

// texts rewrites each of list in place.
func (r reporter) texts(list []string) []string {
	for i, s := range list {
		list[i] = r.text(s)
	}
	return list
}

// report hands it, its path as reported, to Options.OnEvent and returns it.
func (j *job) report(it store.Item) store.Item {
	it.Path = j.rp.path(it.Path)
	j.opts.OnEvent(it)
	return it
}

// storedReason is a skip's reason as the index records it: a file is named
// relative to its conversation directory, so the record survives a move.
func storedReason(dir string, sk *store.Item) string {
	if rel, err := filepath.Rel(dir, sk.Path); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
		return rel + ": " + sk.Reason
	}
	return sk.Reason
}

// built is one conversation read from its logs, or kept as indexed.
type built struct {
	dir          store.ConversationDir
	fingerprint  string        // taken before the logs were read
	kept         *index.Stored // the rows an incremental run keeps, with willNotOpen now
	willNotOpen  []string
	conv         *index.Conversation
	msgs         []index.Message
	fromPrereads int // session logs of conv taken from their Preread
	skip         *store.Item
	deleting     bool
	empty        bool  // nothing is left, as a delete interrupted at its end leaves
	err          error // the read was interrupted; nothing else holds
}

// Run rebuilds the index of the store s, which must hold runtime.lock
// exclusively; with Options.Incremental it updates it in place. Interrupted
// deletions are finished and never indexed.
func Run(ctx context.Context, s *store.Store, opts Options) (*Result, error) {
	opts.defaults()
	if s.Lock() == nil || s.Lock().Mode() != store.LockExclusive {
		return nil, errors.New("reindex needs the store opened with the exclusive lock")
	}
	tree, err := s.WalkJobs(opts.Jobs)
	if err != nil {
		return nil, err
	}
	var rp reporter
	if opts.ReportAs != "" {
		rp = reporter{from: s.DataDir(), to: filepath.Clean(opts.ReportAs)}
	}
	res := &Result{SchemaVersion: contract.Version, Index: rp.path(s.IndexPath()), Skipped: []store.Item{}, DeletionsFinished: []string{},
		WillNotOpen: []WillNotOpen{}, Warnings: opts.warnings()}
	j := &job{s: s, opts: opts, rp: rp, res: res}
	for _, p := range tree.Problems { // in the walk's order
		if p.Kind == store.ItemIgnored {
			j.report(p) // a stray file is not a conversation: reported, not skipped
		} else {
			p.Kind, p.Reason = store.ItemSkipped, rp.text(p.Reason)
			res.Skipped = append(res.Skipped, j.report(p))
		}
	}
	for _, p := range tree.Temps {
		if os.Remove(p) == nil {
			j.report(store.Item{Kind: store.ItemTempRemoved, Path: p, Reason: "left by an interrupted write"})
		}
	}
	for _, p := range s.TempIndexes() {
		if os.Remove(p) == nil {
			j.report(store.Item{Kind: store.ItemTempRemoved, Path: p, Reason: "left by an interrupted reindex"})
		}
	}
	if err := j.index(ctx, tree); err != nil {
		return nil, err
	}
	sort.Slice(res.Skipped, func(i, j int) bool { return res.Skipped[i].Path < res.Skipped[j].Path })
	return res, nil
}

// index updates the index in place when asked and able to, or rebuilds it.
func (j *job) index(ctx context.Context, tree *store.Tree) error {
	if j.opts.Incremental {
		j.res.Incremental = true
		db, why, err := openForUpdate(j.s)
		if err != nil {
			return err
		}
		if db != nil {
			defer db.Close()
			err := j.update(ctx, db, tree)
			if !errors.Is(err, errIndexUnusable) {
				return err
			}
			why = err.Error()
		}
		j.res.FullReason = why
	}
	return j.rebuild(ctx, tree)
}

// rebuild replays every conversation into a new database and swaps it in.
func (j *job) rebuild(ctx context.Context, tree *store.Tree) error {
	s := j.s
	tmp, err := s.NewTempIndex()
	if err != nil {
		return err
	}
	db, err := index.Create(tmp)
	if err != nil {
		os.Remove(tmp)
		return err
	}
	committed := false
	defer func() {
		if !committed {
			db.Close()
			os.Remove(tmp)
		}
	}()
	w, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	j.present = presentIn(tree)
	// Interrupted, even after the last conversation: not swapped in.
	if err := j.applyAll(ctx, w, tree, nil); err != nil {
		return err
	}
	if err := db.Finish(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		// Interrupted while the index was finished (the checkpoint and
		// fsync take a while): not swapped in either.
		return err
	}
	committed = true
	if err := swap(tmp, s.IndexPath()); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// walkSkips are the walk's skips (links, FIFOs), stray files left out.
func walkSkips(tree *store.Tree) []store.Item {
	out := []store.Item{}
	for _, p := range tree.Problems {
		if p.Kind != store.ItemIgnored {
			p.Kind = store.ItemSkipped
			out = append(out, p)
		}
	}
	return out
}

// presentIn is the set of conversations the walk found (fork sources).
func presentIn(tree *store.Tree) map[string]bool {
	present := make(map[string]bool, len(tree.Conversations))
	for _, c := range tree.Conversations {
		present[c.ID] = true
	}
	return present
}

// apply writes one conversation read: a finished deletion, a skip or rows.
func (j *job) apply(ctx context.Context, w *index.Writer, b *built) error {
	res := j.res
	switch {
	case b.deleting || b.empty:
		err := w.Remove(ctx, b.dir.ID)
		it := store.Item{Kind: store.ItemDeletionFinished, ID: b.dir.ID, Path: b.dir.Path, Reason: "finished an interrupted deletion"}
		switch {
		case err != nil:
		case b.deleting:
			err = j.s.FinishDeletion(b.dir.ID)
		default:
			it.Kind, it.Reason = store.ItemEmptyRemoved, "removed the empty directory an interrupted deletion left"
			// os.Remove refuses a directory that gained an entry since.
			if err = os.Remove(b.dir.Path); err == nil {
				err = durable.SyncDir(filepath.Dir(b.dir.Path))
			}
		}
		if err != nil {
			return err
		}
		res.DeletionsFinished = append(res.DeletionsFinished, b.dir.ID)
		j.report(it)
	case b.skip != nil:
		sk := *b.skip
		sk.Reason = j.rp.text(sk.Reason)
		res.Skipped = append(res.Skipped, j.report(sk))
		return write(ctx, w, b)
	case b.kept != nil:
		res.Kept++
		if len(b.kept.ForkSources) > 0 {
			j.forks = append(j.forks, fork{dir: b.dir, written: b.kept.WillNotOpen, kept: true, needs: needsOf(&b.kept.Conversation)})
			break
		}
		if !slices.Equal(b.kept.WillNotOpen, b.willNotOpen) {
			if err := w.SetWillNotOpen(ctx, b.dir.ID, b.willNotOpen); err != nil {
				return err
			}
			res.Rechecked++
		}
		j.willNotOpen(b.dir, b.willNotOpen)
	default:
		j.rp.texts(b.conv.WillNotOpen)
		if err := write(ctx, w, b); err != nil {
			return err
		}
		if len(b.conv.ForkSources) > 0 {
			j.forks = append(j.forks, fork{dir: b.dir, written: b.conv.WillNotOpen, needs: needsOf(b.conv)})
		} else {
			j.willNotOpen(b.dir, b.conv.WillNotOpen)
		}
		res.Indexed++
		res.Replayed++
		res.Sessions += len(b.conv.Sessions)
		res.Turns += len(b.conv.Turns)
		res.Messages += len(b.msgs)
		res.FromPrereads += b.fromPrereads
	}
	return nil
}

// write puts in w the rows a rebuild writes for b.
func write(ctx context.Context, w *index.Writer, b *built) error {
	switch {
	case b.deleting || b.empty:
		return w.Remove(ctx, b.dir.ID)
	case b.skip != nil:
		return w.Skip(ctx, b.dir.ID, b.dir.Name, b.fingerprint, storedReason(b.dir.Path, b.skip))
	}
	return w.Put(ctx, b.conv, b.msgs)
}

// willNotOpen reports an indexed conversation that will not open here.
func (j *job) willNotOpen(c store.ConversationDir, reasons []string) {
	if len(reasons) > 0 {
		j.res.WillNotOpen = append(j.res.WillNotOpen, WillNotOpen{ID: c.ID, Reasons: reasons})
		j.report(store.Item{Kind: store.ItemWillNotOpen, ID: c.ID, Path: c.Path, Reason: strings.Join(reasons, "; ")})
	}
}

// job is one run of Run.
type job struct {
	s       *store.Store
	opts    Options
	rp      reporter
	res     *Result
	present map[string]bool // the conversations the walk found
	forks   []fork          // checked once all are read (finishForks)
}

// fork is an indexed conversation with fork sources, and its row's reasons.
type fork struct {
	dir     store.ConversationDir
	needs   store.Needs
	written []string
	kept    bool // an incremental run kept its rows
}

func needsOf(c *index.Conversation) store.Needs {
	return store.Needs{Cwd: c.Cwd, Agents: c.Agents, Models: c.Models, Sources: c.ForkSources}
}

// finishForks checks the fork sources of the forks indexed once all are
// read, since a parallel reader could not know of a source whose deletion the
// run finished; changed rows are updated.
func (j *job) finishForks(ctx context.Context, w *index.Writer, tree *store.Tree) error {
	if len(j.forks) == 0 {
		return nil
	}
	present := maps.Clone(j.present)
	for _, id := range j.res.DeletionsFinished {
		delete(present, id)
	}
	for _, f := range j.forks {
		reasons := j.rp.texts(j.opts.Machine.Check(f.needs, func(id string) bool { return present[id] }))
		if !slices.Equal(reasons, f.written) {
			if err := w.SetWillNotOpen(ctx, f.dir.ID, reasons); err != nil {
				return err
			}
			if f.kept {
				j.res.Rechecked++
			}
		}
		j.willNotOpen(f.dir, reasons)
	}
	// Back in directory order.
	pos := make(map[string]int, len(tree.Conversations))
	for i, c := range tree.Conversations {
		pos[c.ID] = i
	}
	list := j.res.WillNotOpen
	sort.SliceStable(list, func(a, b int) bool { return pos[list[a].ID] < pos[list[b].ID] })
	return nil
}

// errIndexUnusable is wrapped by update when the index is rebuilt instead.
var errIndexUnusable = errors.New("metadata.db cannot be updated in place")

// openForUpdate opens metadata.db for an incremental run, or says why not.
func openForUpdate(s *store.Store) (*index.DB, string, error) {
	db, err := index.Open(s.IndexPath())
	var ve *index.VersionError
	switch {
	case err == nil:
		return db, "", nil
	case index.IsLocked(err):
		return nil, "", err
	case errors.Is(err, fs.ErrNotExist):
		return nil, "metadata.db does not exist", nil
	case errors.As(err, &ve) && ve.Older():
		return nil, fmt.Sprintf("metadata.db was written by an older convkit (schema version %d; this one writes %d)", ve.Found, ve.Want), nil
	}
	return nil, fmt.Sprintf("metadata.db is not usable: %v", err), nil
}

// update brings db up to date in one transaction: a conversation whose
// fingerprint matches keeps its rows (only its will-not-open reasons are
// checked again), others are replayed, and those gone are removed.
func (j *job) update(ctx context.Context, db *index.DB, tree *store.Tree) error {
	opts, rp, res := j.opts, j.rp, j.res
	stored, err := db.Stored(ctx)
	if index.IsLocked(err) {
		return fmt.Errorf("%s: %w (%v)", db.Path(), index.ErrLocked, err)
	}
	if err != nil {
		return fmt.Errorf("%w: reading it: %v", errIndexUnusable, err)
	}
	w, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	present := presentIn(tree)
	j.present = present
	for id := range stored {
		if !present[id] {
			if err := w.Remove(ctx, id); err != nil {
				w.Rollback()
				return err
			}
			res.Removed++
		}
	}
	keep := func(c store.ConversationDir, fp string) *built {
		st, ok := stored[c.ID]
		// A skipped conversation is read again: the reason may lie outside
		// its logs.
		if !ok || st.Skipped || fp != st.Fingerprint {
			return nil
		}
		reasons := rp.texts(opts.Machine.Check(needsOf(&st.Conversation), func(id string) bool { return present[id] }))
		return &built{dir: c, fingerprint: fp, kept: st, willNotOpen: reasons}
	}
	if err := j.applyAll(ctx, w, tree, keep); err != nil {
		return err
	}
	t, err := db.Totals(ctx)
	if err != nil {
		return err
	}
	res.Indexed, res.Sessions, res.Turns, res.Messages = t.Conversations, t.Sessions, t.Turns, t.Messages
	return nil
}

// applyAll reads tree into w (keep: the rows that stay) and commits, or rolls back.
func (j *job) applyAll(ctx context.Context, w *index.Writer, tree *store.Tree, keep keeper) error {
	opts := j.opts
	opts.Progress.SetTotal(int64(len(tree.Conversations)))
	err := build(ctx, tree.Conversations, j.present, opts, keep, func(b *built) error {
		defer opts.Progress.Add(1)
		return j.apply(ctx, w, b)
	})
	if err == nil {
		err = j.finishForks(ctx, w, tree)
	}
	if err = interrupted(ctx, err); err != nil {
		w.Rollback()
		return err
	}
	return w.Commit()
}

// interrupted is ctx's error once ctx is done, else err.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// swap removes the old index's WAL files, then renames the new one over it.
func swap(tmp, final string) error {
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(final + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(final))
}

// keeper settles a conversation from its fingerprint fp unread: what it keeps, or nil.
type keeper func(c store.ConversationDir, fp string) *built

// build reads conversations, at most jobs at once, and hands each to sink in
// the order of convs; keep (when not nil) settles some without reading. The
// readers run ahead of the writer within aheadPerJob and aheadBytes, large
// conversations early (readOrder), but the one it waits for always first.
func build(ctx context.Context, convs []store.ConversationDir, present map[string]bool, opts Options,
	keep keeper, sink func(*built) error) error {
	ctx, cancel := context.WithCancel(ctx)
	fps, ids, sizes, kept := fingerprints(ctx, convs, min(opts.Jobs, len(convs)), keep)
	// toRead: the conversations keep did not settle, in the writer's order.
	toRead := make([]int, 0, len(convs))
	for i := range convs {
		if kept[i] == nil {
			toRead = append(toRead, i)
		}
	}
	readSizes := make([]int64, len(toRead))
	for k, i := range toRead {
		readSizes[k] = sizes[i]
	}
	// Never more readers than conversations to read.
	jobs := min(opts.Jobs, len(toRead))
	q := newReadQueue(readOrder(readSizes, jobs), jobs*aheadPerJob, aheadBytes)
	results := make([]chan *built, len(toRead))
	for k := range results {
		results[k] = make(chan *built, 1)
	}
	var wg sync.WaitGroup
	for range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k, ok := q.take()
				if !ok {
					return
				}
				i := toRead[k]
				b := readConversationWith(ctx, convs[i], readEnv{present: func(id string) bool { return present[id] },
					withText: !opts.NoText, machine: opts.Machine, prereads: opts.Prereads, fingerprint: fps[i], logID: ids[i]})
				q.read(b.textBytes())
				results[k] <- b
			}
		}()
	}
	defer func() {
		cancel()
		q.stop()
		wg.Wait()
	}()
	k := 0
	for i := range convs {
		var b *built
		if kept[i] != nil {
			if err := ctx.Err(); err != nil {
				return err
			}
			b, kept[i] = kept[i], nil
		} else {
			select {
			case b = <-results[k]:
			case <-ctx.Done():
				return ctx.Err()
			}
			results[k] = nil
			if b.err != nil {
				return b.err
			}
			q.written(k, b.textBytes())
			k++
		}
		if err := sink(b); err != nil {
			return err
		}
	}
	return nil
}

// readQueue hands readers conversations in read order within bounds on what
// is read and not yet written; the one the writer takes next is handed out
// first, whatever the bounds, so they never stop the run.
type readQueue struct {
	mu       sync.Mutex
	room     *sync.Cond
	order    []int
	taken    []bool
	at       int // order[at:] are the reads left, some taken already
	want     int // the conversation the writer takes next
	pending  int // taken, not yet written
	held     int64
	maxTaken int
	maxHeld  int64
	stopped  bool
}

func newReadQueue(order []int, maxTaken int, maxHeld int64) *readQueue {
	q := &readQueue{order: order, taken: make([]bool, len(order)), maxTaken: maxTaken, maxHeld: maxHeld}
	q.room = sync.NewCond(&q.mu)
	return q
}

func (q *readQueue) full() bool { return q.pending >= q.maxTaken || q.held >= q.maxHeld }

// take is the next conversation to read; ok false: none left, or stopped.
func (q *readQueue) take() (i int, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for !q.stopped {
		if q.want < len(q.taken) && !q.taken[q.want] {
			i = q.want
		} else {
			for q.at < len(q.order) && q.taken[q.order[q.at]] {
				q.at++
			}
			if q.at == len(q.order) {
				q.room.Broadcast() // none left for the readers waiting either
				return 0, false
			}
			if q.full() {
				q.room.Wait()
				continue
			}
			i = q.order[q.at]
		}
		q.taken[i] = true
		q.pending++
		if !q.full() {
			q.room.Signal() // room for another reader waiting
		}
		return i, true
	}
	return 0, false
}

// read counts the message text of a conversation read.
func (q *readQueue) read(text int64) {
	q.mu.Lock()
	q.held += text
	q.mu.Unlock()
}

// written records that the writer took conversation i, which held text.
func (q *readQueue) written(i int, text int64) {
	q.mu.Lock()
	q.pending--
	q.held -= text
	q.want = i + 1
	q.room.Signal()
	q.mu.Unlock()
}

// stop makes take return false from now on.
func (q *readQueue) stop() {
	q.mu.Lock()
	q.stopped = true
	q.room.Broadcast()
	q.mu.Unlock()
}

// fingerprints are convs' fingerprints, log identities, log sizes and what keep settles.
func fingerprints(ctx context.Context, convs []store.ConversationDir, jobs int, keep keeper) ([]string, []string, []int64, []*built) {
	fps, ids, sizes, kept := make([]string, len(convs)), make([]string, len(convs)), make([]int64, len(convs)), make([]*built, len(convs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range max(jobs, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				n := int(next.Add(1)) - 1
				if n >= len(convs) {
					return
				}
				fps[n], ids[n], sizes[n] = dirFingerprintSize(convs[n])
				if keep != nil {
					kept[n] = keep(convs[n], fps[n])
				}
			}
		}()
	}
	wg.Wait()
	return fps, ids, sizes, kept
}

// readOrder is the writer's order with each conversation moved ahead by
// jobs times its size, so a large one is read by the time it is needed.
func readOrder(sizes []int64, jobs int) []int {
	order := make([]int, len(sizes))
	for i := range order {
		order[i] = i
	}
	if jobs < 2 {
		return order
	}
	keys := make([]int64, len(sizes))
	var at int64
	for i, n := range sizes {
		keys[i] = at - int64(jobs)*n
		at += n
	}
	sort.SliceStable(order, func(a, b int) bool { return keys[order[a]] < keys[order[b]] })
	return order
}

// aheadPerJob and aheadBytes bound what readers hold for the writer.
const (
	aheadPerJob = 16
	aheadBytes  = 64 << 20
)

// textBytes is the message text b holds.
func (b *built) textBytes() int64 {
	var n int64
	for _, m := range b.msgs {
		n += int64(len(m.Text))
	}
	return n
}

// readEnv is what reading a conversation needs besides its directory.
type readEnv struct {
	present     func(string) bool // whether a fork source is in the store
	withText    bool              // keep the message text (search)
	machine     *store.Machine
	prereads    Prereads
	fingerprint string // the conversation's, when taken already
	logID       string // its conversation log's identity, taken with fingerprint
}

// readConversationWith is readConversation that stops when ctx is done.
func readConversationWith(ctx context.Context, c store.ConversationDir, env readEnv) *built {
	// Taken before the logs are read (see dirFingerprint).
	b, logID := &built{dir: c, fingerprint: env.fingerprint}, env.logID
	if b.fingerprint == "" {
		b.fingerprint, logID, _ = dirFingerprintSize(c)
	}
	f, info := foundConversation(c)
	// decided is b once Accept decides against indexing what was found.
	decided := func() (*built, bool) {
		switch v := Accept(f); v.Kind {
		case store.ItemDeleted:
			b.empty, b.deleting = f.Empty, !f.Empty
		case store.ItemSkipped:
			v.ID = c.ID
			b.skip = &v
		default:
			return nil, false
		}
		return b, true
	}
	if b, ok := decided(); ok {
		return b
	}
	// A fork whose source is missing is indexed, as one whose working
	// directory is missing: its logs read, it will not open here.
	conv := rowOf(c, info, b.fingerprint, logID, info.Turns, env.machine.Check(store.NeedsOf(info), env.present))
	for _, l := range c.SessionLogs() {
		sess := sessionRow(info, l.ID, l.Path, l.Current.Version)
		if pr, msgs, ok := env.preread(l.Path); ok {
			if sess.ParentSession == "" {
				sess.ParentSession = pr.Parent
			}
			sess.Events, sess.Bytes = pr.Events, pr.Bytes
			conv.Sessions = append(conv.Sessions, sess)
			b.msgs = append(b.msgs, msgs...)
			b.fromPrereads++
			continue
		}
		msgs, st, h, err := readSession(ctx, l, env.withText)
		if err != nil && ctx.Err() != nil {
			b.err = ctx.Err()
			return b
		}
		if err != nil {
			f.Sessions = append(f.Sessions, LogFound{Path: l.Path, Err: err})
			b, _ := decided()
			return b
		}
		if sess.ParentSession == "" {
			sess.ParentSession = h.ParentSession
		}
		sess.Events, sess.Bytes = st.Events, st.FileBytes
		conv.Sessions = append(conv.Sessions, sess)
		b.msgs = append(b.msgs, msgs...)
	}
	b.conv = conv
	return b
}

// foundConversation is what c's conversation log gives Accept, and its replay.
func foundConversation(c store.ConversationDir) (Found, *store.ConversationInfo) {
	f := Found{Dir: c.Path}
	l := c.ConversationLog()
	if l == nil {
		ents, err := os.ReadDir(c.Path)
		f.Empty = err == nil && len(ents) == 0
		return f, nil
	}
	f.ConversationLog = l.Path
	info, err := l.ReadConversation()
	f.ConversationErr = err
	f.Deleting = err == nil && info.Deleting
	return f, info
}

// rowOf is the index row of conversation c but its sessions.
func rowOf(c store.ConversationDir, info *store.ConversationInfo, fingerprint, logID string, turns []store.TurnInfo, willNotOpen []string) *index.Conversation {
	conv := &index.Conversation{
		ID: info.ID, Dir: c.Name, Title: info.Title, TitleIsAuto: info.TitleIsAuto, Cwd: info.Cwd,
		CreatedAt: info.CreatedAt.UnixMilli(), UpdatedAt: info.UpdatedAt.UnixMilli(), Archived: info.Archived,
		ForkedFrom: info.ForkedFrom, AfterCompaction: info.AfterCompaction, Agents: info.Agents, Models: info.Models,
		RunningTurn: info.RunningTurn, ForkSources: store.Dependencies(info), Fingerprint: fingerprint,
		LogIdentity: logID, WillNotOpen: willNotOpen,
	}
	for _, t := range turns {
		tr := index.Turn{SessionID: t.SessionID, Turn: t.Turn, StartedAt: t.StartedAt.UnixMilli(), Outcome: t.Outcome}
		if !t.EndedAt.IsZero() {
			tr.EndedAt = t.EndedAt.UnixMilli()
		}
		conv.Turns = append(conv.Turns, tr)
	}
	return conv
}

// sessionRow is the row of session id's log at path but its counts.
func sessionRow(info *store.ConversationInfo, id, path string, version int) index.Session {
	sess := index.Session{ID: id, File: filepath.Base(path), FormatVersion: version}
	if si := info.Session(id); si != nil {
		sess.Agent, sess.Model, sess.ParentSession = si.Agent, si.Model, si.ParentSession
	}
	return sess
}

// readSession reads one session log to its end: its stats and messages.
func readSession(ctx context.Context, l store.Log, withText bool) ([]index.Message, convlog.Stats, *convlog.Header, error) {
	sessionID := l.ID
	r, err := l.Open(convlog.ReaderOptions{})
	if err != nil {
		return nil, convlog.Stats{}, nil, err
	}
	defer r.Close()
	var msgs []index.Message
	// The admission inspect --validate and the writer apply: a log it
	// refuses is not indexed.
	err = convlog.Admit(ctx, r, r.Header(), convlog.AdmitOptions{Each: func(e *convlog.Event, rules *convlog.Validator) error {
		if withText {
			if m, ok := indexedMessage(e, rules.Message(), sessionID); ok {
				msgs = append(msgs, m)
			}
		}
		return nil
	}})
	if err != nil {
		return nil, convlog.Stats{}, nil, err
	}
	return msgs, r.Stats(), r.Header(), nil
}

// indexedMessage is what the index keeps of event e, whose stored message is
// raw: the text of a user or assistant message, clipped to maxIndexedText.
func indexedMessage(e *convlog.Event, raw []byte, sessionID string) (m index.Message, ok bool) {
	if e.Type != convlog.TypeUserMessage && e.Type != convlog.TypeAssistantMessage || raw == nil {
		return m, false
	}
	role, text := convlog.EventMessageText(e, raw)
	if text == "" {
		return m, false
	}
	return index.Message{SessionID: sessionID, Seq: e.Seq, Role: role, Text: clip(text, maxIndexedText)}, true
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Found is what a read of one conversation's current logs found.
type Found struct {
	Dir   string
	Empty bool // the directory holds nothing at all
	// ConversationLog is the current conversation log ("": none).
	ConversationLog string
	ConversationErr error // why it could not be replayed
	Deleting        bool  // the replay found the tombstone of a delete
	// Sessions are the session logs in order with their read's error; a reader may stop at the first.
	Sessions []LogFound
}

// LogFound is one session log's read.
type LogFound struct {
	Path string
	Err  error
}

// Accept decides what a rebuilt index does with a conversation from what a
// read of its logs found: Run, Update, Check and backup's drill all use it.
// Its Kind is store.ItemIndexed, ItemDeleted or ItemSkipped (which file,
// Path, and why).
func Accept(f Found) store.Item {
	switch {
	case f.ConversationLog == "" && f.Empty:
		return store.Item{Kind: store.ItemDeleted}
	case f.ConversationLog == "":
		return store.Item{Kind: store.ItemSkipped, Path: f.Dir, Reason: "no conversation log (metadata[.vN].jsonl[.zst]): an incomplete create, or not a conversation"}
	case f.ConversationErr != nil:
		return store.Item{Kind: store.ItemSkipped, Path: f.ConversationLog, Reason: logReason("unreadable conversation log", f.ConversationLog, f.ConversationErr)}
	case f.Deleting:
		return store.Item{Kind: store.ItemDeleted}
	}
	for _, s := range f.Sessions {
		if s.Err == nil {
			continue
		}
		what := "unreadable session log"
		if errors.Is(s.Err, convlog.ErrUnsupported) {
			what = "session log this build cannot read"
		}
		return store.Item{Kind: store.ItemSkipped, Path: s.Path, Reason: logReason(what, s.Path, s.Err)}
	}
	return store.Item{Kind: store.ItemIndexed}
}

// logReason is why the log at path is refused.
func logReason(what, path string, err error) string {
	var ie *convlog.IdentityError
	if errors.As(err, &ie) {
		return ie.Msg
	}
	return what + ": " + termtext.Reason(path, err)
}
