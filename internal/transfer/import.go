package transfer

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/contract"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/progress"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// What --on-conflict does with a store's copy that diverged: refuse the
// import, replace the copy (kept in <data-dir>/replaced/) or skip it.
const (
	ConflictRefuse  = "refuse"
	ConflictReplace = "replace"
	ConflictSkip    = "skip"
)

// Actions of an import plan, one per archived conversation.
const (
	ActionImport    = "import"    // not in the store: placed there
	ActionUpdate    = "update"    // the store's copy is a prefix of the archived one: replaced
	ActionUnchanged = "unchanged" // identical: nothing written
	ActionKeep      = "keep"      // the archived copy is a prefix of the store's: nothing written
	ActionReplace   = "replace"   // diverged, --on-conflict replace: the store's copy moved aside
	ActionSkip      = "skip"      // diverged, --on-conflict skip: the store's copy stays
	ActionConflict  = "conflict"  // diverged and refused: the import writes nothing
)

// CwdMapping is one --map-cwd OLD=NEW: directories at or under From move under To.
type CwdMapping struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// ParseCwdMapping parses OLD=NEW; both must be absolute paths.
func ParseCwdMapping(s string) (CwdMapping, error) {
	from, to, ok := strings.Cut(s, "=")
	if !ok {
		return CwdMapping{}, fmt.Errorf("--map-cwd %s: want OLD=NEW", termtext.Quote(s))
	}
	if !filepath.IsAbs(from) || !filepath.IsAbs(to) {
		return CwdMapping{}, fmt.Errorf("--map-cwd %s: OLD and NEW must be absolute paths", termtext.Quote(s))
	}
	return CwdMapping{From: filepath.Clean(from), To: filepath.Clean(to)}, nil
}

// mapCwd applies the mapping whose From is the longest path-prefix of cwd.
func mapCwd(maps []CwdMapping, cwd string) (string, bool) {
	best := -1
	for i, m := range maps {
		match := cwd == m.From || m.From == "/" && strings.HasPrefix(cwd, "/") ||
			strings.HasPrefix(cwd, m.From+"/")
		if match && (best < 0 || len(m.From) > len(maps[best].From)) {
			best = i
		}
	}
	if best < 0 {
		return cwd, false
	}
	m := maps[best]
	rest := strings.TrimPrefix(strings.TrimPrefix(cwd, m.From), "/")
	return filepath.Join(m.To, rest), true
}

// ImportOptions configure Import.
type ImportOptions struct {
	Archive    string // names the archive in messages (a path, or "-")
	OnConflict string // a Conflict constant ("": ConflictRefuse)
	MapCwd     []CwdMapping
	DryRun     bool // verify and plan; take no lock, write nothing
	// ConfigPath ("": <data-dir>/config.toml) missing is an error when ConfigRequired, else a warning.
	ConfigPath     string
	ConfigRequired bool
	Limits         archive.Limits // zero fields: archive's defaults
	Jobs           int            // parallel strict reads (default: CPUs, at most 16)
	Progress       progress.Progress
	Log            io.Writer // notes: stale stagings removed (nil: none)
}

// ImportResult is what Import found and did.
type ImportResult struct {
	SchemaVersion int       `json:"schemaVersion"`
	Archive       string    `json:"archive"`
	DataDir       string    `json:"dataDir"`
	DryRun        bool      `json:"dryRun"`
	ExportedAt    time.Time `json:"exportedAt"`
	ExportOnline  bool      `json:"exportOnline"`
	ToolVersion   string    `json:"toolVersion"`
	Config        string    `json:"config"`
	ConfigFound   bool      `json:"configFound"` // false: agents and models not checked
	OnConflict    string    `json:"onConflict"`
	// Conversations is the plan, in archive order (fork ancestors first).
	Conversations []ConversationPlan `json:"conversations"`
	Counts        ImportCounts       `json:"counts"`
	// Index is "updated", "built", "unchanged", "failed" (IndexError) or "" on a dry run.
	Index          string `json:"index"`
	IndexError     string `json:"indexError,omitempty"`
	IndexAdvice    string `json:"-"`
	IndexFromReads int    `json:"-"` // session logs indexed from the import's reads
	// Warnings concern the whole import; a conversation's are its Problems.
	Warnings []string `json:"warnings"`
}

