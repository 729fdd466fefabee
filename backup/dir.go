package backup

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/progress"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// Archive names: convkit-<UTC time>.tar.zst, with -N before the suffix for a
// second archive in the same second. Retention touches nothing else.
const (
	archivePrefix = "convkit-"
	archiveSuffix = ".tar.zst"
	timeLayout    = "20060102T150405Z"
)

var archiveRE = regexp.MustCompile(`^convkit-(\d{8}T\d{6}Z)(?:-([1-9]\d{0,5}))?\.tar\.zst$`)

// ArchiveName is the name of an archive taken at t.
func ArchiveName(t time.Time) string {
	return archivePrefix + t.UTC().Format(timeLayout) + archiveSuffix
}

// ArchiveInfo is one of convkit's archives found in a directory.
type ArchiveInfo struct {
	Name    string    `json:"name"`
	Path    string    `json:"path"`
	Time    time.Time `json:"time"`
	Seq     int       `json:"-"`
	Size    int64     `json:"size"`
	ModTime time.Time `json:"-"`
	// Info is the archive's sidecar (nil when it has none, or InfoError
	// says why it could not be read).
	Info      *Info  `json:"-"`
	InfoError string `json:"-"`
}

// Verification states of an archive (ArchiveInfo.Verification).
const (
	VerifiedOK     = "ok"     // the last verification of this very file matched
	VerifiedFailed = "failed" // the last verification of this very file failed
	VerifiedStale  = "stale"  // verified, but the file's size or time changed since
	VerifiedNever  = "no"     // never verified (or no readable sidecar)
	// VerifiedInvalid: the archive holds logs that do not read (archived
	// as they were in the store), found by its last verification or, not
	// yet verified, by the backup itself. It restores, but not whole:
	// verify and restore exit 3 on it.
	VerifiedInvalid = "invalid"
)

// Verification says whether the archive was verified: the last
// verification recorded in its sidecar, if it was of the file as it is
// now (same size and modification time).
func (a ArchiveInfo) Verification() string {
	if a.Info == nil {
		return VerifiedNever
	}
	v := a.Info.Verified
	switch {
	case v == nil && a.Info.InvalidLogs > 0:
		return VerifiedInvalid
	case v == nil:
		return VerifiedNever
	case v.Size != a.Size || !v.ModTime.Equal(a.ModTime):
		return VerifiedStale
	case v.OK && v.InvalidLogs > 0:
		return VerifiedInvalid
	case v.OK:
		return VerifiedOK
	}
	return VerifiedFailed
}

// ListArchives lists convkit's own archives in dir (regular files named
// convkit-<UTC time>[-N].tar.zst, never links), oldest first, each with its
// sidecar when it has one.
func ListArchives(dir string) ([]ArchiveInfo, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []ArchiveInfo
	for _, e := range ents {
		m := archiveRE.FindStringSubmatch(e.Name())
		if m == nil || !e.Type().IsRegular() {
			continue
		}
		t, err := time.Parse(timeLayout, m[1])
		if err != nil {
			continue
		}
		seq := 0
		if m[2] != "" {
			seq, _ = strconv.Atoi(m[2])
		}
		a := ArchiveInfo{Name: e.Name(), Path: filepath.Join(dir, e.Name()), Time: t, Seq: seq}
		if fi, err := e.Info(); err == nil {
			a.Size, a.ModTime = fi.Size(), fi.ModTime().UTC()
		}
		if info, err := readInfo(a.Path); err != nil {
			a.InfoError = err.Error()
		} else {
			a.Info = info
		}
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Time.Equal(out[j].Time) {
			return out[i].Time.Before(out[j].Time)
		}
		return out[i].Seq < out[j].Seq
	})
	return out, nil
}

// DirOptions configure ToDir.
type DirOptions struct {
	Options
	// Retention deletes the archives it does not keep once the new
	// archive is complete.
	Retention Retention
	// DryRun writes and deletes nothing: Plan says what would be.
	DryRun bool
}

