// Package migrate brings every log under a sessions root forward to format
// version 4, the one-time batch migration: each successor is published beside
// its untouched original (package upgrade), a log that changes meanwhile is
// retried once after the first pass, and a failure never stops the rest. A
// private text log and a JSON summary are written to a fresh temporary folder
// as the run goes.
//
// FindRoot recognises a sessions root. Run migrates the logs of a store the
// caller opened (holding runtime.lock unless it is a dry run); RunSessions
// the runtime's own layout, under each session.lock. Both return a Summary.
package migrate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/convlog/upgrade"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/dshroot"
	"github.com/convkit/convkit/internal/progress"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// errWriterVersion: the build's writer does not write the target version.
var errWriterVersion = errors.New("this command requires a V4 session writer")

const (
	targetVersion  = 4
	maxDefaultJobs = 16 // an explicit number of jobs may be more
	// maxJobs bounds the logs converted at once: each job holds up to tens
	// of megabytes, and more than CPUs contend.
	maxJobs = 64
)

// Workers is how many logs a run asked for jobs converts at once at most.
func Workers(jobs int) int { return max(1, min(jobs, maxJobs)) }

// DefaultJobs is the number of CPUs, at most maxDefaultJobs.
func DefaultJobs() int { return min(runtime.NumCPU(), maxDefaultJobs) }

// Compress chooses the compression of successors.
type Compress string

// Compression choices.
const (
	CompressKeep Compress = "keep"
	CompressZstd Compress = "zstd"
	CompressNone Compress = "none"
)

// Options configure Run.
type Options struct {
	Jobs int // logs converted at once (default DefaultJobs; Workers)
	// DryRun plans without writing any log (the reports are still kept).
	DryRun   bool
	Compress Compress
	// OnEvent receives every step in the text log's order (Event.Line).
	OnEvent func(Event)
	// ReportDir holds the private report folder (default os.TempDir()).
	ReportDir string
	// Exclude are path.Match patterns of inputs or directories skipped as "excluded".
	Exclude  []string
	Now      func() time.Time
	Progress progress.Progress
	// ToolVersion and Revision ("": unknown) are recorded in the summary.
	ToolVersion   string
	Revision      string
	WriterVersion int // the build writer's (CheckWriter)
	// Machine is what the index's will-not-open checks use after converting.
	Machine *store.Machine
	// BeforePublish is a test hook (upgrade.PublishOptions.BeforePublish).
	BeforePublish func(src string)

	publications *upgrade.Publications // the successors this run published
}

// Event is one step of the run. Those of inputs are the --json stream;
// notes (MessageType "", Action "note") are lines of the text log only.
type Event struct {
	MessageType string  `json:"message_type"` // "status" or "error"; "" for a note
	Action      string  `json:"action"`       // start, retry, converted, already-v4, skipped, deferred, failed, planned; note
	Index       int     `json:"index"`
	Count       int     `json:"count"`
	Path        string  `json:"path"`
	File        string  `json:"file,omitempty"`
	Version     *int    `json:"sourceVersion,omitempty"`
	Bytes       int64   `json:"bytes,omitempty"`
	Target      string  `json:"target,omitempty"`
	TargetBytes int64   `json:"targetBytes,omitempty"`
	Seconds     float64 `json:"seconds,omitempty"`
	Completed   int     `json:"completed,omitempty"`
	Message     string  `json:"message,omitempty"`
	// Rel is the input's path under the root, as the text log names it.
	Rel string `json:"-"`
}

// Line is the event as migration.log writes it (a failure takes two lines).
func (e Event) Line() string {
	if e.Action == "note" {
		return e.Message
	}
	at := fmt.Sprintf("[%d/%d] %s ", e.Index, e.Count, termtext.Quote(e.Rel))
	done := fmt.Sprintf("completed=%d/%d", e.Completed, e.Count)
	secs := fmt.Sprintf("%.2f", e.Seconds)
	v := -1
	if e.Version != nil {
		v = *e.Version
	}
	switch e.Action {
	case "start":
		if e.Version == nil {
			return at + "START inspect entry"
		}
		return at + fmt.Sprintf("START %s (V%d, %d bytes)", e.File, v, e.Bytes)
	case "retry":
		return at + fmt.Sprintf("RETRY %s (V%d, %d bytes)", e.File, v, e.Bytes)
	case "converted":
		return at + fmt.Sprintf("V%d -> V4: %s (%ss); %s", v, filepath.Base(e.Target), secs, done)
	case "planned":
		return at + fmt.Sprintf("V%d -> V4: would write %s (about %d bytes) (%ss); %s", v, filepath.Base(e.Target), e.TargetBytes, secs, done)
	case "already-v4":
		return at + fmt.Sprintf("already V4 (opened successfully) (%ss); %s", secs, done)
	case "skipped":
		return at + fmt.Sprintf("SKIPPED: %s; %s", e.Message, done)
	case "deferred":
		return at + fmt.Sprintf("DEFERRED: %s; retry once after initial jobs finish", e.Message)
	case "failed":
		if e.Index == 0 { // the root itself: no input was worked on
			return fmt.Sprintf("ERROR %s: %s", termtext.Quote(e.Path), e.Message)
		}
		return at + fmt.Sprintf("FAILED (%ss); %s\nERROR %s: %s", secs, done, termtext.Quote(e.Path), e.Message)
	}
	return at + e.Action
}

