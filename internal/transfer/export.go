package transfer

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/progress"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// ExportOptions configure Export.
type ExportOptions struct {
	IDs         []string         // their fork ancestors are added
	Now         func() time.Time // default time.Now
	ToolVersion string
	Progress    progress.Progress // conversations exported
	// OnEvent receives each problem, entry not exported and killed export's temporary file.
	OnEvent func(store.Item)
	Archive archive.WriterOptions // tests tune the container
}

func (o *ExportOptions) defaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Progress == nil {
		o.Progress = progress.Nop{}
	}
	if o.OnEvent == nil {
		o.OnEvent = func(store.Item) {}
	}
}

// ExportResult is what an export wrote.
type ExportResult struct {
	Manifest *Manifest
	Archive  string   // the published file's path, or "-"
	Added    []string // fork ancestors exported without being requested
	Bytes    int64    // written
}

// Partial reports whether something asked for is not in the archive (exit 3).
func (r *ExportResult) Partial() bool { return len(r.Manifest.Problems) > 0 }

// ErrNotFound: a requested conversation does not exist (or is being deleted).
var ErrNotFound = store.ErrNoConversation

// Export writes to w an archive of opts.IDs and their fork ancestors without
// locking s: each current log's committed prefix, checked from one open
// file. A conversation with an unreadable log or a missing ancestor is left
// out (Problems); a requested one that does not exist is ErrNotFound.
func Export(ctx context.Context, s *store.Store, w io.Writer, opts ExportOptions) (*ExportResult, error) {
	x, err := newExporter(ctx, s, opts)
	if err != nil {
		return nil, err
	}
	res, err := x.write(ctx, w)
	if err != nil {
		return nil, err
	}
	res.Archive = "-"
	return res, nil
}

