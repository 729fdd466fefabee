package transfer

import (
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

// What --on-conflict says to do with a conversation that exists in the
// store and diverged from the archived one.
const (
	// ConflictRefuse refuses the whole import (the default).
	ConflictRefuse = "refuse"
	// ConflictReplace moves the store's copy aside, into
	// <data-dir>/replaced/ (store.PlaceConversation), and imports the
	// archived one.
	ConflictReplace = "replace"
	// ConflictSkip keeps the store's copy and imports the rest.
	ConflictSkip = "skip"
)

// Actions of an import plan, one per archived conversation.
const (
	// ActionImport: not in the store; it is placed there.
	ActionImport = "import"
	// ActionUpdate: the store's copy is a byte-prefix of the archived one
	// (the archive is newer); it is replaced, and removed.
	ActionUpdate = "update"
	// ActionUnchanged: the store's copy is identical; nothing is written.
	ActionUnchanged = "unchanged"
	// ActionKeep: the archived copy is a byte-prefix of the store's (the
	// store is newer); nothing is written.
	ActionKeep = "keep"
	// ActionReplace: diverged, --on-conflict replace: the store's copy is
	// moved aside and kept, the archived one placed.
	ActionReplace = "replace"
	// ActionSkip: diverged, --on-conflict skip: the store's copy stays.
	ActionSkip = "skip"
	// ActionConflict: diverged and refused: the import writes nothing.
	ActionConflict = "conflict"
)

// CwdMapping is one --map-cwd OLD=NEW: working directories at or under
// From are recorded as the same place under To.
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

// mapCwd applies the mapping whose From is the longest match of cwd (at a
// path component boundary); ok is false when none applies.
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
	// Archive names the archive in messages (a path, or "-").
	Archive string
	// OnConflict is ConflictRefuse (also ""), ConflictReplace or
	// ConflictSkip.
	OnConflict string
	// MapCwd are the --map-cwd mappings.
	MapCwd []CwdMapping
	// DryRun verifies and plans, takes no lock and writes nothing.
	DryRun bool
	// ConfigPath is the runtime configuration to check agents and models
	// against (see ConfigPath). A missing file is an error when
	// ConfigRequired, else a warning that they were not checked. ""
	// means <data-dir>/config.toml, not required.
	ConfigPath     string
	ConfigRequired bool
	// Limits bound the extraction. Zero fields take archive's defaults;
	// the extraction is also bounded by the free space of the data
	// directory's file system less archive.FreeReserve.
	Limits archive.Limits
	// Jobs bounds the parallel strict reads of the archived logs
	// (default: CPUs, at most 16).
	Jobs int
	// Progress counts the archive's bytes as they are extracted.
	Progress progress.Progress
	// Log receives notes as they happen: stale staging directories
	// removed, the index state (nil: nothing).
	Log io.Writer
	// spoolMemory overrides defaultSpoolMemory (0: the default).
	spoolMemory int
}

// ImportResult is what Import found and did.
type ImportResult struct {
	SchemaVersion int    `json:"schemaVersion"`
	Archive       string `json:"archive"`
	DataDir       string `json:"dataDir"`
	DryRun        bool   `json:"dryRun"`
	// From the manifest: when and by what the archive was written.
	ExportedAt   time.Time `json:"exportedAt"`
	ExportOnline bool      `json:"exportOnline"`
	ToolVersion  string    `json:"toolVersion"`
	// Config is the runtime configuration agents and models were checked
	// against; ConfigFound false when it does not exist (they were not
	// checked).
	Config      string `json:"config"`
	ConfigFound bool   `json:"configFound"`
	OnConflict  string `json:"onConflict"`
	// Conversations is the plan, in archive order (fork ancestors first).
	Conversations []ConversationPlan `json:"conversations"`
	Counts        ImportCounts       `json:"counts"`
	// Index: "updated" (the imported conversations' rows were updated in
	// metadata.db), "built" (there was none, or one of an older convkit:
	// it was rebuilt from every log of the store, as reindex does),
	// "unchanged" (nothing was written), "failed" (IndexError says why,
	// IndexAdvice what to run) or "" on a dry run.
	Index      string `json:"index"`
	IndexError string `json:"indexError,omitempty"`
	// IndexAdvice says how a failed index is brought up to date
	// (index.UpdateAdvice). Not part of the JSON report.
	IndexAdvice string `json:"-"`
	// IndexFromReads counts the session logs the index took from the
	// import's strict reads rather than read again (reindex.Preread). Not
	// part of the JSON report.
	IndexFromReads int `json:"-"`
	// Warnings are problems that concern the whole import (no runtime
	// configuration, the index not updated). Those of a conversation are
	// in its Problems.
	Warnings []string `json:"warnings"`
}