// DirResult is what ToDir did.
type DirResult struct {
	// Archive is the path of the new archive (on a dry run, the name it
	// would get).
	Archive string
	// Result is nil on a dry run.
	Result *Result
	// Deleted are the archives retention removed (would remove, on a dry
	// run).
	Deleted []string
	// RemovedTemps are temporary archives of killed backups removed.
	RemovedTemps []string
	// InfoError says why the archive's sidecar (InfoPath) could not be
	// written; the archive is complete either way.
	InfoError string
	// Plan is set on a dry run.
	Plan *Plan
}

// Plan is what a dry run found: the files a backup would archive.
type Plan struct {
	Online bool `json:"online"`
	// Index is IndexSnapshot when the store has a metadata.db to
	// snapshot, else IndexAbsent.
	Index  string        `json:"index"`
	Holder *store.Holder `json:"holder"`
	Files  []PlanFile    `json:"files"`
	Bytes  int64         `json:"bytes"`
	// Problems are files that would be left out.
	Problems []store.Item `json:"problems"`
}

// PlanFile is one file a backup would archive, at its current size.
type PlanFile struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// ToDir takes a backup of the store s (opened as Write says; read-only for
// a dry run) into dir (created 0700 if
// missing): written under a temporary name (.convkit-<time>.tar.zst.<random>.tmp),
// fsynced, and linked to its final name only when complete, so a crash at
// any moment leaves no file under an archive name. Temporaries of killed
// backups are removed first (each is flock'ed by its writer while
// written, so one being written by a live backup is never touched). Then
// the archives opts.Retention does not keep are deleted.
func ToDir(ctx context.Context, s *store.Store, dir string, opts DirOptions) (*DirResult, error) {
	opts.defaults()
	if opts.Retention.Last < 0 || opts.Retention.Daily < 0 || opts.Retention.Weekly < 0 || opts.Retention.Monthly < 0 {
		return nil, errors.New("retention counts must not be negative")
	}
	now := opts.Now()
	res := &DirResult{Archive: filepath.Join(dir, ArchiveName(now))}
	if opts.DryRun {
		res.Archive = freeArchiveName(dir, now)
		return dryRun(s, dir, opts, res)
	}
	if err := durable.MkdirAll(dir); err != nil {
		return nil, err
	}
	res.RemovedTemps = removeStaleTemps(dir)
	name := ArchiveName(now)
	tmp, err := durable.CreateTemp(dir, "."+name)
	if err != nil {
		return nil, err
	}
	tmpName := tmp.Name()
	held, err := archive.LockTemp(tmp)
	if err != nil {
		tmp.Close()
		os.Remove(tmpName)
		return nil, err
	}
	defer held.Close()
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmpName)
		}
	}()
	wo := opts.Options
	wo.TempDir = dir
	wo.snapshotPath = tmpName + snapshotSuffix
	// The disk writes the archive while the rest is made: the fsync
	// before publication then waits for its last megabytes only.
	wb := durable.NewWriteback(tmp, archive.WritebackBytes)
	defer wb.Close()
	bw := bufio.NewWriterSize(wb, 1<<20)
	r, err := Write(ctx, s, bw, wo)
	if err == nil {
		// Interrupted once the archive was written: not published.
		err = ctx.Err()
	}
	if err != nil {
		return nil, err
	}
	if err := bw.Flush(); err != nil {
		return nil, fmt.Errorf("write %s: %w", tmpName, err)
	}
	wb.Close()
	if err := tmp.Sync(); err != nil {
		return nil, fmt.Errorf("fsync %s: %w", tmpName, err)
	}
	final, err := publishArchive(tmpName, dir, now)
	if err != nil {
		return nil, err
	}
	done = true
	tmp.Close()
	res.Archive, res.Result = final, r
	info, err := infoOf(final, r, now)
	if err == nil {
		err = writeInfo(final, info)
	}
	if err != nil {
		res.InfoError = err.Error()
	}
	if !opts.Retention.IsZero() {
		del, err := prune(dir, opts.Retention, final, now, false)
		res.Deleted = del
		if err != nil {
			return res, fmt.Errorf("retention: %w", err)
		}
	}
	return res, nil
}

