package backup

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/contract"
	"github.com/convkit/convkit/internal/progress"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// VerifyOptions configure VerifyArchive and a restore's verify.
type VerifyOptions struct {
	Archive  string // names the archive in messages (a path, or "-")
	WorkDir  string // where the archive is extracted and reindexed (default os.TempDir())
	Limits   archive.Limits
	Jobs     int               // parallel log reads and reindex (default: CPUs)
	Progress progress.Progress // archive bytes extracted, then logs checked
	OnEvent  func(store.Item)  // each mismatch as found
	// VerifyArchive's: the archive "-" names, and what its record says.
	Stdin       io.Reader
	ToolVersion string
	Now         func() time.Time // default time.Now

	spaceName string // the file system whose free space extraction checks (default WorkDir)
	reportAs  string // where a restore renames the extraction to (reindex.Options.ReportAs)
}

func (o *VerifyOptions) defaults() {
	o.WorkDir = cmp.Or(o.WorkDir, os.TempDir())
	o.spaceName = cmp.Or(o.spaceName, o.WorkDir)
	if o.Jobs <= 0 {
		o.Jobs = min(max(1, runtime.NumCPU()), 16)
	}
	if o.Progress == nil {
		o.Progress = progress.Nop{}
	}
	o.OnEvent = emitter(o.OnEvent)
}

// VerifyResult is what a verify found. OK is false when anything in the
// archive disagrees with its manifest.
type VerifyResult struct {
	SchemaVersion int       `json:"schemaVersion"`
	Archive       string    `json:"archive"`
	OK            bool      `json:"ok"`
	CreatedAt     time.Time `json:"createdAt"`
	Online        bool      `json:"online"`
	ToolVersion   string    `json:"toolVersion"`
	Files         int       `json:"files"`
	Logs          int       `json:"logs"`
	Bytes         int64     `json:"bytes"`
	// Invalid are the logs that fail the strict read: invalid in the store
	// too, archived whole, not mismatches.
	InvalidLogs int          `json:"invalidLogs"`
	Invalid     []store.Item `json:"invalid"` // ItemInvalid
	// Index is the metadata.db snapshot check; Rebuilt the index rebuilt
	// from the archived logs; Expected the manifest's counts.
	Index   string `json:"index"`
	Rebuilt struct {
		Indexed           int   `json:"indexed"`
		Skipped           int   `json:"skipped"`
		DeletionsFinished int   `json:"deletionsFinished"`
		Sessions          int   `json:"sessions"`
		Events            int64 `json:"events"`
	} `json:"rebuilt"`
	Expected   Counts       `json:"expected"`
	Mismatches []store.Item `json:"mismatches"` // ItemMismatch

	rebuild       *reindex.Result // the rebuild's own result
	conversations []string        // the IDs of the conversations left after the rebuild
}

// invalidLog is the archived log name that fails the strict read for why
// (Log.Error, which may name it).
func invalidLog(name, why string) store.Item {
	return store.Item{Kind: store.ItemInvalid, Path: name, Reason: strings.TrimPrefix(why, name+": ")}
}

type MismatchError struct{ Result *VerifyResult }

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%s: %d mismatch(es) with the manifest; the first: %s: %s", e.Result.Archive,
		len(e.Result.Mismatches), e.Result.Mismatches[0].Path, e.Result.Mismatches[0].Reason)
}

