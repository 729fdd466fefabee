package transfer

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/convkit/convkit/archive"
	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/durable"
	"github.com/convkit/convkit/progress"
	"github.com/convkit/convkit/store"
)

// ExportOptions configure Export.
type ExportOptions struct {
	// IDs are the conversations to export; their fork ancestors are added.
	IDs []string
	// Now is the clock (default time.Now): the manifest's createdAt and
	// every entry's modification time.
	Now func() time.Time
	// ToolVersion is recorded in the manifest.
	ToolVersion string
	// TempDir holds a copy of each conversation log's committed prefix
	// while it is replayed for the manifest (default os.TempDir()).
	TempDir string
	// Progress counts conversations exported; the total is set first.
	Progress progress.Progress
	// OnEvent receives each conversation left out and each entry out of
	// shape, as found (nil: nothing).
	OnEvent func(ExportEvent)
	// Archive tunes the container (tests).
	Archive archive.WriterOptions
}

func (o *ExportOptions) defaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if o.Progress == nil {
		o.Progress = progress.Nop{}
	}
	if o.OnEvent == nil {
		o.OnEvent = func(ExportEvent) {}
	}
}

// ExportEvent is one thing an export reports as it happens: a conversation
// left out because one of its logs cannot be read strictly, or a fork
// ancestor missing (Unreadable, also in the manifest's Problems), a
// temporary file a killed export to the same file left, removed (Removed;
// Reason says why when it could not be), or an entry of a conversation
// directory that breaks the layout, not exported (neither).
type ExportEvent struct {
	Unreadable bool
	Removed    bool
	// ID is the conversation (for Unreadable).
	ID     string
	Path   string
	Reason string
}

// ExportResult is what an export wrote.
type ExportResult struct {
	Manifest *Manifest
	// Archive is the published file's path, or "-".
	Archive string
	// Added are the conversations exported as fork ancestors of the
	// requested ones, without being requested.
	Added []string
	// TarBytes is the archive's tar stream; Bytes what was written.
	TarBytes int64
	Bytes    int64
	// RemovedTemps are the temporary files of killed exports to the same
	// file that ExportToFile removed.
	RemovedTemps []string
}

// Partial reports whether something asked for is not in the archive (an
// unreadable log, a missing fork ancestor): the caller's exit 3.
func (r *ExportResult) Partial() bool { return len(r.Manifest.Problems) > 0 }

// Errors of Export that callers tell apart.
var (
	// ErrNotFound: a requested conversation does not exist (or is being
	// deleted). It wraps store.ErrNoConversation.
	ErrNotFound = store.ErrNoConversation
	// ErrNoStore: the data directory is not a store.
	ErrNoStore = store.ErrNoStore
)