// archiveNames are the names an archive taken at now may get, in order.
func archiveNames(now time.Time) func(seq int) string {
	base := strings.TrimSuffix(ArchiveName(now), archiveSuffix)
	return func(seq int) string {
		if seq > 1 {
			return base + "-" + strconv.Itoa(seq) + archiveSuffix
		}
		return base + archiveSuffix
	}
}

// freeArchiveName is the path publishArchive would give now's archive.
func freeArchiveName(dir string, now time.Time) string {
	names := archiveNames(now)
	for seq := 1; seq < 1000; seq++ {
		p := filepath.Join(dir, names(seq))
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			return p
		}
	}
	return filepath.Join(dir, names(1))
}

// publishArchive links the complete temporary file to the first free
// archive name of now, removes the temporary name and fsyncs dir. It never
// replaces an existing file.
func publishArchive(tmpName, dir string, now time.Time) (string, error) {
	names := archiveNames(now)
	for seq := 1; seq < 1000; seq++ {
		final := filepath.Join(dir, names(seq))
		err := os.Link(tmpName, final)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("publish %s: %w", final, err)
		}
		if err := os.Remove(tmpName); err != nil {
			return "", fmt.Errorf("remove %s: %w", tmpName, err)
		}
		return final, durable.SyncDir(dir)
	}
	return "", fmt.Errorf("%s: no free archive name for %s", dir, names(1))
}

// snapshotSuffix ends the metadata.db snapshot ToDir makes beside its
// temporary archive; spoolSuffix, followed by what they hold, the
// manifest's spools (removed as soon as they are made, where the system
// allows).
const (
	snapshotSuffix = ".index"
	spoolSuffix    = ".manifest-"
)

// companionOf is the temporary archive a snapshot or spool beside it
// belongs to.
func companionOf(name string) (string, bool) {
	if a, ok := strings.CutSuffix(name, snapshotSuffix); ok && isTempArchive(a) {
		return a, true
	}
	if i := strings.LastIndex(name, spoolSuffix); i > 0 && isTempArchive(name[:i]) {
		return name[:i], true
	}
	return "", false
}

// isTempArchive reports whether name is a temporary archive ToDir makes.
func isTempArchive(name string) bool {
	return strings.HasPrefix(name, "."+archivePrefix) && strings.Contains(name, archiveSuffix+".") &&
		durable.IsTemp(name)
}

// removeStaleTemps removes temporary archives whose writer is gone, with
// their index snapshots (the writer holds a flock on the temporary archive
// while it writes, and the kernel drops it when the writer dies), and the
// sidecars of archives that are gone.
func removeStaleTemps(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	present := map[string]bool{}
	for _, e := range ents {
		present[e.Name()] = true
	}
	var removed []string
	remove := func(name string) {
		p := filepath.Join(dir, name)
		if os.Remove(p) == nil {
			removed = append(removed, p)
		}
	}
	for _, e := range ents {
		name := e.Name()
		if !e.Type().IsRegular() {
			continue
		}
		if archive, ok := strings.CutSuffix(name, InfoSuffix); ok && IsArchiveName(archive) {
			if !present[archive] {
				remove(name) // the sidecar of an archive that is gone
			}
			continue
		}
		if of, ok := companionOf(name); ok {
			if !present[of] {
				remove(name) // its archive is gone: published or removed
			}
			continue
		}
		if !isTempArchive(name) {
			continue
		}
		// Opened without following a link and without waiting: a link or
		// a FIFO put there since the listing is left alone.
		fl := archive.LockIfFree(filepath.Join(dir, name))
		if fl == nil {
			continue // a live backup is writing it
		}
		remove(name)
		for other := range present {
			if of, ok := companionOf(other); ok && of == name {
				remove(other)
			}
		}
		fl.Close()
	}
	if len(removed) > 0 {
		durable.SyncDir(dir)
	}
	return removed
}