// verifyInto extracts into the empty dir and verifies there, leaving a
// store with a rebuilt metadata.db (with message text when text).
func verifyInto(ctx context.Context, r io.Reader, dir string, opts VerifyOptions, sync, text bool) (*VerifyResult, error) {
	opts.defaults()
	res := &VerifyResult{SchemaVersion: contract.Version, Archive: opts.Archive, Mismatches: []store.Item{}, Invalid: []store.Item{}}
	mismatch := func(name, format string, args ...any) {
		mm := store.Item{Kind: store.ItemMismatch, Path: name, Reason: fmt.Sprintf(format, args...)}
		res.Mismatches = append(res.Mismatches, mm)
		opts.OnEvent(mm)
	}
	ents, err := archive.Extract(ctx, r, dir, archive.ExtractOptions{
		ReaderOptions: archive.ReaderOptions{Limits: opts.Limits, Archive: opts.Archive},
		Sync:          sync,
		Progress:      opts.Progress.Add,
		SpaceName:     opts.spaceName,
	})
	if err != nil {
		return nil, err
	}
	defer ents.Close()
	// The manifest, last, and every checksum, both ways.
	m := &Manifest{}
	found, err := manifestFormat.Verify(opts.Archive, dir, ents, m)
	if err != nil {
		return nil, err
	}
	if err := m.resolve(archive.ManifestName); err != nil {
		return nil, fmt.Errorf("%s: %w", opts.Archive, err)
	}
	res.CreatedAt, res.Online, res.ToolVersion, res.Expected = m.CreatedAt, m.Online, m.ToolVersion, m.Counts
	for _, mm := range found {
		mismatch(mm.Path, "%s", mm.Reason)
	}
	byName := map[string]*File{}
	for i := range m.Files {
		byName[m.Files[i].Name] = &m.Files[i]
	}
	for e := range ents.All(ents.Len() - 1) {
		res.Files++
		res.Bytes += e.Size
	}
	if err := ents.Err(); err != nil {
		return nil, err
	}

	// The snapshot of metadata.db, before the rebuild replaces it.
	res.Index = m.Index
	if m.Index == IndexSnapshot {
		if err := quickCheck(ctx, filepath.Join(dir, archive.IndexName)); err != nil {
			mismatch(archive.IndexName, "the snapshot fails SQLite's quick_check: %v", err)
			res.Index = "damaged"
		} else {
			res.Index = "ok"
		}
	}

	// Every log is read strictly and compared with what the backup found;
	// the drill is a store even if the archive holds no conversations/.
	drill, err := store.Open(ctx, dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "convkit backup verify"},
		Create: store.CreateAlways})
	if err != nil {
		return nil, err
	}
	defer drill.Close()
	tree, err := drill.Walk()
	if err != nil {
		return nil, err
	}
	for _, p := range tree.Problems {
		mismatch(relName(dir, p.Path), "the restored layout is wrong: %s", p.Reason)
	}
	// What this read found of each conversation, as the manifest would say it.
	cs := make([]*convLogs, len(tree.Conversations))
	sessionLogs := 0
	for i, c := range tree.Conversations {
		cs[i] = &convLogs{Conversation: Conversation{ID: c.ID, Dir: c.Name}}
	}
	err = loadAll(ctx, jobsOf(tree), false, true, opts.Jobs, 2*opts.Jobs+2, func(l *loaded) error {
		defer l.close()
		res.Logs++
		j := l.job
		if l.problem != "" || l.vanished {
			mismatch(j.name, "cannot be read back: %s", l.problem)
			return nil
		}
		got := cs[j.convIdx].add(l, File{Name: j.name, Size: l.length})
		if got.Current && got.Session != "" {
			sessionLogs++
		}
		if got.Error != "" {
			res.InvalidLogs++
			res.Invalid = append(res.Invalid, invalidLog(j.name, got.Error))
		}
		f := byName[j.name]
		if f == nil || f.Log == nil {
			if f != nil {
				mismatch(j.name, "a log the manifest does not describe as one")
			}
			return nil
		}
		want := f.Log
		gotErr := got.Error
		if !want.Strict {
			gotErr = l.shapeErr
		}
		switch {
		case want.Current != got.Current:
			mismatch(j.name, "current generation %v, the manifest says %v", got.Current, want.Current)
		case want.Error == "" && got.ruleOnly:
			// A rule the build that archived it did not check: invalid
			// now (Invalid says why), not a mismatch of the archive.
		case (want.Error != "") != (gotErr != ""):
			if gotErr != "" {
				mismatch(j.name, "fails the check it passed at backup time: %s", gotErr)
			} else {
				mismatch(j.name, "passes the check it failed at backup time (%s)", want.Error)
			}
		case want.Error != "":
			// Invalid then and now: archived whole, as recorded.
		case want.Committed != got.Committed:
			mismatch(j.name, "committed length %d, the manifest says %d", got.Committed, want.Committed)
		case want.TornTail != got.TornTail:
			mismatch(j.name, "torn tail %v, the manifest says %v", got.TornTail, want.TornTail)
		case want.Strict && want.Events != got.Events:
			mismatch(j.name, "%d events, the manifest says %d", got.Events, want.Events)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	// What a reindex must do with each conversation, from this read.
	var expect Counts
	convs := expectations(cs, false, &expect)
	if len(convs) != m.Counts.Conversations || res.Logs != m.Counts.Logs || sessionLogs != m.Counts.SessionLogs {
		mismatch(archive.ManifestName, "counts: conversations=%d logs=%d session-logs=%d in the archive, the manifest says %d, %d, %d",
			len(convs), res.Logs, sessionLogs, m.Counts.Conversations, m.Counts.Logs, m.Counts.SessionLogs)
	}
	if m.LogCheck == LogCheckStrict {
		// An archive of an older build expects its rules (expectations'
		// legacy): either rule's agreement verifies it; the rebuild below
		// follows this build's.
		wantByID := map[string]*Conversation{}
		for i := range m.Conversations {
			wantByID[m.Conversations[i].ID] = &m.Conversations[i]
		}
		agree := func(convs []Conversation, expect Counts, report bool) bool {
			ok := true
			for _, c := range convs {
				if w := wantByID[c.ID]; w != nil && w.Expect != c.Expect {
					ok = false
					if report {
						mismatch(store.ConversationsDirName+"/"+c.Dir, "a reindex would make it %s, the manifest says %s", c.Expect, w.Expect)
					}
				}
			}
			if expect.Indexed != m.Counts.Indexed || expect.Skipped != m.Counts.Skipped || expect.Deleting != m.Counts.Deleting ||
				expect.IndexedSessions != m.Counts.IndexedSessions || expect.Events != m.Counts.Events {
				ok = false
				if report {
					mismatch(archive.ManifestName, "counts: indexed=%d skipped=%d deleting=%d indexed-sessions=%d events=%d, the manifest says %d, %d, %d, %d, %d",
						expect.Indexed, expect.Skipped, expect.Deleting, expect.IndexedSessions, expect.Events,
						m.Counts.Indexed, m.Counts.Skipped, m.Counts.Deleting, m.Counts.IndexedSessions, m.Counts.Events)
				}
			}
			return ok
		}
		var legacy Counts
		if !agree(convs, expect, false) && !agree(expectations(cs, true, &legacy), legacy, false) {
			agree(convs, expect, true)
		}
	}

	// An index rebuilt from the archived logs.
	if err := rebuildAndCompare(ctx, drill, cs, convs, expect, opts, text, res, mismatch); err != nil {
		return nil, err
	}
	res.OK = len(res.Mismatches) == 0
	return res, nil
}

// rebuildAndCompare reindexes the drill and compares it with the
// expectations.
func rebuildAndCompare(ctx context.Context, s *store.Store, cs []*convLogs, convs []Conversation, expect Counts,
	opts VerifyOptions, text bool, res *VerifyResult, mismatch func(name, format string, args ...any)) error {
	rr, err := reindex.Run(ctx, s, reindex.Options{Jobs: opts.Jobs, NoText: !text, ReportAs: opts.reportAs})
	if err != nil {
		return fmt.Errorf("rebuild the index from the archive: %w", err)
	}
	res.rebuild = rr
	rb := &res.Rebuilt
	rb.Indexed, rb.Skipped, rb.DeletionsFinished, rb.Sessions = rr.Indexed, len(rr.Skipped), len(rr.DeletionsFinished), rr.Sessions
	db, err := index.Open(s.IndexPath())
	if err != nil {
		return err
	}
	rows, err := db.All(ctx)
	db.Close()
	if err != nil {
		return err
	}
	deleted := map[string]bool{}
	for _, id := range rr.DeletionsFinished {
		deleted[id] = true
	}
	skipped := map[string]store.Item{}
	base := cmp.Or(opts.reportAs, s.DataDir())
	for _, sk := range rr.Skipped {
		if sk.ID == "" {
			mismatch(relName(base, sk.Path), "the rebuild skipped it: %s", sk.Reason)
			continue
		}
		skipped[sk.ID] = sk
	}
	for ci, c := range convs {
		name := store.ConversationsDirName + "/" + c.Dir
		row := rows[c.ID]
		delete(rows, c.ID)
		if !deleted[c.ID] {
			res.conversations = append(res.conversations, c.ID)
		}
		sk, wasSkipped := skipped[c.ID]
		switch {
		case c.Expect == store.ItemDeleted && !deleted[c.ID]:
			mismatch(name, "its deletion was interrupted (a tombstone), but the rebuild did not finish it")
		case c.Expect == store.ItemSkipped && !wasSkipped:
			mismatch(name, "the rebuild was expected to skip it (%s), but it did not", c.Reason)
		case c.Expect != store.ItemIndexed:
		case wasSkipped:
			mismatch(name, "the rebuild skipped it: %s", sk.Reason)
		case deleted[c.ID]:
			mismatch(name, "the rebuild finished a deletion nothing recorded")
		case row == nil:
			mismatch(name, "missing from the rebuilt index")
		default:
			want := map[string]*File{}
			for i, f := range cs[ci].files {
				if f.Log.Current && f.Log.Session != "" {
					want[filepath.Base(f.Name)] = &cs[ci].files[i]
				}
			}
			if len(row.Sessions) != len(want) {
				mismatch(name, "%d sessions in the rebuilt index, %d current session logs in the archive", len(row.Sessions), len(want))
			}
			for _, sess := range row.Sessions {
				res.Rebuilt.Events += sess.Events
				switch f := want[sess.File]; {
				case f == nil:
					mismatch(name+"/"+sess.File, "indexed, but the archive has no such current session log")
				case sess.Events != f.Log.Events:
					mismatch(f.Name, "%d events in the rebuilt index, %d read from the log", sess.Events, f.Log.Events)
				case sess.Bytes != f.Size:
					mismatch(f.Name, "%d bytes in the rebuilt index, the log has %d", sess.Bytes, f.Size)
				}
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(rows)) {
		mismatch(id, "in the rebuilt index but not in the archive")
	}
	if rr.Indexed != expect.Indexed || rr.Sessions != expect.IndexedSessions || res.Rebuilt.Events != expect.Events ||
		len(rr.DeletionsFinished) != expect.Deleting {
		mismatch(archive.ManifestName, "counts: rebuilt indexed=%d sessions=%d events=%d deletions=%d, expected %d, %d, %d, %d",
			rr.Indexed, rr.Sessions, res.Rebuilt.Events, len(rr.DeletionsFinished),
			expect.Indexed, expect.IndexedSessions, expect.Events, expect.Deleting)
	}
	return nil
}

func quickCheck(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=ro")
	if err != nil {
		return err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, "PRAGMA quick_check")
	if err != nil {
		return err
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return err
		}
		if s != "ok" {
			problems = append(problems, s)
		}
	}
	if err := rows.Err(); err != nil || len(problems) == 0 {
		return err
	}
	return errors.New(strings.Join(problems, "; "))
}

func relName(dir, p string) string {
	if r, err := filepath.Rel(dir, p); err == nil && !strings.HasPrefix(r, "..") {
		return filepath.ToSlash(r)
	}
	return p
}

// expectations applies reindex.Accept to each conversation's logs,
// counted into cnt. legacy takes older builds' rules, to verify their
// archives: a missing fork source skips, and a session log failing only a
// rule they did not check reads.
func expectations(cs []*convLogs, legacy bool, cnt *Counts) []Conversation {
	present := map[string]bool{}
	for _, c := range cs {
		if len(c.files) > 0 {
			present[c.ID] = true
		}
	}
	convs := make([]Conversation, len(cs))
	for ci, cl := range cs {
		c := &convs[ci]
		*c = Conversation{ID: cl.ID, Dir: cl.Dir}
		f := reindex.Found{Dir: path.Join(store.ConversationsDirName, c.Dir)}
		fc := cl.facts
		for _, file := range cl.files {
			switch lg := file.Log; {
			case !lg.Current:
			case lg.Session != "" && legacy && lg.ruleOnly:
				f.Sessions = append(f.Sessions, reindex.LogFound{Path: file.Name})
			case lg.Session != "":
				f.Sessions = append(f.Sessions, reindex.LogFound{Path: file.Name, Err: lg.err})
			default:
				f.ConversationLog = file.Name
				// reindex replays a conversation log without convlog's
				// admission: a rule of it alone does not skip.
				if !lg.ruleOnly {
					f.ConversationErr = lg.err
				}
				if f.ConversationErr == nil && fc != nil {
					f.ConversationErr, f.Deleting = fc.err, fc.deleting
				}
			}
		}
		if fc != nil {
			c.DependsOn = fc.deps
		}
		v := reindex.Accept(f)
		c.Expect, c.Reason = v.Kind, v.Reason
		if v.Path != f.Dir && v.Reason != "" {
			// As the index records a skip: the log named in its directory.
			c.Reason = path.Base(v.Path) + ": " + v.Reason
		}
		if c.Expect == store.ItemIndexed && legacy {
			for _, d := range c.DependsOn {
				if !present[d] {
					c.Expect = store.ItemSkipped
					c.Reason = fmt.Sprintf("fork source %s is missing: this conversation reads older history from it", termtext.Quote(d))
					break
				}
			}
		}
		switch c.Expect {
		case store.ItemIndexed:
			cnt.Indexed++
			for _, f := range cl.files {
				if f.Log.Current && f.Log.Session != "" {
					cnt.IndexedSessions++
					cnt.Events += f.Log.Events
				}
			}
		case store.ItemSkipped:
			cnt.Skipped++
		case store.ItemDeleted:
			cnt.Deleting++
		}
	}
	return convs
}