// ConversationPlan is what import does with one archived conversation.
type ConversationPlan struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	// Action is one of the Action constants; Detail says why (for a
	// conflict: the first difference).
	Action string `json:"action"`
	Detail string `json:"detail,omitempty"`
	// Requested: named on the export's command line; otherwise exported
	// as a fork ancestor of AncestorOf.
	Requested  bool     `json:"requested"`
	AncestorOf []string `json:"ancestorOf"`
	// Cwd is the working directory the conversation has in the store
	// after the import (before any mapping); CwdMappedTo the one --map-cwd
	// records, "" when none applies.
	Cwd         string `json:"cwd"`
	CwdMappedTo string `json:"cwdMappedTo,omitempty"`
	// MovedAside is where the store's previous copy was kept.
	MovedAside string `json:"movedAside,omitempty"`
	// Problems say why the conversation will not open on this machine
	// (missing working directory, agent, model or fork source); [] when
	// it will.
	Problems []string `json:"problems"`

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

// Warned reports whether the import has something to warn about: a
// conversation that will not open, a conflict skipped, a general warning.
// The CLI exits 3 then.
func (r *ImportResult) Warned() bool {
	return len(r.Warnings) > 0 || r.Counts.WillNotOpen > 0 || r.Counts.Skipped > 0
}

// Changed reports whether the import wrote (or, on a dry run, would
// write) anything to the store.
func (r *ImportResult) Changed() bool {
	c := r.Counts
	return c.Imported+c.Updated+c.Replaced+c.CwdMapped > 0
}

// ErrConflict is returned (with the plan) when conversations diverged and
// OnConflict is ConflictRefuse: nothing was written.
var ErrConflict = errors.New("conversations in the archive diverged from the store's copies")

// VerifyError is an archive that failed verification: nothing was
// written to the store.
type VerifyError struct {
	Archive string
	Msg     string
	Err     error
}

func (e *VerifyError) Error() string {
	var s string
	switch {
	case e.Msg == "" && e.Err != nil: // an *archive.Error names the archive
		s = e.Err.Error()
	case e.Err != nil:
		s = e.Archive + ": " + e.Msg + ": " + e.Err.Error()
	default:
		s = e.Archive + ": " + e.Msg
	}
	return s + "; nothing was imported"
}

func (e *VerifyError) Unwrap() error { return e.Err }

// importer is one import run.
type importer struct {
	dataDir string
	// s is the store as Stage was given it, read-only; st the same store
	// opened exclusively to write, as Import is given it (nil on a dry
	// run).
	s     *store.Store
	opts  ImportOptions
	stage *archive.Staging
	m     *Manifest
	convs []*stagedConv
	byID  map[string]*stagedConv
	mach  *store.Machine
	res   *ImportResult
	st    *store.Store
	// staged is the store extracted from the archive, in staging.
	staged *store.Store
	// checks are the strict reads of the extracted logs, which the index
	// is built from.
	checks *logChecks
}

// Staged is an archive verified into a staging directory of a store,
// ready to be imported (Import) or planned (a dry run). Close removes it.
type Staged struct {
	imp            *importer
	createdDataDir bool
	placed         bool
}