// prune deletes convkit's archives in dir that r does not keep, never
// keepPath (the archive just written) nor the newest verified one. With
// dryRun it only lists them, as if keepPath, taken at now, were there.
func prune(dir string, r Retention, keepPath string, now time.Time, dryRun bool) ([]string, error) {
	list, err := ListArchives(dir)
	if errors.Is(err, fs.ErrNotExist) && dryRun {
		list, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	if dryRun {
		list = append(list, ArchiveInfo{Name: filepath.Base(keepPath), Path: keepPath, Time: now.UTC().Truncate(time.Second), Seq: 1 << 30})
	}
	kept := r.keeps(list, keepPath, now)
	deleted := []string{}
	for _, a := range list {
		if kept[a.Path] {
			continue
		}
		if !dryRun {
			if err := os.Remove(a.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return deleted, err
			}
			// Its sidecar goes with it (a regular file only: never through
			// a link).
			if fi, err := os.Lstat(InfoPath(a.Path)); err == nil && fi.Mode().IsRegular() {
				os.Remove(InfoPath(a.Path))
			}
		}
		deleted = append(deleted, a.Path)
	}
	if !dryRun && len(deleted) > 0 {
		if err := durable.SyncDir(dir); err != nil {
			return deleted, err
		}
	}
	return deleted, nil
}

// Retention says which of convkit's archives in a directory a backup into
// it keeps, by restic forget's policies: an archive any of them keeps
// stays, the rest go. The zero Retention keeps every archive. Days, weeks
// (ISO) and months are UTC's, as the archives' names are.
type Retention struct {
	// Last keeps the newest Last archives.
	Last int
	// Within keeps the archives taken within Within of the newest.
	Within Span
	// Daily, Weekly and Monthly keep the newest archive of each of the
	// last N days (weeks, months) that have one.
	Daily, Weekly, Monthly int
}

// IsZero reports whether r keeps everything (no policy set).
func (r Retention) IsZero() bool { return r == Retention{} }

// keeps returns the paths of the archives of list (oldest first) that r
// keeps: those its policies keep, keepPath (the archive just written,
// whatever its time) and the newest whose last verification matched, so
// that a directory never loses its last known good archive. An archive
// named more than FutureSkew past now is kept and left out of the
// policies: counted as the newest, one wrong clock would make Within and
// Last delete every real archive.
func (r Retention) keeps(list []ArchiveInfo, keepPath string, now time.Time) map[string]bool {
	kept := map[string]bool{keepPath: true}
	if r.IsZero() {
		for _, a := range list {
			kept[a.Path] = true
		}
		return kept
	}
	var newest []ArchiveInfo
	for _, a := range slices.Backward(list) {
		if a.Time.After(now.Add(FutureSkew)) {
			kept[a.Path] = true
			continue
		}
		newest = append(newest, a)
	}
	for _, a := range newest {
		if a.Verification() == VerifiedOK {
			kept[a.Path] = true
			break
		}
	}
	for i := 0; i < r.Last && i < len(newest); i++ {
		kept[newest[i].Path] = true
	}
	if !r.Within.IsZero() && len(newest) > 0 {
		from := r.Within.Before(newest[0].Time)
		for _, a := range newest {
			if !a.Time.Before(from) {
				kept[a.Path] = true
			}
		}
	}
	bucket := func(n int, key func(time.Time) string) {
		last := ""
		for _, a := range newest {
			if n == 0 {
				return
			}
			if k := key(a.Time.UTC()); k != last {
				kept[a.Path] = true
				last = k
				n--
			}
		}
	}
	bucket(r.Daily, func(t time.Time) string { return t.Format("2006-01-02") })
	bucket(r.Weekly, func(t time.Time) string { y, w := t.ISOWeek(); return fmt.Sprintf("%d-W%02d", y, w) })
	bucket(r.Monthly, func(t time.Time) string { return t.Format("2006-01") })
	return kept
}

// dryRun lists what a backup would archive and delete, writing nothing.
func dryRun(s *store.Store, dir string, opts DirOptions, res *DirResult) (*DirResult, error) {
	plan, err := PlanBackup(s)
	if err != nil {
		return nil, err
	}
	if opts.NoIndex {
		plan.LeaveIndexOut()
	}
	res.Plan = plan
	res.Deleted = []string{}
	if !opts.Retention.IsZero() {
		del, err := prune(dir, opts.Retention, res.Archive, opts.Now(), true)
		if err != nil {
			return nil, err
		}
		res.Deleted = del
	}
	return res, nil
}

// LeaveIndexOut drops metadata.db from the plan, as Options.NoIndex does
// from a backup.
func (p *Plan) LeaveIndexOut() {
	if p.Index == IndexSnapshot {
		p.Files = slices.DeleteFunc(p.Files, func(f PlanFile) bool {
			if f.Name == store.IndexFileName {
				p.Bytes -= f.Size
				return true
			}
			return false
		})
	}
	p.Index = IndexLeftOut
}

// PlanBackup lists, without reading any log or taking any lock, the files a
// backup of the store s would archive at their current sizes.
func PlanBackup(s *store.Store) (*Plan, error) {
	p := &Plan{Files: []PlanFile{}, Problems: []store.Item{}, Index: IndexAbsent}
	st, err := s.LockStatus()
	if err == nil && st.Held {
		p.Online, p.Holder = true, st.Holder
	}
	if ifi, err := os.Lstat(s.IndexPath()); err == nil {
		if ifi.Mode().IsRegular() {
			p.Index = IndexSnapshot
			p.Files = append(p.Files, PlanFile{Name: store.IndexFileName, Size: ifi.Size()})
			p.Bytes += ifi.Size()
		} else {
			p.Index = IndexUnreadable
			p.Problems = append(p.Problems, store.Item{Kind: store.ItemUnreadable, Path: s.IndexPath(), Reason: "not a regular file (symbolic links are not followed)"})
		}
	}
	tree, err := s.Walk()
	if err != nil {
		return nil, err
	}
	jobs, _ := jobsOf(tree)
	for j := range jobs {
		lfi, err := os.Lstat(j.path)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				p.Problems = append(p.Problems, store.Item{Kind: store.ItemUnreadable, Path: j.path, Reason: err.Error()})
			}
			continue
		}
		p.Files = append(p.Files, PlanFile{Name: j.name, Size: lfi.Size()})
		p.Bytes += lfi.Size()
	}
	for _, pr := range tree.Problems {
		if !pr.Listed {
			p.Problems = append(p.Problems, store.Item{Kind: store.ItemUnreadable, Path: pr.Path, Reason: pr.Reason})
		}
	}
	return p, nil
}