// input is a log (a session directory in the runtime's layout) or a layout problem.
type input struct {
	index    int
	rel      string // path relative to the root, for the report lines
	path     string // the log, or the entry or directory
	version  int    // -1: unknown (layout problems, unreadable)
	size     int64
	skip     string           // reason to skip
	failure  string           // reason it is a failed input before any work
	deferred bool             // its source changed on the first pass: retried
	session  *dshroot.Session // the runtime's layout
	log      *store.Log       // convkit's layout
}

// tree is what a run found under its root, in either layout.
type tree struct {
	noun   string // names the inputs in the "Discovered" line
	inputs []*input
	// rootErr (a missing root, mixed compressions) fails the whole run.
	rootErr error
	temps   []string // convkit's layout: interrupted writes, removed first
	dsh     *dshroot.Root
}

// Run migrates every log of s (locked unless a dry run) and updates the
// index rows of the conversations converted; Totals.Failed > 0 fails it.
func Run(ctx context.Context, s *store.Store, opts Options) (*Summary, error) {
	if err := checkOptions(&opts); err != nil {
		return nil, err
	}
	if !opts.DryRun && !s.Writable() {
		return nil, errors.New("migrate needs the store opened with the exclusive lock (a dry run does not)")
	}
	root, err := filepath.Abs(s.ConversationsDir())
	if err != nil {
		return nil, err
	}
	sum, err := runTree(ctx, opts, root, LayoutConvkit, func() *tree { return discover(s, root, Workers(opts.Jobs)) })
	if err != nil || len(sum.converted) == 0 || ctx.Err() != nil {
		// An interrupted run's conversions read as stale until a reindex.
		return sum, err
	}
	return sum, updateIndex(ctx, s, sum.converted, opts.Machine)
}

// updateIndex updates the rows of the converted conversations, whose
// fingerprints changed; a store without a usable index is left to reindex.
func updateIndex(ctx context.Context, s *store.Store, ids map[string]bool, m *store.Machine) error {
	if _, err := os.Lstat(s.IndexPath()); err != nil {
		return nil
	}
	db, err := index.Open(s.IndexPath())
	if err != nil {
		return nil
	}
	defer db.Close()
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		if _, err := reindex.Update(ctx, db, s, id, reindex.UpdateOptions{Machine: m}); err != nil {
			return fmt.Errorf("updating the index after the migration: %w", err)
		}
	}
	return nil
}

// RunSessions migrates a runtime-layout root as the runtime's command would:
// each session under its session.lock (none on a dry run), nothing created
// at the root, successors keeping their source's compression and suffix.
func RunSessions(ctx context.Context, r *dshroot.Root, opts Options) (*Summary, error) {
	if err := checkOptions(&opts); err != nil {
		return nil, err
	}
	if opts.Compress != CompressKeep {
		return nil, fmt.Errorf("--compress %s: a sessions root in the dsh layout holds one compression, and successors keep their source's", opts.Compress)
	}
	return runTree(ctx, opts, r.Dir(), LayoutDSH, func() *tree { return discoverSessions(r) })
}

// CheckWriter refuses a build whose writer writes v (0: convlog.CurrentVersion), not V4.
func CheckWriter(v int) error {
	if v == 0 {
		v = convlog.CurrentVersion
	}
	if v != targetVersion {
		return errWriterVersion
	}
	return nil
}