// ExportToFile is Export into a new file at path, published only when
// complete; an existing path is refused before anything is read.
func ExportToFile(ctx context.Context, s *store.Store, path string, opts ExportOptions) (*ExportResult, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	opts.defaults()
	removeStaleTemps(abs, opts.OnEvent)
	if _, err := os.Lstat(abs); err == nil {
		return nil, fmt.Errorf("%s: %w: export never overwrites a file", abs, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	x, err := newExporter(ctx, s, opts)
	if err != nil {
		return nil, err
	}
	tmp, err := archive.CreateTemp(abs)
	if err != nil {
		return nil, err
	}
	defer tmp.Discard() // nothing once published
	wb := durable.NewWriteback(tmp.File, archive.WritebackBytes)
	defer wb.Close()
	bw := bufio.NewWriterSize(wb, 1<<20)
	res, err := x.write(ctx, bw)
	if err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	wb.Close()
	if err := ctx.Err(); err != nil {
		return nil, err // interrupted: not published
	}
	if err := tmp.Publish(abs); err != nil {
		return nil, err
	}
	res.Archive = abs
	return res, nil
}

func removeStaleTemps(path string, onEvent func(store.Item)) {
	for _, s := range archive.SweepTemps(filepath.Dir(path), func(f string) bool { return f == filepath.Base(path) }) {
		ev := store.Item{Kind: store.ItemTempRemoved, Path: s.Path, Reason: "left by an interrupted export"}
		if s.Err != nil {
			ev.Kind, ev.Reason = store.ItemTempKept, ev.Reason+", not removed: "+s.Err.Error()
		}
		onEvent(ev)
	}
}

type exporter struct {
	s     *store.Store
	opts  ExportOptions
	m     *Manifest
	order []*planned
	// vouched is metadata.db's rows of the requested conversations, loaded
	// while the plan reads.
	vouched func() reindex.Vouched
}

// planned is a conversation the export will try, with what the plan read of it.
type planned struct {
	id         string
	requested  bool
	ancestorOf []string
	plan       *planLog
	listing    *planDir
}

type planDir struct {
	cd    store.ConversationDir
	probs []store.Item
}

func newExporter(ctx context.Context, s *store.Store, opts ExportOptions) (*exporter, error) {
	opts.defaults()
	if len(opts.IDs) == 0 {
		return nil, errors.New("export needs at least one conversation id")
	}
	m := &Manifest{ManifestHeader: manifestFormat.Header(opts.ToolVersion, opts.Now()),
		Requested: []string{}, Conversations: []Conversation{}, Files: []File{}, Problems: []store.Item{}}
	st, err := s.LockStatus()
	if err != nil {
		return nil, err
	}
	m.Online, m.Holder = st.Held, nil
	if st.Held {
		m.Holder = st.Holder
	}
	x := &exporter{s: s, opts: opts, m: m}
	x.vouched = sync.OnceValue(func() reindex.Vouched { return reindex.LoadVouched(ctx, s, opts.IDs) })
	go x.vouched()
	if err := x.plan(ctx); err != nil {
		return nil, err
	}
	return x, nil
}

func (x *exporter) problem(id, p, reason string) {
	it := store.Item{Kind: store.ItemUnreadable, ID: id, Path: p, Reason: reason}
	x.m.Problems = append(x.m.Problems, it)
	x.opts.OnEvent(it)
}

// plan finds the fork ancestors of the requested ids: a missing requested
// one is an error, a missing ancestor a problem.
func (x *exporter) plan(ctx context.Context) error {
	byID := map[string]*planned{}
	deps := map[string][]string{}
	missing := map[string]bool{}
	infos, err := x.readInfos(ctx, nil, x.opts.IDs)
	if err != nil {
		return err
	}
	// The requested ids, then their ancestors, transitively.
	queue := slices.Clone(x.opts.IDs)
	for i := 0; i < len(queue); i++ {
		id, requested := queue[i], i < len(x.opts.IDs)
		if _, err := store.EncodeSegment(id); err != nil && requested {
			return fmt.Errorf("conversation id %s: %w", termtext.Quote(id), err)
		}
		if byID[id] != nil || missing[id] {
			continue
		}
		if _, ok := infos[id]; !ok { // the ancestors found so far, together
			if infos, err = x.readInfos(ctx, infos, queue[i:]); err != nil {
				return err
			}
		}
		r := infos[id]
		info, err := r.info, r.err
		gone := errors.Is(err, store.ErrNoConversation) || err == nil && info.Deleting
		switch {
		case requested && errors.Is(err, store.ErrConversationsDir): // the store is broken
			return err
		case requested && err == nil && info.Deleting:
			return fmt.Errorf("conversation %s: %w (it is being deleted)", termtext.Quote(id), ErrNotFound)
		case requested && gone:
			return fmt.Errorf("conversation %s: %w", termtext.Quote(id), ErrNotFound)
		case gone:
			missing[id] = true
			continue
		}
		if requested {
			x.m.Requested = append(x.m.Requested, id)
		}
		byID[id] = &planned{id: id, requested: requested, plan: r.plan, listing: r.listing}
		if err == nil { // else reported when the conversation is exported
			deps[id] = store.Dependencies(info)
			queue = append(queue, deps[id]...)
		}
	}
	// Who each ancestor is exported for, directly or not.
	for _, id := range x.m.Requested {
		depthFirst(deps, id, map[string]bool{}, func(d string) {
			if p := byID[d]; p != nil && !p.requested {
				p.ancestorOf = append(p.ancestorOf, id)
			}
		})
	}
	for _, id := range slices.Sorted(maps.Keys(missing)) {
		var users []string
		for c, ds := range deps {
			if slices.Contains(ds, id) {
				users = append(users, c)
			}
		}
		sort.Strings(users)
		p, _ := x.s.ConversationPath(id)
		x.problem(id, p, fmt.Sprintf("fork ancestor %s of %s is missing from the store: not exported", termtext.Quote(id), termtext.QuoteList(users)))
	}
	// Ancestors first (depth first, by id): an import placing them in this
	// order never has a fork without its source.
	done := map[string]bool{}
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		depthFirst(deps, id, done, func(d string) {
			if p := byID[d]; p != nil {
				x.order = append(x.order, p)
			}
		})
	}
	return nil
}

// depthFirst hands post each id reachable from id through deps and not yet
// seen, ancestors first.
func depthFirst(deps map[string][]string, id string, seen map[string]bool, post func(string)) {
	if seen[id] {
		return
	}
	seen[id] = true
	for _, d := range deps[id] {
		depthFirst(deps, d, seen, post)
	}
	post(id)
}

// readInfo is a conversation read for the plan, and what the export reuses.
type readInfo struct {
	id      string
	info    *store.ConversationInfo
	err     error
	plan    *planLog
	listing *planDir
}

// planLog is the plan's strict read of a small conversation log, reused for the same bytes.
type planLog struct {
	path string
	size int64
	sum  [sha256.Size]byte
	read archive.LogRead // Info kept without its turns
}

// readPlan reads conversation id's log as the export does.
func (x *exporter) readPlan(id string) readInfo {
	r := readInfo{id: id}
	cd, probs, err := x.s.WalkConversation(id)
	if conv := cd.ConversationLog(); err == nil && conv != nil {
		for i := range cd.Logs { // only the current generation is read
			cd.Logs[i].Generations = nil
		}
		r.listing = &planDir{cd: cd, probs: probs}
		ol := &openLog{log: *conv}
		err = ol.open()
		size := int64(len(ol.buf))
		ol.release()
		if err == nil {
			ol.read.Info = keptInfo(ol.read.Info)
			r.info, r.err = ol.read.Info, ol.read.InfoErr
			if ol.small && ol.leftOut == 0 {
				r.plan = &planLog{path: conv.Path, size: size, sum: ol.sum, read: ol.read}
			}
			return r
		}
	}
	r.info, r.err = x.s.ReadConversation(id)
	return r
}

// keptInfo is what export and import read of a replay, held for every
// conversation: not its turns, fork data, nor its sessions but their ids.
func keptInfo(info *store.ConversationInfo) *store.ConversationInfo {
	if info == nil {
		return nil
	}
	c := *info
	c.Turns, c.Fork, c.Rewind, c.Sessions = nil, nil, nil, make([]store.SessionInfo, len(info.Sessions))
	for i, s := range info.Sessions {
		c.Sessions[i].ID = s.ID
	}
	return &c
}

// readInfos adds to is (nil: a new set) the conversations of ids it lacks,
// read in parallel; interrupted (ctx's error), some are left unread.
func (x *exporter) readInfos(ctx context.Context, is map[string]readInfo, ids []string) (map[string]readInfo, error) {
	if is == nil {
		is = map[string]readInfo{}
	}
	var todo []string
	seen := map[string]bool{}
	for _, id := range ids {
		if _, ok := is[id]; !ok && !seen[id] {
			seen[id] = true
			todo = append(todo, id)
		}
	}
	workers := min(max(1, runtime.GOMAXPROCS(0)), 8, len(todo))
	err := archive.ReadAhead(ctx, slices.Values(todo), archive.Ahead{Workers: workers, Items: 2 * workers}, x.readPlan, nil,
		func(r readInfo) error { is[r.id] = r; return nil }, func(readInfo) {})
	return is, err
}

// openLog is one log of a conversation being exported, read and checked.
type openLog struct {
	name string // entry name
	log  store.Log
	f    *convlog.File
	// A small log is read once into buf: src reads buf (else f), data is what is archived.
	buf     []byte
	small   bool
	src     io.ReaderAt
	data    []byte
	sum     [sha256.Size]byte
	leftOut int64
	// The strict read; its Prefix is what of src is archived.
	read archive.LogRead
}

func (l *openLog) close() {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

func (l *openLog) release() {
	l.close()
	if l.buf != nil {
		archive.PutBuf(l.buf)
		l.buf, l.src, l.data = nil, nil, nil
	}
}

// smallLog: a log up to it is read into memory once, larger ones through one descriptor.
const smallLog = 1 << 20

// What is read ahead of the writer: generous, so one large conversation
// does not idle the other workers.
const (
	aheadConvs = 128
	aheadBytes = 32 << 20
	aheadFiles = 64
)

type readConv struct {
	p       *planned
	c       *Conversation // nil: left out (problem says why)
	logs    []*openLog
	events  []store.Item // layout findings to report
	problem *store.Item  // set: the conversation is left out
	bytes   int64        // of buffered logs
	files   int          // logs held open
}

func (rc *readConv) close() {
	for _, l := range rc.logs {
		l.release()
	}
}

func (x *exporter) write(ctx context.Context, w io.Writer) (*ExportResult, error) {
	wopts := x.opts.Archive
	wopts.ModTime = x.m.CreatedAt
	aw := archive.NewWriter(w, wopts)
	fail := func(err error) (*ExportResult, error) {
		aw.Abort()
		return nil, err
	}
	var parts manifestParts
	res, err := x.run(ctx, func(logs []*openLog) error {
		n := len(x.m.Files)
		if err := x.archiveConv(aw, logs); err != nil {
			return err
		}
		return parts.add(&x.m.Conversations[len(x.m.Conversations)-1], x.m.Files[n:])
	})
	if err != nil {
		return fail(err)
	}
	data, err := parts.manifest(x.m)
	if err == nil {
		_, err = archive.WriteManifestJSON(aw, data)
	}
	if err != nil {
		return fail(err)
	}
	if err := aw.Close(); err != nil {
		return nil, err
	}
	res.Bytes = aw.Written()
	return res, nil
}

// run reads and checks every conversation in order, handing keep the logs of each exported.
func (x *exporter) run(ctx context.Context, keep func([]*openLog) error) (*ExportResult, error) {
	res := &ExportResult{Manifest: x.m, Added: []string{}}
	x.opts.Progress.SetTotal(int64(len(x.order)))
	// The conversations are read ahead of the writer, handed over in order.
	workers := max(1, min(runtime.GOMAXPROCS(0), 8, len(x.order)))
	a := archive.Ahead{Workers: workers, Items: aheadConvs * workers, Bytes: aheadBytes, Files: aheadFiles}
	cost := func(rc *readConv) (int64, int) { return rc.bytes, rc.files }
	err := archive.ReadAhead(ctx, slices.Values(x.order), a, x.read, cost, func(rc *readConv) error {
		defer x.opts.Progress.Add(1)
		defer rc.close()
		for _, ev := range rc.events {
			x.opts.OnEvent(ev)
		}
		if rc.problem != nil {
			x.problem(rc.problem.ID, rc.problem.Path, rc.problem.Reason)
			return nil
		}
		x.m.Conversations = append(x.m.Conversations, *rc.c)
		if err := keep(rc.logs); err != nil {
			return err
		}
		if !rc.p.requested {
			res.Added = append(res.Added, rc.p.id)
		}
		return nil
	}, (*readConv).close)
	if err != nil {
		return nil, err
	}
	return res, nil
}

// PlanExport is Export writing nothing (the files without SHA-256).
func PlanExport(ctx context.Context, s *store.Store, opts ExportOptions) (*ExportResult, error) {
	x, err := newExporter(ctx, s, opts)
	if err != nil {
		return nil, err
	}
	return x.run(ctx, func(logs []*openLog) error {
		for _, l := range logs {
			x.m.Files = append(x.m.Files, x.fileOf(l, l.read.Prefix.Len(), ""))
		}
		return nil
	})
}

// read opens and checks every current log of one conversation (one that
// fails leaves it out), in the plan's listing unless it lacks a session.
func (x *exporter) read(p *planned) *readConv {
	if ls := p.listing; ls != nil {
		p.listing = nil
		if rc := x.readListed(p, ls); rc != nil {
			return rc
		}
	}
	return x.readListed(p, nil)
}

// readListed is read with the listing ls (nil: listed now); nil when ls lacks a session.
func (x *exporter) readListed(p *planned, ls *planDir) *readConv {
	rc := &readConv{p: p}
	dir, _ := x.s.ConversationPath(p.id)
	leaveOut := func(path, reason string) *readConv {
		rc.close()
		rc.logs, rc.bytes, rc.files = nil, 0, 0
		rc.problem = &store.Item{Kind: store.ItemUnreadable, ID: p.id, Path: path, Reason: reason}
		return rc
	}
	var (
		cd    store.ConversationDir
		probs []store.Item
		err   error
	)
	if ls != nil {
		cd, probs = ls.cd, ls.probs
	} else if cd, probs, err = x.s.WalkConversation(p.id); err != nil {
		if len(probs) > 0 {
			return leaveOut(probs[0].Path, probs[0].Reason)
		}
		return leaveOut(dir, termtext.Reason(dir, err))
	}
	for _, pr := range probs {
		pr.Kind, pr.ID = store.ItemWarning, p.id
		rc.events = append(rc.events, pr)
	}
	vouched := x.vouched().Sessions(cd) // before the logs are read
	var convLog *openLog
	for _, l := range cd.Logs {
		ol := &openLog{name: path.Join(store.ConversationsDirName, cd.Name, l.Current.String()), log: l}
		var err error
		row, isVouched := vouched[filepath.Base(l.Path)]
		if pl := p.plan; ol.log.IsConversationLog && pl != nil && pl.path == ol.log.Path {
			p.plan = nil
			err = ol.openAsPlanned(pl)
		} else if isVouched && !ol.log.IsConversationLog {
			err = ol.openVouched(row)
		} else {
			err = ol.open()
		}
		if err != nil {
			return leaveOut(l.Path, termtext.Reason(l.Path, err))
		}
		rc.logs = append(rc.logs, ol)
		rc.bytes += int64(cap(ol.buf))
		if ol.f != nil {
			rc.files++
		}
		if ol.log.IsConversationLog {
			convLog = ol
		}
	}
	if convLog == nil {
		return leaveOut(dir, "no conversation log")
	}
	info, err := convLog.read.Info, convLog.read.InfoErr
	var ie *convlog.IdentityError
	switch {
	case errors.As(err, &ie):
		return leaveOut(convLog.log.Path, ie.Msg)
	case err != nil:
		return leaveOut(convLog.log.Path, termtext.Reason(convLog.log.Path, err))
	case info.Deleting:
		return leaveOut(dir, "the conversation is being deleted: not exported")
	case ls != nil && !sessionsListed(info, cd):
		rc.close()
		return nil
	}
	rc.c = &Conversation{
		ID: p.id, Dir: cd.Name, Title: info.Title, Cwd: info.Cwd,
		Agents: nonNil(info.Agents), Models: nonNil(info.Models),
		ForkedFrom: info.ForkedFrom, AfterCompaction: info.AfterCompaction,
		DependsOn: nonNil(store.Dependencies(info)), Archived: info.Archived,
		Requested: p.requested, AncestorOf: nonNil(p.ancestorOf), Sessions: len(info.Sessions),
	}
	return rc
}

func sessionsListed(info *store.ConversationInfo, cd store.ConversationDir) bool {
	for _, si := range info.Sessions {
		if !slices.ContainsFunc(cd.Logs, func(l store.Log) bool { return !l.IsConversationLog && l.ID == si.ID }) {
			return false
		}
	}
	return true
}

// load opens the log: a small one is read into buf, a larger one held open.
func (l *openLog) load() (size int64, err error) {
	f, err := convlog.OpenFile(l.log.Path)
	if err != nil {
		return 0, err
	}
	size = f.Size()
	l.src = f
	if size > smallLog {
		l.f = f
		return size, nil
	}
	buf := archive.GetBuf(size)
	n, err := f.ReadAt(buf, 0)
	f.Close()
	if n < len(buf) {
		archive.PutBuf(buf)
		if err == nil || err == io.EOF {
			err = fmt.Errorf("%s: changed while it was read (%d of %d bytes)", l.log.Path, n, size)
		}
		return 0, err
	}
	l.buf, l.src, l.small = buf, convlog.Bytes(buf), true
	return size, nil
}

// open reads the log strictly and finds its committed prefix.
func (l *openLog) open() error {
	size, err := l.load()
	if err != nil {
		return err
	}
	rd, err := archive.ReadLog(l.src, size, l.log.Path, l.log, l.log.Current, false)
	if err != nil {
		l.close()
		return err
	}
	// Otherwise the prefix is found from the structure, agreeing with the read.
	pr := rd.Prefix
	switch {
	case rd.Whole && pr.Bytes != size:
		err = fmt.Errorf("%s: changed while it was read", l.log.Path)
	case !rd.Whole:
		pr, err = convlog.CommittedPrefix(l.src, size, l.log.Current.Compression, l.log.Path)
	}
	if err == nil && pr.RecoveredLines != rd.Recovered {
		err = fmt.Errorf("%s: changed while it was read", l.log.Path)
	}
	if err != nil {
		l.close()
		return err
	}
	rd.Prefix = pr
	l.read, l.leftOut = rd, size-pr.Bytes
	if l.buf != nil {
		l.data = l.buf[:pr.Bytes]
		if pr.RecoveredBytes > 0 {
			if l.data, err = io.ReadAll(pr.Reader(l.src)); err != nil {
				return err
			}
		}
		l.sum = sha256.Sum256(l.data)
	}
	return nil
}

// openVouched takes the event count of a log metadata.db vouches for (row),
// unread, if it holds the bytes indexed in whole frames; else it reads it.
func (l *openLog) openVouched(row index.Session) error {
	if row.FormatVersion != l.log.Current.Version {
		return l.open()
	}
	size, err := l.load()
	if err != nil {
		return err
	}
	pr, err := convlog.CommittedPrefix(l.src, size, l.log.Current.Compression, l.log.Path)
	if err != nil || size != row.Bytes || pr.Bytes != size || pr.Torn {
		l.release()
		return l.open()
	}
	l.read = archive.LogRead{Events: row.Events, Prefix: pr, Whole: true}
	if l.buf != nil {
		l.data, l.sum = l.buf, sha256.Sum256(l.buf)
	}
	return nil
}

// openAsPlanned takes the plan's read pl if the log holds the bytes it checked.
func (l *openLog) openAsPlanned(pl *planLog) error {
	f, err := convlog.OpenFile(l.log.Path)
	if err != nil {
		return l.open()
	}
	same := f.Size() == pl.size
	var buf []byte
	if same {
		buf = archive.GetBuf(pl.size)
		n, _ := f.ReadAt(buf, 0)
		same = n == len(buf) && sha256.Sum256(buf) == pl.sum
	}
	f.Close()
	if !same {
		if buf != nil {
			archive.PutBuf(buf)
		}
		return l.open()
	}
	l.buf, l.src, l.data, l.sum, l.small = buf, convlog.Bytes(buf), buf, pl.sum, true
	l.read, l.leftOut = pl.read, 0
	return nil
}

// archiveConv writes the logs' committed prefixes from the bytes checked.
func (x *exporter) archiveConv(aw *archive.Writer, logs []*openLog) error {
	for _, l := range logs {
		kind := l.log.Current.Compression
		var sum archive.Sum
		var err error
		if l.data != nil {
			sum, err = aw.WriteHashed(l.name, kind, l.data, l.sum)
		} else {
			sum, err = aw.WriteEntry(l.name, kind, l.read.Prefix.Len(), l.read.Prefix.Reader(l.src))
		}
		if err != nil {
			return fmt.Errorf("archive %s: %w", l.log.Path, err)
		}
		x.m.Files = append(x.m.Files, x.fileOf(l, sum.Size, sum.Hex()))
	}
	return nil
}

func (x *exporter) fileOf(l *openLog, size int64, sum string) File {
	return File{
		Name: l.name, Conversation: l.log.Conversation, Session: l.log.ID, Version: l.log.Current.Version,
		Size: size, SHA256: sum, Committed: size, Events: l.read.Events, LeftOut: l.leftOut,
	}
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}