// ConversationPlan is what import does with one archived conversation.
type ConversationPlan struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Action string `json:"action"`           // an Action constant
	Detail string `json:"detail,omitempty"` // why (for a conflict: the first difference)
	// Requested: named on the export's command line, else an ancestor of AncestorOf.
	Requested  bool     `json:"requested"`
	AncestorOf []string `json:"ancestorOf"`
	// Cwd is the store's after the import, before --map-cwd records CwdMappedTo.
	Cwd         string   `json:"cwd"`
	CwdMappedTo string   `json:"cwdMappedTo,omitempty"`
	MovedAside  string   `json:"movedAside,omitempty"` // where the store's copy was kept
	Problems    []string `json:"problems"`             // why it will not open on this machine

	dir       string // encoded directory name
	storeCwd  string // cwd-mapped events the store had and the archive lacks: reapplied
	keepAside bool   // the replaced copy is kept (not a plain prefix)
}

// ImportCounts sum up a plan.
type ImportCounts struct {
	Conversations int `json:"conversations"`
	Imported      int `json:"imported"`
	Updated       int `json:"updated"`
	Unchanged     int `json:"unchanged"`
	Kept          int `json:"kept"`
	Replaced      int `json:"replaced"`
	Skipped       int `json:"skipped"`
	Conflicts     int `json:"conflicts"`
	CwdMapped     int `json:"cwdMapped"`
	WillNotOpen   int `json:"willNotOpen"`
}

// Warned reports a conversation that will not open, a skip or a warning (exit 3).
func (r *ImportResult) Warned() bool {
	return len(r.Warnings) > 0 || r.Counts.WillNotOpen > 0 || r.Counts.Skipped > 0
}

// ErrConflict comes with the plan when ConflictRefuse refused: nothing was written.
var ErrConflict = errors.New("conversations in the archive diverged from the store's copies")

// VerifyError is an archive that failed verification.
type VerifyError struct {
	Archive string
	Msg     string
	Err     error
}

func (e *VerifyError) Error() string {
	s := e.Archive + ": " + e.Msg
	switch {
	case e.Msg == "" && e.Err != nil: // an *archive.Error names the archive
		s = e.Err.Error()
	case e.Err != nil:
		s += ": " + e.Err.Error()
	}
	return s + "; nothing was imported"
}

func (e *VerifyError) Unwrap() error { return e.Err }

// Staged is an archive verified into a staging directory of a store,
// ready to be imported (Import) or planned (a dry run). Close removes it.
type Staged struct {
	dataDir string
	// s is Stage's store, read-only; st Import's, locked (nil on a dry run).
	s      *store.Store
	opts   ImportOptions
	stage  *archive.Staging
	m      *Manifest
	convs  []*stagedConv
	byID   map[string]*stagedConv
	mach   *store.Machine
	res    *ImportResult
	st     *store.Store
	staged *store.Store // the archive's, extracted into the staging
	checks *logChecks   // the strict reads of its logs, indexed from

	createdDataDir, placed bool
}