func checkOptions(opts *Options) error {
	if err := CheckWriter(opts.WriterVersion); err != nil {
		return err
	}
	if err := CheckExclude(opts.Exclude); err != nil {
		return err
	}
	if opts.Jobs <= 0 {
		opts.Jobs = DefaultJobs()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Progress == nil {
		opts.Progress = progress.Nop{}
	}
	opts.Compress = cmp.Or(opts.Compress, CompressKeep)
	opts.publications = &upgrade.Publications{}
	return nil
}

func runTree(ctx context.Context, opts Options, root string, layout Layout, find func() *tree) (*Summary, error) {
	rep, err := newReport(opts, root, layout)
	if err != nil {
		return nil, err
	}
	defer rep.close()
	rep.line("Session migration to V4 started %s", rep.sum.StartedAt)
	rep.line("Root: %s", root)
	rep.line("Layout: %s", layout)
	rep.line("Session jobs: %d", opts.Jobs)
	rep.line("Go: %s; platform: %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	rep.line("Build: %s; revision %s", cmp.Or(opts.ToolVersion, "unknown"), cmp.Or(opts.Revision, "unknown"))
	if opts.DryRun {
		rep.line("Dry run: nothing is written")
	}
	rep.line("Full log: %s", rep.sum.TextLogPath)
	if rep.cleaned > 0 {
		rep.line("Removed %d report folder(s) older than %d days from %s", rep.cleaned, int(reportMaxAge.Hours()/24), termtext.Quote(filepath.Dir(rep.dir)))
	}

	t := find()
	for _, in := range t.inputs {
		if excluded(opts.Exclude, in.rel) {
			in.failure, in.skip = "", "excluded"
		}
		if fi, err := os.Lstat(in.path); err == nil && in.version >= 0 {
			in.size = fi.Size()
		}
	}
	if t.dsh != nil {
		// A copy of a child's directory is no child: said once, in the log.
		t.dsh.OnIgnoredChild(func(dir, parent string, err error) {
			rep.line("Ignored %s as a child of session %s: %s", termtext.Quote(dir), termtext.Quote(parent), termtext.Text(err))
		})
		defer t.dsh.OnIgnoredChild(nil)
	}
	if !opts.DryRun {
		// A killed writer's temporary files: under runtime.lock nobody writes them.
		for _, p := range t.temps {
			if os.Remove(p) == nil {
				rep.line("Removed %s: a temporary file left by an interrupted write", termtext.Quote(p))
			}
		}
	}
	rep.sum.InputCount = len(t.inputs)
	if t.rootErr == nil || t.inputs != nil {
		rep.line("Discovered %d %s.", len(t.inputs), t.noun)
	}
	if t.rootErr != nil {
		rep.fail(&input{path: root, version: -1}, t.rootErr, 0) // the run as a whole: nothing is worked on
	} else {
		if len(t.inputs) == 0 {
			rep.line("The sessions root is empty: there is nothing to migrate.")
		}
		opts.Progress.SetTotal(int64(len(t.inputs)))
		runJobs(ctx, opts, rep, t)
		for _, in := range t.inputs {
			if ctx.Err() != nil {
				break
			}
			if in.deferred {
				// A retry publishes at once.
				rep.event(in, Event{Action: "retry"})
				process(opts, rep, t, in, true).publish(context.WithoutCancel(ctx), rep, true)
			}
		}
	}
	if err = ctx.Err(); err != nil {
		rep.interrupted()
	}
	sum := rep.finish(opts)
	// A run whose summary.json could not be written fails, naming it.
	return sum, cmp.Or(err, rep.summaryErr)
}

// CheckExclude refuses a malformed exclude pattern.
func CheckExclude(patterns []string) error {
	for _, g := range patterns {
		if _, err := path.Match(g, ""); err != nil {
			return fmt.Errorf("--exclude %s: %w", termtext.Quote(g), err)
		}
	}
	return nil
}

// excluded reports whether rel or a directory it is in matches patterns.
func excluded(patterns []string, rel string) bool {
	for p := filepath.ToSlash(rel); p != "" && p != "."; {
		for _, g := range patterns {
			if ok, _ := path.Match(g, p); ok {
				return true
			}
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return false
}

// relTo is p under root, for the report lines.
func relTo(root, p string) string {
	if r, err := filepath.Rel(root, p); err == nil {
		return r
	}
	return p
}

// runJobs processes the inputs, Workers(opts.Jobs) at once; with more than
// one job publishers fsync, so jobs do not idle and fsyncs share commits.
func runJobs(ctx context.Context, opts Options, rep *report, t *tree) {
	workers := min(Workers(opts.Jobs), len(t.inputs))
	next := make(chan *input)
	pending := make(chan *publication, workers)
	var jobs, pubs sync.WaitGroup
	for range workers {
		jobs.Go(func() {
			for in := range next {
				if ctx.Err() != nil {
					continue
				}
				p := process(opts, rep, t, in, false)
				if p != nil && opts.Jobs > 1 {
					pending <- p
					continue
				}
				// The log a job was converting is finished even when interrupted.
				p.publish(context.WithoutCancel(ctx), rep, false)
				opts.Progress.Add(1)
			}
		})
		if opts.Jobs > 1 {
			pubs.Go(func() {
				for p := range pending {
					p.publish(ctx, rep, false)
					opts.Progress.Add(1)
				}
			})
		}
	}
	for _, in := range t.inputs {
		if ctx.Err() != nil {
			break
		}
		next <- in
	}
	close(next)
	jobs.Wait()
	close(pending)
	pubs.Wait()
}

// publication is an input's staged successor (in the dsh layout, locked).
type publication struct {
	in    *input
	stage *upgrade.Staged
	lock  *dshroot.SessionLock
	start time.Time
}

// publish publishes the stage, or discards it once ctx is done, and reports
// the outcome; a source changed on the first pass defers the input.
func (p *publication) publish(ctx context.Context, rep *report, retry bool) {
	if p == nil {
		return
	}
	defer p.lock.Release()
	if ctx.Err() != nil {
		p.stage.Discard()
		return
	}
	dst, err := p.stage.Publish()
	switch {
	case errors.Is(err, upgrade.ErrSourceChanged) && !retry:
		p.in.deferred = true
		rep.event(p.in, Event{Action: "deferred", Message: err.Error()})
	case err != nil:
		rep.fail(p.in, err, time.Since(p.start))
	default:
		rep.event(p.in, Event{Action: "converted", Target: dst, Seconds: time.Since(p.start).Seconds()})
	}
}

// process handles one input: a log it converts comes back staged, other outcomes reported.
func process(opts Options, rep *report, t *tree, in *input, retry bool) *publication {
	start := time.Now()
	switch {
	case in.failure != "":
		rep.event(in, Event{Action: "start"})
		rep.fail(in, errors.New(in.failure), time.Since(start))
		return nil
	case in.skip != "":
		rep.event(in, Event{Action: "start"})
		rep.event(in, Event{Action: "skipped", Message: in.skip})
		return nil
	}
	if !retry {
		rep.event(in, Event{Action: "start"})
	}
	p, err := stage(opts, rep, t, in, start)
	if err != nil {
		rep.fail(in, err, time.Since(start))
	}
	return p
}

// stage checks a log and stages its successor; nil, nil when reported here.
func stage(opts Options, rep *report, t *tree, in *input, start time.Time) (*publication, error) {
	var checkHeader func(*convlog.Header) error
	open := convlog.Open
	if s := in.session; s != nil {
		if err := sessionProblem(s); err != nil {
			return nil, err
		}
		// A log not naming its place fails before anything is written there.
		if err := t.dsh.CheckLog(in.path); err != nil {
			return nil, err
		}
		checkHeader = func(h *convlog.Header) error { return t.dsh.CheckIdentity(in.path, h) }
	} else if l := in.log; l != nil {
		// The opener and the upgrade chain check the log names its place.
		open = func(_ string, opts convlog.ReaderOptions) (*convlog.Reader, error) { return l.Open(opts) }
		if in.version < targetVersion {
			r, err := l.Open(convlog.ReaderOptions{}) // the dry run's check too
			if err != nil {
				return nil, err
			}
			r.Close()
		}
		checkHeader = l.CheckHeader
	}
	if in.version >= targetVersion {
		if in.session != nil && !opts.DryRun {
			removeStages(rep, t, in, nil)
		}
		r, err := open(in.path, convlog.ReaderOptions{LowMemory: true})
		if err != nil {
			return nil, err
		}
		defer r.Close()
		// A refusal as a reader's (convlog.Admit) fails it, not "already V4".
		if err := convlog.Admit(context.Background(), r, r.Header(), convlog.AdmitOptions{}); err != nil {
			return nil, err
		}
		rep.event(in, Event{Action: "already-v4", Seconds: time.Since(start).Seconds()})
		return nil, nil
	}
	comp, err := successorCompression(opts.Compress, in.path)
	if err != nil {
		return nil, err
	}
	if opts.DryRun {
		target, bytes, err := plan(in.path, comp)
		if err != nil {
			return nil, err
		}
		rep.event(in, Event{Action: "planned", Target: target, TargetBytes: bytes, Seconds: time.Since(start).Seconds()})
		return nil, nil
	}
	p := &publication{in: in, start: start}
	if in.session != nil {
		// The runtime converts a session only under its session.lock.
		if p.lock, err = t.dsh.LockSession(in.session); err != nil {
			return nil, err
		}
		removeStages(rep, t, in, p.lock)
	}
	popts := upgrade.PublishOptions{Compression: &comp, Warn: func(w string) { rep.logOnly("WARNING %s: %s", termtext.Quote(in.path), w) },
		Publications: opts.publications, CheckHeader: checkHeader}
	if t.dsh != nil {
		popts.Finder = t.dsh
	}
	if opts.BeforePublish != nil {
		src := in.path
		popts.BeforePublish = func() { opts.BeforePublish(src) }
	}
	if p.stage, err = upgrade.Stage(in.path, popts); err != nil {
		p.lock.Release()
		return nil, err
	}
	return p, nil
}

func successorCompression(c Compress, src string) (convlog.Compression, error) {
	switch c {
	case CompressZstd:
		return convlog.Zstd, nil
	case CompressNone:
		return convlog.Plain, nil
	}
	n, ok := convlog.ParseName(filepath.Base(src))
	if !ok {
		return 0, fmt.Errorf("%s: not a log generation name", src)
	}
	return n.Compression, nil
}

// plan returns the successor's path and its estimated size, writing nothing.
func plan(src string, comp convlog.Compression) (string, int64, error) {
	target, err := upgrade.SuccessorPath(src, comp)
	if err != nil {
		return "", 0, err
	}
	r, err := upgrade.Open(src, upgrade.Options{})
	if err != nil {
		return "", 0, err
	}
	defer r.Close()
	buf := r.Header().AppendJSON(nil)
	plain := int64(len(buf)) + 1
	for e, err := range r.Events() {
		if err != nil {
			return "", 0, err
		}
		buf = e.AppendJSON(buf[:0])
		plain += int64(len(buf)) + 1
	}
	if comp == convlog.Plain {
		return target, plain, nil
	}
	// As its source compressed; from a plain one, 3, typical of these logs.
	ratio := 3.0
	if st := r.SourceStats(); r.Compression() == convlog.Zstd && st.FileBytes > 0 && st.PlainBytes > 0 {
		ratio = float64(st.PlainBytes) / float64(st.FileBytes)
	}
	return target, int64(float64(plain) / ratio), nil
}

// discover lists the inputs under root, sorted: logs, layout problems (failed)
// and directories without a log (skipped).
func discover(s *store.Store, root string, jobs int) *tree {
	t := &tree{noun: "logs or invalid layout entries"}
	// A missing root fails here; anything else the walk refuses.
	if _, err := os.Lstat(root); err != nil {
		t.rootErr = fmt.Errorf("sessions root %s: %w", root, err)
		return t
	}
	tree, err := s.Walk()
	if err != nil {
		t.rootErr = err
		return t
	}
	var ins []*input
	rel := func(p string) string { return relTo(root, p) }
	tombstoned := deletions(tree.Conversations, jobs)
	for ci, c := range tree.Conversations {
		if len(c.Logs) == 0 {
			ins = append(ins, &input{rel: rel(c.Path), path: c.Path, version: -1, skip: "no log in this conversation directory"})
			continue
		}
		deleting := tombstoned[ci]
		for _, l := range c.Logs {
			in := &input{rel: rel(l.Path), path: l.Path, version: l.Current.Version, log: &l}
			if deleting {
				// The next reindex would remove what it wrote.
				in.skip = "the conversation is being deleted (a tombstone is recorded); reindex finishes the deletion"
			}
			ins = append(ins, in)
		}
	}
	for _, p := range tree.Problems {
		if p.Kind == store.ItemIgnored {
			continue // other files are not logs and are left alone
		}
		ins = append(ins, &input{rel: rel(p.Path), path: p.Path, version: -1, failure: problemReason(p.Reason)})
	}
	sort.SliceStable(ins, func(i, j int) bool { return ins[i].rel < ins[j].rel })
	for i, in := range ins {
		in.index = i + 1
	}
	t.inputs, t.temps = ins, tree.Temps
	return t
}

// deletions reports, jobs logs at once, which conversations are being deleted.
func deletions(convs []store.ConversationDir, jobs int) []bool {
	out := make([]bool, len(convs))
	sem := make(chan struct{}, max(1, jobs))
	var wg sync.WaitGroup
	for i, c := range convs {
		sem <- struct{}{}
		wg.Go(func() {
			if l := c.ConversationLog(); l != nil {
				info, err := l.ReadConversation()
				out[i] = err == nil && info.Deleting
			}
			<-sem
		})
	}
	wg.Wait()
	return out
}

func problemReason(r string) string {
	switch r {
	case store.ReasonSymlink:
		return "symbolic links are not traversed"
	case store.ReasonFlatLog:
		return "unsupported flat-file layout; expected conversation/log"
	}
	return r
}