// ErrNoArchive: a backup directory holds none of convkit's archives.
var ErrNoArchive = errors.New("no archive named convkit-<UTC time>.tar.zst")

// FutureSkew is how far past the clock the time in an archive's name may
// be before Latest with a MaxAge refuses it and retention sets it aside.
const FutureSkew = 5 * time.Minute

// LatestOptions say what Latest requires of the newest archive.
type LatestOptions struct {
	// MaxAge, when set, is how old (by the time in its name) the newest
	// archive may be at Now.
	MaxAge Span
	// Verified requires its last verification to have matched, with
	// every log read (Verification VerifiedOK).
	Verified bool
	Now      func() time.Time // default time.Now
}

// StaleError says why the newest archive does not do.
type StaleError struct {
	Archive ArchiveInfo
	Reason  string
}

func (e *StaleError) Error() string { return e.Archive.Path + ": " + e.Reason }

// Latest returns the newest of convkit's archives in dir, and a
// *StaleError with it when it is older than opts.MaxAge (or, with a MaxAge,
// dated more than FutureSkew past the clock) or, with
// opts.Verified, not verified good; ErrNoArchive when there is none.
func Latest(dir string, opts LatestOptions) (*ArchiveInfo, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	list, err := ListArchives(dir)
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%s: %w", dir, ErrNoArchive)
	}
	a := list[len(list)-1]
	now := opts.Now()
	if !opts.MaxAge.IsZero() && a.Time.After(now.Add(FutureSkew)) {
		// A clock set back since: the name cannot tell its age, and it
		// would pass every check until the clock caught up.
		return &a, &StaleError{Archive: a, Reason: fmt.Sprintf("taken %s, later than now (%s): its age cannot be told",
			a.Time.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))}
	}
	if !opts.MaxAge.IsZero() && a.Time.Before(opts.MaxAge.Before(now)) {
		return &a, &StaleError{Archive: a, Reason: fmt.Sprintf("taken %s, %s ago: older than %s",
			a.Time.UTC().Format(time.RFC3339), now.Sub(a.Time).Truncate(time.Minute), opts.MaxAge)}
	}
	if opts.Verified {
		switch v := a.Verification(); v {
		case VerifiedOK:
		case VerifiedNever:
			return &a, &StaleError{Archive: a, Reason: "not verified (convkit backup verify records it)"}
		case VerifiedStale:
			return &a, &StaleError{Archive: a, Reason: "changed since it was verified"}
		case VerifiedInvalid:
			return &a, &StaleError{Archive: a, Reason: "it holds logs that do not read (INVALID)"}
		default:
			reason := "its verification failed"
			if a.Info != nil && a.Info.Verified != nil && a.Info.Verified.Problem != "" {
				reason += ": " + a.Info.Verified.Problem
			}
			return &a, &StaleError{Archive: a, Reason: reason}
		}
	}
	return &a, nil
}