// Export writes an archive of the conversations opts.IDs and their fork
// ancestors (transitively) from the store s, opened read-only, to w. It
// takes no lock and changes nothing in the store: each log's current generation is read strictly up to its
// committed prefix (a torn tail, or what the runtime is appending, is left
// out) and exactly those bytes, read from the same open file, are
// archived. A conversation with a log that cannot be read is left out
// whole and listed in the manifest's Problems, as is a fork ancestor that
// is missing; neither stops the export (see ExportResult.Partial). A
// requested conversation that does not exist fails the export before
// anything is written (ErrNotFound).
func Export(ctx context.Context, s *store.Store, w io.Writer, opts ExportOptions) (*ExportResult, error) {
	x, err := newExporter(s, opts)
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

// ExportToFile is Export into a new file at path: written beside it under
// a temporary name (archive.TempFile: flock'ed while it is written) and
// published (linked into place, never over an existing file) only when
// complete. Temporary files that killed exports to the same path left
// (their lock is free) are removed first; then an existing path is
// refused before anything is read.
func ExportToFile(ctx context.Context, s *store.Store, path string, opts ExportOptions) (*ExportResult, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	opts.defaults()
	removed := removeStaleTemps(abs, opts.OnEvent)
	if _, err := os.Lstat(abs); err == nil {
		return nil, fmt.Errorf("%s: %w: export never overwrites a file", abs, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	x, err := newExporter(s, opts)
	if err != nil {
		return nil, err
	}
	tmp, err := archive.CreateTemp(abs)
	if err != nil {
		return nil, err
	}
	defer tmp.Discard() // nothing once published
	bw := bufio.NewWriterSize(tmp, 1<<20)
	res, err := x.write(ctx, bw)
	if err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err // interrupted: not published
	}
	if err := tmp.Publish(abs); err != nil {
		return nil, err
	}
	res.Archive, res.RemovedTemps = abs, removed
	return res, nil
}

// removeStaleTemps removes the temporary files of killed exports to path,
// reporting each, and returns those it removed.
func removeStaleTemps(path string, onEvent func(ExportEvent)) []string {
	removed := []string{}
	for _, s := range archive.SweepTemps(path) {
		ev := ExportEvent{Removed: true, Path: s.Path}
		if s.Err != nil {
			ev.Reason = s.Err.Error()
		} else {
			removed = append(removed, s.Path)
		}
		onEvent(ev)
	}
	return removed
}

// exporter is one export, planned.
type exporter struct {
	s     *store.Store
	opts  ExportOptions
	m     *Manifest
	order []*planned
}

// planned is a conversation the export will try.
type planned struct {
	id         string
	requested  bool
	ancestorOf []string
}

func newExporter(s *store.Store, opts ExportOptions) (*exporter, error) {
	opts.defaults()
	if len(opts.IDs) == 0 {
		return nil, errors.New("export needs at least one conversation id")
	}
	m := &Manifest{ManifestHeader: manifestFormat.Header(opts.ToolVersion, opts.Now()),
		Requested: []string{}, Conversations: []Conversation{}, Files: []File{}, Problems: []Problem{}}
	st, err := s.LockStatus()
	if err != nil {
		return nil, err
	}
	m.Online, m.Holder = st.Held, nil
	if st.Held {
		m.Holder = st.Holder
	}
	x := &exporter{s: s, opts: opts, m: m}
	if err := x.plan(); err != nil {
		return nil, err
	}
	return x, nil
}

func (x *exporter) problem(id, p, reason string) {
	reason = strings.TrimPrefix(reason, p+": ")
	x.m.Problems = append(x.m.Problems, Problem{ID: id, Path: p, Reason: reason})
	x.opts.OnEvent(ExportEvent{Unreadable: true, ID: id, Path: p, Reason: reason})
}

// plan checks the requested ids and finds their fork ancestors. A
// requested id that does not exist is an error; an ancestor that does not,
// or any conversation log that cannot be read, is a problem.
func (x *exporter) plan() error {
	byID := map[string]*planned{}
	deps := map[string][]string{}
	var queue []string
	for _, id := range x.opts.IDs {
		if _, err := store.EncodeSegment(id); err != nil {
			return fmt.Errorf("conversation id %q: %w", id, err)
		}
		if byID[id] != nil {
			continue
		}
		info, err := x.s.ReadConversation(id)
		switch {
		case errors.Is(err, store.ErrNoConversation):
			return fmt.Errorf("conversation %q: %w", id, ErrNotFound)
		case err == nil && info.Deleting:
			return fmt.Errorf("conversation %q: %w (it is being deleted)", id, ErrNotFound)
		}
		x.m.Requested = append(x.m.Requested, id)
		byID[id] = &planned{id: id, requested: true}
		if err != nil {
			// Reported when the conversation is exported.
			continue
		}
		deps[id] = store.Dependencies(info)
		queue = append(queue, deps[id]...)
	}
	// Ancestors, transitively.
	missing := map[string]bool{}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if byID[id] != nil || missing[id] {
			continue
		}
		info, err := x.s.ReadConversation(id)
		switch {
		case errors.Is(err, store.ErrNoConversation) || (err == nil && info.Deleting):
			missing[id] = true
			continue
		case err != nil:
			byID[id] = &planned{id: id}
			continue
		}
		byID[id] = &planned{id: id}
		deps[id] = store.Dependencies(info)
		queue = append(queue, deps[id]...)
	}
	// Who each ancestor is exported for: the requested conversations that
	// read from it, directly or not.
	for _, id := range x.m.Requested {
		seen := map[string]bool{}
		var walk func(string)
		walk = func(c string) {
			for _, d := range deps[c] {
				if seen[d] {
					continue
				}
				seen[d] = true
				if p := byID[d]; p != nil && !p.requested {
					p.ancestorOf = append(p.ancestorOf, id)
				}
				walk(d)
			}
		}
		walk(id)
	}
	var missingIDs []string
	for id := range missing {
		missingIDs = append(missingIDs, id)
	}
	sort.Strings(missingIDs)
	for _, id := range missingIDs {
		var users []string
		for c, ds := range deps {
			for _, d := range ds {
				if d == id {
					users = append(users, c)
				}
			}
		}
		sort.Strings(users)
		p, _ := x.s.ConversationPath(id)
		x.problem(id, p, fmt.Sprintf("fork ancestor %q of %q is missing from the store: not exported", id, users))
	}
	// Archive order: ancestors first (depth first, by id), so that an
	// import placing conversations in this order never has a fork whose
	// source is not there yet.
	ids := make([]string, 0, len(byID))
	for id := range byID {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	done := map[string]bool{}
	var visit func(string)
	visit = func(id string) {
		if done[id] || byID[id] == nil {
			return
		}
		done[id] = true
		for _, d := range deps[id] {
			visit(d)
		}
		x.order = append(x.order, byID[id])
	}
	for _, id := range ids {
		visit(id)
	}
	return nil
}

// openLog is one log of a conversation being exported, read and checked.
type openLog struct {
	name      string // entry name
	path      string
	session   string
	gen       convlog.Name
	isConvLog bool
	f         *convlog.File
	prefix    convlog.Prefix // what of f is archived
	leftOut   int64
	events    int64
}

func (x *exporter) write(ctx context.Context, w io.Writer) (*ExportResult, error) {
	tmpDir, err := os.MkdirTemp(x.opts.TempDir, "convkit-export-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmpDir)
	wopts := x.opts.Archive
	wopts.ModTime = x.m.CreatedAt
	aw := archive.NewWriter(w, wopts)
	fail := func(err error) (*ExportResult, error) {
		aw.Abort()
		return nil, err
	}
	res := &ExportResult{Manifest: x.m, Added: []string{}}
	x.opts.Progress.SetTotal(int64(len(x.order)))
	for _, p := range x.order {
		if err := ctx.Err(); err != nil {
			return fail(err)
		}
		c, logs, ok := x.read(p, tmpDir)
		if !ok {
			x.opts.Progress.Add(1)
			continue
		}
		err := x.archiveConv(aw, logs)
		for _, l := range logs {
			l.f.Close()
		}
		if err != nil {
			return fail(err)
		}
		x.m.Conversations = append(x.m.Conversations, *c)
		if !p.requested {
			res.Added = append(res.Added, p.id)
		}
		x.opts.Progress.Add(1)
	}
	if _, err := archive.WriteManifest(aw, x.m); err != nil {
		return fail(err)
	}
	if err := aw.Close(); err != nil {
		return nil, err
	}
	st := aw.Stats()
	res.TarBytes, res.Bytes = st.TarBytes, st.Bytes
	return res, nil
}

// read opens and checks every current log of one conversation. Any log
// that cannot be read strictly leaves the whole conversation out (a
// problem); then ok is false and nothing is left open.
func (x *exporter) read(p *planned, tmpDir string) (c *Conversation, logs []*openLog, ok bool) {
	dir, _ := x.s.ConversationPath(p.id)
	defer func() {
		if !ok {
			for _, l := range logs {
				l.f.Close()
			}
			logs = nil
		}
	}()
	cd, probs, err := x.s.WalkConversation(p.id)
	if err != nil {
		if len(probs) > 0 {
			// The entry at fault and why, each said once.
			x.problem(p.id, probs[0].Path, probs[0].Reason)
		} else {
			x.problem(p.id, dir, err.Error())
		}
		return nil, logs, false
	}
	for _, pr := range probs {
		x.opts.OnEvent(ExportEvent{ID: p.id, Path: pr.Path, Reason: pr.Reason})
	}
	var convLog *openLog
	for _, l := range cd.Logs {
		ol := &openLog{
			name:      path.Join(store.ConversationsDirName, cd.Name, l.Current.String()),
			path:      l.Path,
			session:   l.ID,
			gen:       l.Current,
			isConvLog: l.IsConversationLog,
		}
		if err := ol.open(); err != nil {
			x.problem(p.id, l.Path, err.Error())
			return nil, logs, false
		}
		logs = append(logs, ol)
		if ol.isConvLog {
			convLog = ol
		}
	}
	if convLog == nil {
		x.problem(p.id, dir, "no conversation log")
		return nil, logs, false
	}
	// Replay exactly the bytes to be archived, for the manifest.
	snapDir := filepath.Join(tmpDir, cd.Name)
	if err := os.Mkdir(snapDir, durable.DirMode); err != nil {
		x.problem(p.id, convLog.path, err.Error())
		return nil, logs, false
	}
	snap := filepath.Join(snapDir, convLog.gen.String())
	if err := copyPrefix(snap, convLog.prefix.Reader(convLog.f)); err != nil {
		x.problem(p.id, convLog.path, err.Error())
		return nil, logs, false
	}
	// The copy sits in a directory of the conversation's name: it is read
	// as the log it copies, its header checked against its place.
	info, err := store.ReadConversationFile(snap)
	os.RemoveAll(snapDir)
	var ie *convlog.IdentityError
	switch {
	case errors.As(err, &ie):
		x.problem(p.id, convLog.path, ie.Msg)
		return nil, logs, false
	case err != nil:
		x.problem(p.id, convLog.path, err.Error())
		return nil, logs, false
	case info.Deleting:
		x.problem(p.id, dir, "the conversation is being deleted: not exported")
		return nil, logs, false
	}
	c = &Conversation{
		ID: p.id, Dir: cd.Name, Title: info.Title, Cwd: info.Cwd,
		Agents: nonNil(info.Agents), Models: nonNil(info.Models),
		ForkedFrom: info.ForkedFrom, AfterCompaction: info.AfterCompaction,
		DependsOn: nonNil(store.Dependencies(info)), Archived: info.Archived,
		Requested: p.requested, AncestorOf: nonNil(p.ancestorOf), Sessions: len(info.Sessions),
	}
	return c, logs, true
}

// open opens the log (convlog's way: never through a symbolic link, never
// blocking, a regular file only), reads it strictly to count its events
// (import refuses a session log naming another session: such a log is not
// exported) and finds its committed prefix.
func (l *openLog) open() error {
	f, err := convlog.OpenFile(l.path)
	if err != nil {
		return err
	}
	comp := l.gen.Compression
	opts, err := store.LogReaderOptions(l.path, convlog.ReaderOptions{Version: l.gen.Version, Compression: &comp})
	if err != nil {
		f.Close()
		return err
	}
	r, err := convlog.NewReader(f, f.Size(), l.path, opts)
	if err != nil {
		f.Close()
		return err
	}
	var events int64
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			r.Close()
			f.Close()
			return err
		}
		// The lines of a torn final frame are events too: the prefix
		// archived holds them.
		events++
	}
	r.Close()
	pr, err := convlog.CommittedPrefix(f, f.Size(), comp, l.path)
	if err == nil && pr.RecoveredLines != r.Stats().RecoveredLines {
		err = fmt.Errorf("%s: changed while it was read", l.path)
	}
	if err != nil {
		f.Close()
		return err
	}
	l.f, l.prefix, l.leftOut, l.events = f, pr, f.Size()-pr.Bytes, events
	return nil
}

// archiveConv writes the logs' committed prefixes, from the files they
// were checked in.
func (x *exporter) archiveConv(aw *archive.Writer, logs []*openLog) error {
	for _, l := range logs {
		kind := archive.Text
		if l.gen.Compression == convlog.Zstd {
			kind = archive.Compressed
		}
		sum, err := aw.WriteEntry(l.name, kind, l.prefix.Len(), l.prefix.Reader(l.f))
		if err != nil {
			return fmt.Errorf("archive %s: %w", l.path, err)
		}
		conv, _ := store.DecodeSegment(path.Base(path.Dir(l.name)))
		x.m.Files = append(x.m.Files, File{
			Name: l.name, Conversation: conv, Session: l.session, Version: l.gen.Version,
			Size: sum.Size, SHA256: sum.Hex(), Committed: sum.Size, Events: l.events, LeftOut: l.leftOut,
		})
	}
	return nil
}

// copyPrefix writes what src yields into a new private file.
func copyPrefix(dst string, src io.Reader) error {
	f, err := durable.CreateExcl(dst)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}
