package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// stagedConv is one conversation of the archive, extracted and verified.
type stagedConv struct {
	id   string
	m    *Conversation
	dir  store.ConversationDir
	info *store.ConversationInfo // keptInfo of its replay
}

// checkExportName accepts MANIFEST.json and conversations/<conversation>/<log>.
func checkExportName(name string) error {
	if err := archive.CheckStoreName(name); err != nil {
		return err
	}
	if name == archive.IndexName {
		return fmt.Errorf("outside the export layout (an export holds %s and %s/<conversation>/<log> only)",
			archive.ManifestName, store.ConversationsDirName)
	}
	return nil
}

func (imp *Staged) readerOptions() archive.ReaderOptions {
	return archive.ReaderOptions{Limits: imp.opts.Limits, CheckName: checkExportName, Archive: imp.opts.Archive}
}

// archiveErr makes a problem found in the archive a *VerifyError.
func (imp *Staged) archiveErr(err error) error {
	var ae *archive.Error
	if errors.As(err, &ae) && !errors.Is(err, context.Canceled) {
		return &VerifyError{Archive: imp.opts.Archive, Err: err}
	}
	return err
}

func (imp *Staged) verr(err error, format string, args ...any) error {
	return &VerifyError{Archive: imp.opts.Archive, Msg: fmt.Sprintf(format, args...), Err: err}
}