// Span is a length of time as restic writes one for --keep-within: years,
// months, days and hours ("1y6m", "7d", "26h", "2d12h"), counted back on
// the calendar (a month before March 31 is March 3 or 2, as time.AddDate
// has it).
type Span struct {
	Years, Months, Days, Hours int
}

// ParseSpan reads a Span: one or more whole numbers each followed by y, m
// (months), d or h, each unit at most once, in that order.
func ParseSpan(s string) (Span, error) {
	var sp Span
	if s == "" {
		return sp, errors.New("empty duration")
	}
	rest, last := s, -1
	for rest != "" {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 || i == len(rest) {
			return Span{}, fmt.Errorf("%q: want whole numbers each followed by y, m (months), d or h, as in 1y6m, 7d or 26h", s)
		}
		n, err := strconv.Atoi(rest[:i])
		if err != nil || n > 1_000_000 {
			return Span{}, fmt.Errorf("%q: %s is out of range", s, rest[:i])
		}
		unit := strings.IndexByte("ymdh", rest[i])
		if unit < 0 || unit <= last {
			return Span{}, fmt.Errorf("%q: want whole numbers each followed by y, m (months), d or h, each once and in that order, as in 1y6m or 2d12h", s)
		}
		last = unit
		*[]*int{&sp.Years, &sp.Months, &sp.Days, &sp.Hours}[unit] = n
		rest = rest[i+1:]
	}
	return sp, nil
}

// Before is the time s before t.
func (s Span) Before(t time.Time) time.Time {
	return t.AddDate(-s.Years, -s.Months, -s.Days).Add(-time.Duration(s.Hours) * time.Hour)
}

// IsZero reports whether s is no time at all.
func (s Span) IsZero() bool { return s == Span{} }

func (s Span) String() string {
	var b strings.Builder
	for _, p := range []struct {
		n    int
		unit string
	}{{s.Years, "y"}, {s.Months, "m"}, {s.Days, "d"}, {s.Hours, "h"}} {
		if p.n > 0 {
			b.WriteString(strconv.Itoa(p.n) + p.unit)
		}
	}
	if b.Len() == 0 {
		return "0h"
	}
	return b.String()
}

// An archive in a backup directory has a sidecar beside it,
// convkit-<UTC time>[-N].tar.zst.json: what the backup recorded when it
// published the archive (so that 'backup list' need not read the archive)
// and the last verification of it. It is derived data: losing it loses
// nothing but the listing's details, and 'backup verify' writes it again.
const (
	InfoSuffix        = ".json"
	InfoFormat        = "convkit-backup-info"
	InfoFormatVersion = 1
	// maxInfoBytes bounds what is read of a sidecar: a hostile one cannot
	// make listing read without end.
	maxInfoBytes = 64 << 10
)