// Stage verifies the archive r into a staging directory of s's data
// directory, so runtime.lock is taken for Import's writing only; a seekable
// r (any r on a dry run) is scanned first, so a hostile archive makes no
// file. Any failure is a *VerifyError.
func Stage(ctx context.Context, r io.Reader, s *store.Store, opts ImportOptions) (_ *Staged, err error) {
	if opts.Progress == nil {
		opts.Progress = progress.Nop{}
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Jobs <= 0 {
		opts.Jobs = min(runtime.NumCPU(), 16)
	}
	switch opts.OnConflict {
	case "":
		opts.OnConflict = ConflictRefuse
	case ConflictRefuse, ConflictReplace, ConflictSkip:
	default:
		return nil, fmt.Errorf("on-conflict %s: want %s, %s or %s", termtext.Quote(opts.OnConflict), ConflictRefuse, ConflictReplace, ConflictSkip)
	}
	for _, m := range opts.MapCwd {
		if !filepath.IsAbs(m.From) || !filepath.IsAbs(m.To) {
			return nil, fmt.Errorf("cwd mapping %s=%s: both must be absolute paths", m.From, m.To)
		}
	}
	dataDir := s.DataDir()
	if opts.ConfigPath == "" {
		opts.ConfigPath = filepath.Join(dataDir, store.ConfigFileName)
	}
	imp := &Staged{dataDir: dataDir, s: s, opts: opts}
	imp.res = &ImportResult{SchemaVersion: contract.Version, Archive: opts.Archive, DataDir: dataDir, DryRun: opts.DryRun,
		Config: opts.ConfigPath, OnConflict: opts.OnConflict, Conversations: []ConversationPlan{}, Warnings: []string{}}

	// A missing default configuration is a warning.
	m, warning, err := store.LoadMachine(opts.ConfigPath, opts.ConfigRequired)
	if err != nil {
		return nil, err
	}
	imp.mach, imp.res.ConfigFound = m, m.Checked()
	if warning != "" {
		imp.warn(warning)
	}

	scanned, err := imp.scan(ctx, r, nil)
	if err != nil {
		return nil, err
	}

	defer func() {
		if err != nil {
			imp.Close()
		}
	}()
	if _, err := os.Lstat(dataDir); errors.Is(err, fs.ErrNotExist) {
		if err := durable.MkdirAll(dataDir); err != nil {
			return nil, err
		}
		imp.createdDataDir = true
	} else if err != nil {
		return nil, err
	}
	if imp.stage, err = archive.NewStaging(dataDir, stagingName); err != nil {
		return nil, err
	}
	if !scanned && opts.DryRun {
		// A dry run extracts a stream from a scanned copy.
		spool, err := durable.CreateExcl(filepath.Join(imp.stage.Dir(), "archive.spool"))
		if err != nil {
			return nil, err
		}
		defer spool.Close()
		if _, err := imp.scan(ctx, r, spool); err != nil {
			return nil, err
		}
		if _, err := spool.Seek(0, io.SeekStart); err != nil {
			return nil, err
		}
		r = spool
	}

	if err := imp.extractAndVerify(ctx, r); err != nil {
		return nil, err
	}
	imp.res.ExportedAt, imp.res.ExportOnline, imp.res.ToolVersion = imp.m.CreatedAt, imp.m.Online, imp.m.ToolVersion
	return imp, nil
}

// Close removes the staging, and the data directory Stage made unless used.
func (imp *Staged) Close() {
	if imp.checks != nil {
		imp.checks.spool.close()
		imp.checks = nil
	}
	if imp.stage != nil {
		imp.stage.Remove()
		imp.stage = nil
	}
	if imp.createdDataDir && !imp.placed && imp.st == nil {
		os.Remove(imp.dataDir) // only when empty again
	}
}

// Import plans, places, maps and indexes the staged conversations into st,
// Stage's store locked exclusively (nil on a dry run: the plan only); the
// plan comes with ErrConflict and ctx's error too.
func (imp *Staged) Import(ctx context.Context, st *store.Store) (res *ImportResult, err error) {
	opts := imp.opts
	if !opts.DryRun {
		if st == nil || !st.Writable() {
			return nil, fmt.Errorf("%s: %w", imp.dataDir, store.ErrReadOnly)
		}
		if st.DataDir() != imp.dataDir {
			return nil, fmt.Errorf("import staged for %s, not %s", imp.dataDir, st.DataDir())
		}
		imp.st = st
		removeStaleStaging(imp.dataDir, imp.stage, opts.Log)
	}

	if err := imp.plan(); err != nil {
		return nil, err
	}
	res = imp.res
	if opts.DryRun {
		return res, nil
	}
	if res.Counts.Conflicts > 0 {
		first := ""
		for _, p := range res.Conversations {
			if p.Action == ActionConflict {
				first = fmt.Sprintf("; the first: %s: %s", p.ID, p.Detail)
				break
			}
		}
		return res, fmt.Errorf("%w: %d conversation(s)%s (use --on-conflict replace or skip); nothing was imported", ErrConflict, res.Counts.Conflicts, first)
	}

	if err := ctx.Err(); err != nil {
		return res, err // interrupted before anything was placed
	}
	imp.placed = true
	changed, err := imp.placeAll()
	if err != nil {
		return res, err
	}
	// The plan's memory goes before the index is written.
	imp.convs, imp.byID, imp.m, imp.staged = nil, nil, nil, nil
	imp.updateIndex(ctx, changed)
	if err := ctx.Err(); err != nil && res.Index != "built" && res.Index != "updated" {
		// Interrupted while the index was written: a rerun finishes it.
		return res, err
	}
	return res, nil
}

// scan checks the archive through and seeks back; false for a stream without a spool.
func (imp *Staged) scan(ctx context.Context, r io.Reader, spool io.Writer) (bool, error) {
	var start int64 = -1
	if rs, ok := r.(io.Seeker); ok {
		if pos, err := rs.Seek(0, io.SeekCurrent); err == nil {
			start = pos
		}
	}
	if start < 0 && spool == nil {
		return false, nil
	}
	// The data directory, or where it is to be made.
	dir := imp.dataDir
	for {
		if _, err := os.Stat(dir); err == nil || filepath.Dir(dir) == dir {
			break
		}
		dir = filepath.Dir(dir)
	}
	err := manifestFormat.Scan(ctx, r, dir, spool, archive.ExtractOptions{ReaderOptions: imp.readerOptions(), SpaceName: imp.dataDir})
	if err != nil {
		return false, imp.archiveErr(err)
	}
	if spool != nil {
		return true, nil
	}
	if _, err := r.(io.Seeker).Seek(start, io.SeekStart); err != nil {
		return false, fmt.Errorf("%s: back to its start after a first reading: %w", imp.opts.Archive, err)
	}
	return true, nil
}

func (imp *Staged) warn(msg string) {
	imp.res.Warnings = append(imp.res.Warnings, msg)
}

// plan compares every archived conversation with the store and checks it.
func (imp *Staged) plan() error {
	res := imp.res
	c := &res.Counts
	count := map[string]*int{ActionImport: &c.Imported, ActionUpdate: &c.Updated, ActionUnchanged: &c.Unchanged,
		ActionKeep: &c.Kept, ActionReplace: &c.Replaced, ActionSkip: &c.Skipped, ActionConflict: &c.Conflicts}
	for _, sc := range imp.convs {
		p := ConversationPlan{ID: sc.id, Title: sc.info.Title, Requested: sc.m.Requested,
			AncestorOf: nonNil(sc.m.AncestorOf), dir: sc.dir.Name, Problems: []string{}}
		if err := imp.classify(sc, &p); err != nil {
			return err
		}
		// The conversation as the store will have it.
		info := sc.info
		if !p.writes() {
			if si, err := imp.s.ReadConversation(sc.id); err == nil {
				info = si
			}
		}
		p.Title = info.Title
		p.Cwd = info.Cwd
		if p.storeCwd != "" {
			p.Cwd = p.storeCwd
		}
		if p.Action != ActionSkip && p.Action != ActionConflict {
			if to, ok := mapCwd(imp.opts.MapCwd, p.Cwd); ok && to != p.Cwd {
				p.CwdMappedTo = to
			}
		}
		imp.check(info, &p)
		(*count[p.Action])++
		if p.CwdMappedTo != "" {
			res.Counts.CwdMapped++
		}
		if len(p.Problems) > 0 {
			res.Counts.WillNotOpen++
		}
		res.Conversations = append(res.Conversations, p)
	}
	res.Counts.Conversations = len(res.Conversations)
	return nil
}

// check lists why the conversation will not open here; the archive's count as present.
func (imp *Staged) check(info *store.ConversationInfo, p *ConversationPlan) {
	n := store.NeedsOf(info)
	n.Cwd = p.Cwd
	if p.CwdMappedTo != "" {
		n.Cwd = p.CwdMappedTo
	}
	p.Problems = append(p.Problems, imp.mach.Check(n, func(id string) bool {
		if imp.byID[id] != nil {
			return true
		}
		dp, err := imp.s.ConversationPath(id)
		if err != nil {
			return false
		}
		_, err = os.Lstat(dp)
		return err == nil
	})...)
}

// placeAll places the conversations in archive order (ancestors first),
// then records the --map-cwd mappings and reapplies the store's own to the
// copies that replaced it; it returns the conversations changed.
func (imp *Staged) placeAll() (changed []string, err error) {
	// A new conversation's rename is made durable by the next fsync of
	// conversations/; a crash before it loses renames a rerun makes again.
	unsynced := false
	for i := range imp.res.Conversations {
		p := &imp.res.Conversations[i]
		if !p.writes() {
			continue
		}
		synced, err := imp.place(p)
		if err != nil {
			if unsynced {
				durable.SyncDir(imp.st.ConversationsDir()) // what was placed stays placed
			}
			return nil, fmt.Errorf("conversation %s: %w", termtext.Quote(p.ID), err)
		}
		unsynced = !synced
	}
	if unsynced {
		if err := durable.SyncDir(imp.st.ConversationsDir()); err != nil {
			return nil, err
		}
	}
	for i := range imp.res.Conversations {
		p := &imp.res.Conversations[i]
		if p.storeCwd != "" && p.Action == ActionUpdate {
			if err := imp.st.MapCwd(p.ID, p.storeCwd); err != nil {
				return nil, fmt.Errorf("conversation %s: reapply its working directory %s: %w", termtext.Quote(p.ID), p.storeCwd, err)
			}
		}
		if p.CwdMappedTo != "" {
			if err := imp.st.MapCwd(p.ID, p.CwdMappedTo); err != nil {
				return nil, fmt.Errorf("conversation %s: map its working directory to %s: %w", termtext.Quote(p.ID), p.CwdMappedTo, err)
			}
		}
		if p.writes() || p.CwdMappedTo != "" {
			changed = append(changed, p.ID)
		}
	}
	return changed, nil
}

// writes reports whether the plan puts the archived copy in the store.
func (p *ConversationPlan) writes() bool {
	return p.Action == ActionImport || p.Action == ActionUpdate || p.Action == ActionReplace
}

// place puts one staged conversation in the store: an updated copy there is
// removed, a replaced one kept aside; synced: conversations/ was fsynced.
func (imp *Staged) place(p *ConversationPlan) (synced bool, err error) {
	from, err := imp.staged.ConversationPath(p.ID)
	if err != nil {
		return false, err
	}
	aside, err := imp.st.PlaceConversation(p.ID, from)
	if err != nil || aside == "" {
		return false, err
	}
	if p.Action == ActionUpdate && !p.keepAside {
		// Renamed into the staging first, so a kill while it is removed
		// leaves no partial copy in replaced/.
		trash := filepath.Join(imp.stage.Dir(), "updated-"+p.dir)
		if err := os.Rename(aside, trash); err != nil {
			return true, err
		}
		replaced := filepath.Dir(aside)
		if err := durable.SyncDir(replaced); err != nil {
			return true, err
		}
		os.Remove(replaced) // only when empty
		return true, os.RemoveAll(trash)
	}
	p.MovedAside = aside
	return true, nil
}

// updateIndex updates metadata.db for the conversations changed, their
// dependents, and archived ones a killed import left stale.
func (imp *Staged) updateIndex(ctx context.Context, changed []string) {
	res := imp.res
	path := imp.st.IndexPath()
	fail := func(err error) {
		res.Index, res.IndexError, res.IndexAdvice = "failed", err.Error(), index.UpdateAdvice(err)
		imp.warn(fmt.Sprintf("metadata.db was not updated (%v): run %s", err, res.IndexAdvice))
	}
	db, err := index.Open(path)
	var ve *index.VersionError
	if errors.Is(err, fs.ErrNotExist) || errors.As(err, &ve) && ve.Older() {
		imp.buildIndex(ctx, fail)
		return
	}
	if err != nil {
		if len(changed) == 0 {
			res.Index = "unchanged" // nothing to write: reindex reports the index
			return
		}
		fail(err)
		return
	}
	defer db.Close()
	var others []string
	for _, p := range res.Conversations {
		if !slices.Contains(changed, p.ID) {
			others = append(others, p.ID)
		}
	}
	stale, err := reindex.Stale(ctx, db, imp.st, others)
	if err != nil && len(changed) > 0 {
		fail(err)
		return
	}
	changed = append(changed, stale...)
	if len(changed) == 0 {
		res.Index = "unchanged"
		return
	}
	// The dependents first: the changed rows stay stale, for a rerun to
	// find, until every row depending on them is updated.
	for _, id := range append(dependentsOf(ctx, db, imp.st, changed), changed...) { // each once
		ur, err := reindex.Update(ctx, db, imp.st, id, reindex.UpdateOptions{Machine: imp.mach, Prereads: imp.prereads()})
		if err != nil {
			fail(err)
			return
		}
		res.IndexFromReads += ur.FromPrereads
	}
	if err := db.Close(); err != nil {
		fail(err)
		return
	}
	res.Index = "updated"
}

func (imp *Staged) buildIndex(ctx context.Context, fail func(error)) {
	rr, err := reindex.Run(ctx, imp.st, reindex.Options{Jobs: imp.opts.Jobs, Machine: imp.mach, Prereads: imp.prereads()})
	if err != nil {
		fail(err)
		return
	}
	imp.res.Index, imp.res.IndexFromReads = "built", rr.FromPrereads
	if n := len(rr.Skipped); n > 0 {
		imp.warn(fmt.Sprintf("metadata.db was built, but %d item(s) of the store were skipped, as reindex skips them; the first: %s: %s",
			n, rr.Skipped[0].Path, rr.Skipped[0].Reason))
	}
}

// prereads looks up the strict read of a placed log by its path.
func (imp *Staged) prereads() reindex.Prereads {
	if imp.checks == nil || imp.checks.spool == nil {
		return nil
	}
	root := imp.st.DataDir()
	return func(p string) *reindex.Preread {
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return nil
		}
		return imp.checks.preread(filepath.ToSlash(rel))
	}
}