// extractAndVerify extracts and checks the archive before the store is looked
// at: logs are read strictly as extracted, compared with the manifest after.
func (imp *Staged) extractAndVerify(ctx context.Context, r io.Reader) (err error) {
	staged, err := store.Open(ctx, imp.stage.Tree(), store.OpenOptions{Create: store.CreateAlways})
	if err != nil {
		return err
	}
	imp.staged = staged
	checks := newLogChecks(ctx, staged, imp.opts.Jobs)
	imp.checks = checks
	if !imp.opts.DryRun { // the index is built from these reads
		checks.spool = newMsgSpool(imp.stage.Dir())
	}
	// The extraction is made durable while the manifest is checked.
	var synced chan error
	if !imp.opts.DryRun {
		synced = make(chan error, 1)
	}
	ents, err := archive.Extract(ctx, r, imp.stage.Tree(), archive.ExtractOptions{
		ReaderOptions: imp.readerOptions(),
		Sync:          !imp.opts.DryRun,
		Synced:        synced,
		Progress:      imp.opts.Progress.Add,
		SpaceName:     imp.dataDir,
		OnFile:        checks.start,
	})
	if err == nil {
		defer ents.Close()
	}
	if err == nil && synced != nil {
		defer func() {
			if serr := <-synced; serr != nil {
				err = serr
			}
		}()
	}
	checks.wait()
	if err != nil {
		return imp.archiveErr(err)
	}
	vm, mismatches, err := verifyManifest(imp.opts.Archive, imp.stage.Tree(), ents)
	if err != nil {
		return &VerifyError{Archive: imp.opts.Archive, Err: err}
	}
	if len(mismatches) > 0 {
		return imp.verr(nil, "%s: %s", mismatches[0].Path, mismatches[0].Reason)
	}
	m := vm.m
	imp.m = m
	if vm.uncommitted != "" {
		return imp.verr(nil, "%s", vm.uncommitted)
	}

	tree, err := staged.Walk()
	if err != nil {
		return err
	}
	if len(tree.Problems) > 0 {
		return imp.verr(nil, "%s", tree.Problems[0].String())
	}
	walked := map[string]store.ConversationDir{}
	for _, c := range tree.Conversations {
		walked[c.ID] = c
	}
	imp.byID = map[string]*stagedConv{}
	for i := range m.Conversations {
		mc := &m.Conversations[i]
		if imp.byID[mc.ID] != nil {
			return imp.verr(nil, "conversation %s is listed twice in the manifest", termtext.Quote(mc.ID))
		}
		dir, err := store.EncodeSegment(mc.ID)
		if err != nil || dir != mc.Dir {
			return imp.verr(err, "conversation %s: the manifest names directory %s", termtext.Quote(mc.ID), termtext.Quote(mc.Dir))
		}
		c, ok := walked[mc.ID]
		if !ok {
			return imp.verr(nil, "conversation %s is in the manifest but has no log in the archive", termtext.Quote(mc.ID))
		}
		sc := &stagedConv{id: mc.ID, m: mc, dir: c}
		for _, l := range c.Logs {
			if len(l.Generations) != 1 {
				return imp.verr(nil, "conversation %s: %d generations of log %s (an export holds the current one only)", termtext.Quote(mc.ID), len(l.Generations), l.Base)
			}
		}
		if c.ConversationLog() == nil {
			return imp.verr(nil, "conversation %s has no conversation log in the archive", termtext.Quote(mc.ID))
		}
		imp.byID[mc.ID] = sc
		imp.convs = append(imp.convs, sc)
	}
	for id := range walked {
		if imp.byID[id] == nil {
			return imp.verr(nil, "conversation %s is in the archive but not in the manifest", termtext.Quote(id))
		}
	}

	// The reads are done (checks.wait): their results are read unlocked.
	if checks.failed != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return imp.verr(checks.failed, "refused")
	}
	for _, sc := range imp.convs {
		for _, l := range sc.dir.Logs {
			name := path.Join(store.ConversationsDirName, sc.dir.Name, l.Current.String())
			if err := checks.read[name].check(name, l, vm.files[name]); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return imp.verr(err, "refused")
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	for _, sc := range imp.convs {
		lr := checks.read[path.Join(store.ConversationsDirName, sc.dir.Name, sc.dir.ConversationLog().Current.String())]
		if lr.replayErr != nil {
			return imp.verr(lr.replayErr, "conversation %s", termtext.Quote(sc.id))
		}
		info, mc := lr.info, sc.m
		switch {
		case info.Deleting:
			return imp.verr(nil, "conversation %s carries a deletion tombstone", termtext.Quote(sc.id))
		case info.Cwd != mc.Cwd:
			return imp.verr(nil, "conversation %s: the manifest says working directory %s, its log %s", termtext.Quote(sc.id), termtext.Quote(mc.Cwd), termtext.Quote(info.Cwd))
		case info.ForkedFrom != mc.ForkedFrom:
			return imp.verr(nil, "conversation %s: the manifest says fork source %s, its log %s", termtext.Quote(sc.id), termtext.Quote(mc.ForkedFrom), termtext.Quote(info.ForkedFrom))
		case !slices.Equal(store.Dependencies(info), mc.DependsOn):
			return imp.verr(nil, "conversation %s: the manifest says it depends on %s, its log on %s", termtext.Quote(sc.id), termtext.QuoteList(mc.DependsOn), termtext.QuoteList(store.Dependencies(info)))
		}
		for _, s := range info.Sessions {
			base, err := store.EncodeBase(s.ID)
			if err != nil {
				return imp.verr(err, "conversation %s: session %s", termtext.Quote(sc.id), termtext.Quote(s.ID))
			}
			if !slices.ContainsFunc(sc.dir.Logs, func(l store.Log) bool { return l.Base == base }) {
				return imp.verr(nil, "conversation %s: session %s has no log in the archive", termtext.Quote(sc.id), termtext.Quote(s.ID))
			}
		}
		sc.info = info
	}
	// Only the Prereads are kept.
	checks.pre = make(map[string]*reindex.Preread, len(checks.read))
	for name, lr := range checks.read {
		if lr.pre != nil {
			checks.pre[name] = lr.pre
		}
	}
	checks.read = nil
	return nil
}

// logChecks reads the extracted logs strictly, in parallel, as written.
type logChecks struct {
	ctx    context.Context
	staged *store.Store
	jobs   chan func() // to long-lived workers: a goroutine per log grew its stack each read
	wg     sync.WaitGroup
	mu     sync.Mutex
	read   map[string]*logRead         // by entry name
	spool  *msgSpool                   // set: message text kept for the index
	pre    map[string]*reindex.Preread // once checked
	// failed is the first failure in archive order: no log after it is read.
	failed   error
	failedAt int64
}

type logRead struct {
	events    int64
	stats     convlog.Stats
	err       error
	pre       *reindex.Preread        // a session log's, when indexing
	info      *store.ConversationInfo // a conversation log's replay
	replayErr error
}

func newLogChecks(ctx context.Context, staged *store.Store, jobs int) *logChecks {
	c := &logChecks{ctx: ctx, staged: staged, jobs: make(chan func()), read: map[string]*logRead{}}
	for range max(jobs, 1) {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			for f := range c.jobs {
				f()
			}
		}()
	}
	return c
}