// Info is an archive's sidecar. Readers ignore fields they do not know.
type Info struct {
	Format        string `json:"format"`
	FormatVersion int    `json:"formatVersion"`
	// Archive is the archive's file name; the sidecar describes that file
	// only.
	Archive       string    `json:"archive"`
	Size          int64     `json:"size"`
	CreatedAt     time.Time `json:"createdAt"`
	ToolVersion   string    `json:"toolVersion"`
	Online        bool      `json:"online"`
	Conversations int       `json:"conversations"`
	Logs          int       `json:"logs"`
	Files         int       `json:"files"`
	Bytes         int64     `json:"bytes"`
	// LogCheck is how the backup checked its logs (LogCheckStructure or
	// LogCheckStrict); InvalidLogs how many failed: archived whole.
	LogCheck    string `json:"logCheck,omitempty"`
	InvalidLogs int    `json:"invalidLogs"`
	// Verified is the last 'backup verify' of the archive, null until one
	// ran.
	Verified *Verification `json:"verified"`
}

// Verification is one run of 'backup verify' on an archive file.
type Verification struct {
	At time.Time `json:"at"`
	// OK: everything matched. Otherwise Problem is the first mismatch, or
	// why the archive was refused.
	OK      bool   `json:"ok"`
	Problem string `json:"problem,omitempty"`
	// InvalidLogs are the logs the strict read refused (archived as they
	// were in the store: not mismatches); Invalid the first of them.
	InvalidLogs int    `json:"invalidLogs"`
	Invalid     string `json:"invalid,omitempty"`
	// The archive file as it was verified: its size, modification time and
	// the SHA-256 of its bytes (empty when the verification stopped before
	// the end). A file that no longer has this size and time is not the one
	// verified (ArchiveInfo.Verification says "stale").
	Size        int64     `json:"size"`
	ModTime     time.Time `json:"modTime"`
	SHA256      string    `json:"sha256,omitempty"`
	ToolVersion string    `json:"toolVersion"`
}

// InfoPath is the sidecar of the archive at archivePath.
func InfoPath(archivePath string) string { return archivePath + InfoSuffix }

// IsArchiveName reports whether name is one of convkit's archive names,
// convkit-<UTC time>[-N].tar.zst: only those get a sidecar.
func IsArchiveName(name string) bool { return archiveRE.MatchString(name) }

// readInfo reads the sidecar of the archive at archivePath: nil without
// error when there is none. It never follows a symbolic link and reads at
// most maxInfoBytes.
func readInfo(archivePath string) (*Info, error) {
	f, err := durable.OpenRegular(InfoPath(archivePath), os.O_RDONLY)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxInfoBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name(), err)
	}
	if len(data) > maxInfoBytes {
		return nil, fmt.Errorf("%s: longer than %d bytes: not a sidecar convkit wrote", f.Name(), maxInfoBytes)
	}
	var info Info
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("%s: %v", f.Name(), err)
	}
	if info.Format != InfoFormat || info.Archive != filepath.Base(archivePath) {
		return nil, fmt.Errorf("%s: not the sidecar of %s (format %s, archive %s)", f.Name(), filepath.Base(archivePath), termtext.Quote(info.Format), termtext.Quote(info.Archive))
	}
	return &info, nil
}

// writeInfo publishes the sidecar of the archive at archivePath, replacing
// the old one.
func writeInfo(archivePath string, info *Info) error {
	info.Format, info.FormatVersion, info.Archive = InfoFormat, InfoFormatVersion, filepath.Base(archivePath)
	data, err := json.Marshal(info)
	if err != nil {
		return err
	}
	final := InfoPath(archivePath)
	if fi, err := os.Lstat(final); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w: not replaced", final, durable.ErrNotRegular)
	}
	return publishSmall(final, append(data, '\n'), 0o600, true)
}

// infoOf is the sidecar backup writes for the archive it just published,
// begun at start (an rsyncable manifest's createdAt is the newest time it
// holds instead).
func infoOf(archivePath string, r *Result, start time.Time) (*Info, error) {
	fi, err := os.Lstat(archivePath)
	if err != nil {
		return nil, err
	}
	m := r.Manifest
	return &Info{Size: fi.Size(), CreatedAt: start.UTC().Truncate(time.Second), ToolVersion: m.ToolVersion, Online: m.Online,
		Conversations: m.Counts.Conversations, Logs: m.Counts.Logs, Files: m.Counts.Files, Bytes: m.Counts.Bytes,
		LogCheck: m.LogCheck, InvalidLogs: m.Counts.InvalidLogs}, nil
}