// dependentsOf lists the others depending on ids, from their rows where any
// (fork sources never change).
func dependentsOf(ctx context.Context, db *index.DB, s *store.Store, ids []string) []string {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	tree, err := s.Walk()
	if err != nil {
		return nil
	}
	stored, err := db.Stored(ctx)
	if err != nil {
		stored = nil // every conversation log is read instead
	}
	dependsOnWanted := func(sources []string) bool {
		return slices.ContainsFunc(sources, func(d string) bool { return want[d] })
	}
	var out []string
	for _, c := range tree.Conversations {
		if want[c.ID] {
			continue
		}
		if st, ok := stored[c.ID]; ok && !st.Skipped {
			if dependsOnWanted(st.ForkSources) {
				out = append(out, c.ID)
			}
			continue
		}
		if l := c.ConversationLog(); l != nil {
			if info, err := l.ReadConversation(); err == nil && dependsOnWanted(store.Dependencies(info)) {
				out = append(out, c.ID)
			}
		}
	}
	sort.Strings(out)
	return out
}

// stagingName is in the data directory, so conversations move in by rename.
var stagingName = "." + store.ConversationsDirName + ".import"

// removeStaleStaging: the caller holds runtime.lock.
func removeStaleStaging(dataDir string, own *archive.Staging, log io.Writer) {
	for _, s := range archive.SweepStaging(dataDir, stagingName, own, archive.UnlockedStagingAge) {
		if s.Err != nil {
			fmt.Fprintf(log, "convkit: could not remove %s: %v\n", s.Path, s.Err)
		} else {
			fmt.Fprintf(log, "convkit: removed %s, left by an interrupted import\n", s.Path)
		}
	}
}