// start reads the log just extracted at p (from data, when held).
func (c *logChecks) start(e archive.Extracted, p string, data []byte) {
	if !strings.HasPrefix(e.Name, store.ConversationsDirName+"/") {
		return
	}
	lr := &logRead{}
	c.mu.Lock()
	if c.failed != nil && e.Offset > c.failedAt {
		c.mu.Unlock()
		return
	}
	c.read[e.Name] = lr
	c.mu.Unlock()
	c.jobs <- func() {
		if err := c.ctx.Err(); err != nil {
			lr.err = err
			return
		}
		pre := c.readLog(lr, p, e.Name, c.spool != nil, data)
		if lr.err != nil && c.ctx.Err() == nil {
			c.mu.Lock()
			if c.failed == nil || e.Offset < c.failedAt {
				c.failed, c.failedAt = lr.err, e.Offset
			}
			c.mu.Unlock()
		}
		if pre != nil && lr.err == nil { // else it is read again for the index
			if load, err := c.spool.put(pre.Msgs); err == nil {
				pre.Msgs, pre.Load = nil, load
				lr.pre = pre
			}
		}
	}
}

func (c *logChecks) preread(name string) *reindex.Preread {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pre[name]
}

// wait ends the reads, once every start has returned.
func (c *logChecks) wait() {
	close(c.jobs)
	c.wg.Wait()
}

// check compares what the read of the log l found with its manifest entry f.
func (lr *logRead) check(name string, l store.Log, f fileCheck) error {
	if lr.err != nil {
		return lr.err
	}
	st := lr.stats
	switch {
	case st.TornTail:
		return fmt.Errorf("%s: ends in a torn tail (%d bytes after byte %d); an export holds committed prefixes only", name, st.TornBytes, st.CommittedBytes)
	case st.CommittedBytes != f.size:
		return fmt.Errorf("%s: committed length %d, but the entry has %d bytes", name, st.CommittedBytes, f.size)
	case lr.events != f.events:
		return fmt.Errorf("%s: %d events, the manifest says %d", name, lr.events, f.events)
	case f.version != l.Current.Version:
		return fmt.Errorf("%s: the manifest says format v%d", name, f.version)
	}
	return nil
}

// readLog reads the extracted log at p strictly into lr, replaying a
// conversation log (opened, for the file's time) and with index collecting
// a session log's Preread (from data when given).
func (c *logChecks) readLog(lr *logRead, p, name string, index bool, data []byte) (pre *reindex.Preread) {
	l, err := c.staged.LogAt(name)
	if err != nil {
		lr.err = err
		return nil
	}
	var x *reindex.SessionIndexer
	if index && !l.IsConversationLog {
		x = reindex.NewSessionIndexer(p, l.ID)
	}
	var r *convlog.Reader
	if data != nil && !l.IsConversationLog {
		r, err = convlog.NewReader(convlog.Bytes(data), int64(len(data)), p, l.ReaderOptions(convlog.ReaderOptions{}))
	} else {
		r, err = l.Open(convlog.ReaderOptions{})
	}
	var ie *convlog.IdentityError
	if errors.As(err, &ie) { // named as the archive names it
		err = fmt.Errorf("%s: %s", name, ie.Msg)
	}
	if err != nil {
		lr.err = err
		return nil
	}
	defer r.Close()
	var rp *store.Replayer
	if l.IsConversationLog {
		rp = l.Replayer(r)
	}
	if x != nil {
		x.Begin(r)
	}
	for e, err := range r.Events() {
		if err != nil {
			lr.err = err
			return nil
		}
		if x != nil {
			x.Add(e)
		}
		if rp != nil {
			rp.Add(e)
		}
		lr.events++
	}
	if x != nil {
		pre = x.Finish(r)
	}
	if rp != nil {
		lr.info, lr.replayErr = rp.Finish(r)
		lr.info = keptInfo(lr.info)
	}
	lr.stats = r.Stats()
	return pre
}