// ResolveArchive names the archive an argument means: "DIR/latest" (or
// "latest"), when no file of that name exists, is the newest of convkit's
// archives in DIR; anything else is itself.
func ResolveArchive(arg string) (string, error) {
	if arg == "-" || filepath.Base(arg) != "latest" {
		return arg, nil
	}
	if _, err := os.Lstat(arg); !errors.Is(err, fs.ErrNotExist) {
		return arg, nil
	}
	dir := filepath.Dir(arg)
	list, err := ListArchives(dir)
	if err != nil {
		return "", fmt.Errorf("%s: %w", arg, err)
	}
	if len(list) == 0 {
		return "", fmt.Errorf("%s: no archive named convkit-<UTC time>.tar.zst in %s", arg, dir)
	}
	return list[len(list)-1].Path, nil
}

// RecordOptions say how VerifyArchive records a verification.
type RecordOptions struct {
	ToolVersion string
	Now         func() time.Time // default time.Now
}

// VerifyArchive verifies the archive file at path as Verify does and, when
// it is one of convkit's archives (IsArchiveName), records the
// verification in its sidecar, good or bad (not when interrupted). The
// verification is recorded with the file's size, modification time and
// SHA-256. opts.Progress counts the bytes of the file read, of its size.
// recordErr says why it could not be recorded; the verification stands
// either way.
func VerifyArchive(ctx context.Context, path string, opts VerifyOptions, ro RecordOptions) (res *VerifyResult, rec *Verification, recordErr, err error) {
	// The archive the user named: a link there is followed (it is only
	// read), but a FIFO never blocks the open, and is then refused.
	f, err := durable.OpenInput(path)
	if err != nil {
		return nil, nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, nil, fmt.Errorf("%s: %w", path, durable.ErrNotRegular)
	}
	h := sha256.New()
	cr := &countingReader{r: f, h: h, p: opts.Progress}
	if cr.p != nil {
		cr.p.SetTotal(fi.Size())
		opts.Progress = nil
	}
	if opts.Archive == "" {
		opts.Archive = path
	}
	res, err = Verify(ctx, cr, opts)
	if ctx.Err() != nil || !IsArchiveName(filepath.Base(path)) {
		return res, nil, nil, err
	}
	if ro.Now == nil {
		ro.Now = time.Now
	}
	rec = &Verification{At: ro.Now().UTC(), Size: fi.Size(), ModTime: fi.ModTime().UTC(), ToolVersion: ro.ToolVersion}
	switch {
	case err != nil:
		rec.Problem = err.Error()
	case !res.OK:
		rec.Problem = res.Mismatches[0].Name + ": " + res.Mismatches[0].Problem
	default:
		rec.OK = true
		if rec.InvalidLogs = res.InvalidLogs; len(res.Invalid) > 0 {
			// The strict reader's error names the log already.
			rec.Invalid = res.Invalid[0].Problem
			if !strings.Contains(rec.Invalid, res.Invalid[0].Name) {
				rec.Invalid = res.Invalid[0].Name + ": " + rec.Invalid
			}
		}
		// The reader stops after the tar trailer and what little may follow
		// it; the digest covers the whole file.
		if _, cerr := io.Copy(io.Discard, cr); cerr == nil && cr.n == fi.Size() {
			rec.SHA256 = hex.EncodeToString(h.Sum(nil))
		}
	}
	info, rerr := readInfo(path)
	if rerr != nil || info == nil {
		// Start a sidecar from what the verification read.
		info = &Info{Size: fi.Size()}
		if res != nil {
			info.CreatedAt, info.ToolVersion, info.Online = res.CreatedAt, res.ToolVersion, res.Online
			info.Conversations, info.Logs, info.Files, info.Bytes = res.Expected.Conversations, res.Logs, res.Files, res.Bytes
		}
	}
	info.Verified = rec
	return res, rec, writeInfo(path, info), err
}

// countingReader hashes and counts what is read through it, and reports
// it to p.
type countingReader struct {
	r io.Reader
	h hash.Hash
	n int64
	p progress.Progress
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	if c.p != nil && n > 0 {
		c.p.Add(int64(n))
	}
	return n, err
}