// msgSpool keeps the message text an import's reads collect for the index
// in a file of the staging, so the text of a large archive is never held.
type msgSpool struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	end int64
	err error // the first, after which nothing is kept
}

func newMsgSpool(dir string) *msgSpool {
	s := &msgSpool{}
	if s.f, s.err = durable.CreateExcl(filepath.Join(dir, "messages.spool")); s.err == nil {
		s.w = bufio.NewWriterSize(s.f, 1<<20)
	}
	return s
}

// put stores the messages of one session and returns what loads them back.
func (s *msgSpool) put(msgs []index.Message) (func() ([]index.Message, error), error) {
	if len(msgs) == 0 {
		return func() ([]index.Message, error) { return nil, nil }, nil
	}
	sessionID := msgs[0].SessionID
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(msgs)))
	for _, m := range msgs {
		b = binary.AppendVarint(b, m.Seq)
		b = binary.AppendUvarint(b, uint64(len(m.Role)))
		b = append(b, m.Role...)
		b = binary.AppendUvarint(b, uint64(len(m.Text)))
		b = append(b, m.Text...)
	}
	s.mu.Lock()
	off := s.end
	if s.err == nil {
		_, s.err = s.w.Write(b)
	}
	s.end += int64(len(b))
	err := s.err
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	n := len(b)
	return func() ([]index.Message, error) { return s.get(sessionID, off, n) }, nil
}