// Stage verifies the archive read from r for an import into the store s
// (opened read-only; docs/TRANSFER.md) without writing to the store. A
// seekable r, or any r on a dry run, is first scanned (scan) so a hostile archive is
// refused before a file is made; then it is extracted into a private
// staging directory in the data directory, every entry checked against
// the manifest and every log read strictly. Any failure is a *VerifyError.
// The caller then takes runtime.lock and calls Import, so the runtime
// waits for the writing only.
func Stage(ctx context.Context, r io.Reader, s *store.Store, opts ImportOptions) (_ *Staged, err error) {
	if opts.Progress == nil {
		opts.Progress = progress.Nop{}
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Jobs <= 0 {
		opts.Jobs = min(max(1, cpus()), 16)
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
	imp := &importer{dataDir: dataDir, s: s, opts: opts}
	imp.res = &ImportResult{SchemaVersion: contract.Version, Archive: opts.Archive, DataDir: dataDir, DryRun: opts.DryRun,
		Config: opts.ConfigPath, OnConflict: opts.OnConflict, Conversations: []ConversationPlan{}, Warnings: []string{}}

	// An explicitly named configuration must be there before anything
	// is read.
	if err := imp.loadConfig(); err != nil {
		return nil, err
	}

	scanned, err := imp.scan(ctx, r, nil)
	if err != nil {
		return nil, err
	}

	staged := &Staged{imp: imp}
	defer func() {
		if err != nil {
			staged.Close()
		}
	}()
	if _, err := os.Lstat(dataDir); errors.Is(err, fs.ErrNotExist) {
		if err := durable.MkdirAll(dataDir); err != nil {
			return nil, err
		}
		staged.createdDataDir = true
	} else if err != nil {
		return nil, err
	}
	if imp.stage, err = newStaging(dataDir); err != nil {
		return nil, err
	}
	if !scanned && opts.DryRun {
		// A stream is scanned as it is copied into the staging directory,
		// then extracted from the copy: a dry run makes no entry of a
		// hostile archive. An import extracts as the stream comes.
		spool, err := os.CreateTemp(imp.stage.Dir(), "archive-")
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

	// 1. Verify.
	if err := imp.extractAndVerify(ctx, r); err != nil {
		return nil, err
	}
	imp.res.ExportedAt, imp.res.ExportOnline, imp.res.ToolVersion = imp.m.CreatedAt, imp.m.Online, imp.m.ToolVersion
	return staged, nil
}

// Close removes the staging directory, and the data directory Stage made
// for it when nothing was imported into it.
func (sg *Staged) Close() {
	imp := sg.imp
	if imp.checks != nil {
		imp.checks.spool.close()
		imp.checks = nil
	}
	if imp.stage != nil {
		imp.stage.Remove()
		imp.stage = nil
	}
	if sg.createdDataDir && !sg.placed && imp.st == nil {
		os.Remove(imp.dataDir) // only when empty again
	}
}

// Import compares each staged conversation with the store's copy and
// checks whether it will open here, then puts each in place
// (store.PlaceConversation), records --map-cwd as cwd-mapped events and
// updates metadata.db. st is the store Stage was given, locked
// exclusively by the caller; on a dry run st is nil and, as on
// ErrConflict, only the plan is returned. The result comes with
// ErrConflict and with ctx's error too, so the plan can be shown.
func (sg *Staged) Import(ctx context.Context, st *store.Store) (res *ImportResult, err error) {
	imp := sg.imp
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

	// 3. Compare and check.
	if err := imp.plan(); err != nil {
		return nil, err
	}
	res = imp.res
	if opts.DryRun {
		return res, nil
	}
	if res.Counts.Conflicts > 0 {
		// Name the first conversation and where it diverged: the error
		// alone (stderr) must say what is at fault.
		first := ""
		for _, p := range res.Conversations {
			if p.Action == ActionConflict {
				first = fmt.Sprintf("; the first: %s: %s", p.ID, p.Detail)
				break
			}
		}
		return res, fmt.Errorf("%w: %d conversation(s)%s (use --on-conflict replace or skip); nothing was imported", ErrConflict, res.Counts.Conflicts, first)
	}

	// 5. Place, map, index.
	if err := ctx.Err(); err != nil {
		return res, err // interrupted before anything was placed
	}
	sg.placed = true
	if err := imp.placeAll(); err != nil {
		return res, err
	}
	changed, err := imp.applyMappings()
	if err != nil {
		return res, err
	}
	// What was kept of the archive for the plan is not needed by the
	// index: it goes before the index is written.
	imp.convs, imp.byID, imp.m, imp.staged = nil, nil, nil, nil
	imp.updateIndex(ctx, changed)
	if err := ctx.Err(); err != nil && res.Index != "built" && res.Index != "updated" {
		// Interrupted while the index was written: unfinished, and a
		// rerun brings the index up to date.
		return res, err
	}
	return res, nil
}

// scan reads the archive through with manifestFormat.Scan, then goes back
// to where it started when r can; false for a stream that cannot (a pipe),
// which is not read unless spool is given to copy it into.
func (imp *importer) scan(ctx context.Context, r io.Reader, spool io.Writer) (bool, error) {
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
		var ae *archive.Error
		if errors.As(err, &ae) {
			return false, &VerifyError{Archive: imp.opts.Archive, Err: err}
		}
		return false, err
	}
	if spool != nil {
		return true, nil
	}
	if _, err := r.(io.Seeker).Seek(start, io.SeekStart); err != nil {
		return false, fmt.Errorf("%s: back to its start after a first reading: %w", imp.opts.Archive, err)
	}
	return true, nil
}

// loadConfig reads the runtime configuration; a missing default file is a
// warning.
func (imp *importer) loadConfig() error {
	m, warning, err := store.LoadMachine(imp.opts.ConfigPath, imp.opts.ConfigRequired)
	if err != nil {
		return err
	}
	imp.mach = m
	imp.res.ConfigFound = m.Checked()
	if warning != "" {
		imp.warn(warning)
	}
	return nil
}

func (imp *importer) warn(msg string) {
	imp.res.Warnings = append(imp.res.Warnings, msg)
}

// plan compares every archived conversation with the store and checks it.
func (imp *importer) plan() error {
	res := imp.res
	for _, sc := range imp.convs {
		p := ConversationPlan{ID: sc.id, Title: sc.info.Title, Requested: sc.m.Requested,
			AncestorOf: nonNil(sc.m.AncestorOf), dir: sc.dir.Name, Problems: []string{}}
		if err := imp.classify(sc, &p); err != nil {
			return err
		}
		// The conversation as the store will have it.
		info := sc.info
		if p.Action == ActionUnchanged || p.Action == ActionKeep || p.Action == ActionSkip || p.Action == ActionConflict {
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
		switch p.Action {
		case ActionImport:
			res.Counts.Imported++
		case ActionUpdate:
			res.Counts.Updated++
		case ActionUnchanged:
			res.Counts.Unchanged++
		case ActionKeep:
			res.Counts.Kept++
		case ActionReplace:
			res.Counts.Replaced++
		case ActionSkip:
			res.Counts.Skipped++
		case ActionConflict:
			res.Counts.Conflicts++
		}
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

// check lists why the conversation will not open here, by the rules of
// store.Machine: its working directory (as mapped), its agents and
// models, its fork sources (in the archive or in the store).
func (imp *importer) check(info *store.ConversationInfo, p *ConversationPlan) {
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

// placeAll puts every imported conversation directory in place, in
// archive order (fork ancestors first).
func (imp *importer) placeAll() error {
	convDir := imp.st.ConversationsDir()
	// A new conversation's rename is made durable with the next fsync of
	// conversations/: PlaceConversation's of an update or a replace, or
	// the one after the last; until then a crash loses only renames the
	// rerun makes again.
	unsynced := false
	for i := range imp.res.Conversations {
		p := &imp.res.Conversations[i]
		switch p.Action {
		case ActionImport, ActionUpdate, ActionReplace:
		default:
			continue
		}
		synced, err := imp.place(p)
		if err != nil {
			if unsynced {
				durable.SyncDir(convDir) // what was placed stays placed
			}
			return fmt.Errorf("conversation %s: %w", termtext.Quote(p.ID), err)
		}
		unsynced = !synced
	}
	if unsynced {
		return durable.SyncDir(convDir)
	}
	return nil
}

// place puts one staged conversation directory in the store; the store
// moves a copy already there aside first, into <data-dir>/replaced/, so
// a crash at any moment leaves the old copy either in place or kept aside.
// An updated copy (a byte-prefix of the new one) is then removed; a
// replaced one is kept. synced: conversations/ was synced after the
// rename (PlaceConversation moved a copy aside).
func (imp *importer) place(p *ConversationPlan) (synced bool, err error) {
	from, err := imp.staged.ConversationPath(p.ID)
	if err != nil {
		return false, err
	}
	aside, err := imp.st.PlaceConversation(p.ID, from)
	if err != nil || aside == "" {
		return false, err
	}
	if p.Action == ActionUpdate && !p.keepAside {
		// Every byte of the old copy is in the new one. It goes into the
		// staging directory first, in one rename: a kill while it is being
		// removed leaves no partial copy in replaced/, and the next import
		// removes the staging directory.
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

// applyMappings records the working directory mappings, and reapplies the
// store's own mappings to the copies that replaced it. It returns the
// conversations whose logs changed.
func (imp *importer) applyMappings() ([]string, error) {
	var changed []string
	for i := range imp.res.Conversations {
		p := &imp.res.Conversations[i]
		wrote := false
		switch p.Action {
		case ActionImport, ActionUpdate, ActionReplace:
			wrote = true
		}
		if p.storeCwd != "" && p.Action == ActionUpdate {
			if err := imp.st.MapCwd(p.ID, p.storeCwd); err != nil {
				return changed, fmt.Errorf("conversation %s: reapply its working directory %s: %w", termtext.Quote(p.ID), p.storeCwd, err)
			}
		}
		if p.CwdMappedTo != "" {
			if err := imp.st.MapCwd(p.ID, p.CwdMappedTo); err != nil {
				return changed, fmt.Errorf("conversation %s: map its working directory to %s: %w", termtext.Quote(p.ID), p.CwdMappedTo, err)
			}
			wrote = true
		}
		if wrote {
			changed = append(changed, p.ID)
		}
	}
	return changed, nil
}

// updateIndex brings metadata.db up to date for the conversations that
// changed and for those in the store that read older history from them
// (a fork whose source just arrived can now be indexed), and for archived
// conversations whose rows a killed import left stale.
func (imp *importer) updateIndex(ctx context.Context, changed []string) {
	res := imp.res
	path := imp.st.IndexPath()
	fail := func(err error) {
		res.Index, res.IndexError, res.IndexAdvice = "failed", err.Error(), index.UpdateAdvice(err)
		imp.warn(fmt.Sprintf("metadata.db was not updated (%v): run %s", err, res.IndexAdvice))
	}
	db, err := index.Open(path)
	var ve *index.VersionError
	if errors.Is(err, fs.ErrNotExist) || errors.As(err, &ve) && ve.Older() {
		// No index yet (a new store, say), or one of an older convkit:
		// built from every log, as reindex does, under the lock import
		// holds; list then reads it.
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
	// A killed import may have placed conversations without updating
	// their rows, so the archived conversations' rows are checked too.
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
	// The dependents first: the changed rows stay stale, and a rerun finds
	// them, until every row depending on them is updated too.
	ids := dependentsOf(ctx, db, imp.st, changed)
	ids = append(ids, changed...)
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
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

// buildIndex builds metadata.db from the store's logs (reindex.Run). What
// the build skipped is a warning.
func (imp *importer) buildIndex(ctx context.Context, fail func(error)) {
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

// prereads looks up the strict read of a log placed in the store by its
// path there: the archive's entry name is its path relative to the data
// directory.
func (imp *importer) prereads() reindex.Prereads {
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

// dependentsOf lists the store's conversations, outside ids, that depend
// on any of ids, from their rows in db (fork sources never change); only
// conversations without a row, or skipped, have their logs read.
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
		for _, l := range c.Logs {
			if !l.IsConversationLog {
				continue
			}
			info, err := l.ReadConversation()
			if err == nil && dependsOnWanted(store.Dependencies(info)) {
				out = append(out, c.ID)
			}
			break
		}
	}
	sort.Strings(out)
	return out
}

func cpus() int { return runtime.NumCPU() }

// stagingName is the archive.Staging prefix of an import, in the data
// directory so conversations move into the store by rename; it is made
// before runtime.lock is taken, so an unlocked one is swept only when an
// hour old.
var stagingName = "." + store.ConversationsDirName + ".import"

func newStaging(dataDir string) (*archive.Staging, error) {
	return archive.NewStaging(dataDir, stagingName)
}

// removeStaleStaging removes the staging directories of imports that are
// no longer running (killed): their lock is free. The caller holds
// runtime.lock.
func removeStaleStaging(dataDir string, own *archive.Staging, log io.Writer) {
	for _, s := range archive.SweepStaging(dataDir, stagingName, own, archive.UnlockedStagingAge) {
		if s.Err != nil {
			fmt.Fprintf(log, "convkit: could not remove %s: %v\n", s.Path, s.Err)
		} else {
			fmt.Fprintf(log, "convkit: removed %s, left by an interrupted import\n", s.Path)
		}
	}
}

// msgSpool keeps the message text an import's strict reads collect for
// the index: up to memory bytes in memory, the rest in a file of the
// staging directory, so memory does not grow with the archive.
type msgSpool struct {
	dir    string
	memory int
	mu     sync.Mutex
	// mem are chunks of spoolChunk bytes, filled in turn; records that do
	// not fit in one go to the file.
	mem [][]byte
	f   *os.File
	end int64
	err error
}

// defaultSpoolMemory is how much message text an import keeps in memory
// for its index before it spools the rest to a file, in chunks of
// spoolChunk.
const defaultSpoolMemory = 8 << 20

const spoolChunk = 512 << 10

// newMsgSpool starts a spool in dir that keeps up to memory bytes in
// memory (0: defaultSpoolMemory).
func newMsgSpool(dir string, memory int) *msgSpool {
	if memory <= 0 {
		memory = defaultSpoolMemory
	}
	return &msgSpool{dir: dir, memory: memory}
}

// write stores b and says where: in memory chunk chunk at off, or in the
// file at off (chunk -1).
func (s *msgSpool) write(b []byte) (chunk int, off int64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return -1, 0, s.err
	}
	if len(b) <= spoolChunk {
		n := len(s.mem)
		if n == 0 || len(s.mem[n-1])+len(b) > spoolChunk {
			if (n+1)*spoolChunk <= s.memory {
				s.mem = append(s.mem, make([]byte, 0, spoolChunk))
				n++
			}
		}
		if n > 0 && len(s.mem[n-1])+len(b) <= spoolChunk {
			off = int64(len(s.mem[n-1]))
			s.mem[n-1] = append(s.mem[n-1], b...)
			return n - 1, off, nil
		}
	}
	if s.f == nil {
		if s.f, s.err = durable.CreateExcl(filepath.Join(s.dir, "messages.spool")); s.err != nil {
			return -1, 0, s.err
		}
	}
	off = s.end
	if _, s.err = s.f.WriteAt(b, off); s.err != nil {
		return -1, 0, s.err
	}
	s.end += int64(len(b))
	return -1, off, nil
}

// put appends the messages of one session (all of one session id) and
// returns what loads them back.
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
	chunk, off, err := s.write(b)
	if err != nil {
		return nil, err
	}
	n := len(b)
	return func() ([]index.Message, error) { return s.get(sessionID, chunk, off, n) }, nil
}

var errSpool = errors.New("message spool: malformed record")

// get reads back the record of n bytes at off (of a chunk in memory, or
// of the file: chunk -1).
func (s *msgSpool) get(sessionID string, chunk int, off int64, n int) ([]index.Message, error) {
	var b []byte
	if chunk >= 0 {
		s.mu.Lock()
		b = s.mem[chunk][off : off+int64(n)]
		s.mu.Unlock()
	} else {
		b = make([]byte, n)
		if _, err := s.f.ReadAt(b, off); err != nil {
			return nil, fmt.Errorf("message spool: %w", err)
		}
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