var errSpool = errors.New("message spool: malformed record")

func (s *msgSpool) get(sessionID string, off int64, n int) ([]index.Message, error) {
	s.mu.Lock()
	if s.err == nil && s.w.Buffered() > 0 {
		s.err = s.w.Flush()
	}
	err := s.err
	s.mu.Unlock()
	b := make([]byte, n)
	if err == nil {
		_, err = s.f.ReadAt(b, off)
	}
	if err != nil {
		return nil, fmt.Errorf("message spool: %w", err)
	}
	count, k := binary.Uvarint(b)
	if k <= 0 || count > uint64(n) {
		return nil, errSpool
	}
	b = b[k:]
	msgs := make([]index.Message, 0, count)
	str := func() (string, bool) {
		l, k := binary.Uvarint(b)
		if k <= 0 || l > uint64(len(b)-k) {
			return "", false
		}
		v := string(b[k : k+int(l)])
		b = b[k+int(l):]
		return v, true
	}
	for range count {
		seq, k := binary.Varint(b)
		if k <= 0 {
			return nil, errSpool
		}
		b = b[k:]
		role, ok1 := str()
		text, ok2 := str()
		if !ok1 || !ok2 {
			return nil, errSpool
		}
		msgs = append(msgs, index.Message{SessionID: sessionID, Seq: seq, Role: role, Text: text})
	}
	if len(b) != 0 {
		return nil, errSpool
	}
	return msgs, nil
}

func (s *msgSpool) close() {
	if s != nil && s.f != nil {
		s.f.Close()
	}
}
