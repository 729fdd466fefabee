package backup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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
	// Keep, when positive, deletes convkit's archives in the directory
	// beyond the newest Keep (the new one included) once the new archive is
	// complete: Retention.Last.
	Keep int
	// Retention then deletes the archives it does not keep (see Keep).
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
// the archives opts.Retention (or Keep) does not keep are deleted.
func ToDir(ctx context.Context, s *store.Store, dir string, opts DirOptions) (*DirResult, error) {
	opts.defaults()
	if opts.Keep < 0 || opts.Retention.Last < 0 || opts.Retention.Daily < 0 || opts.Retention.Weekly < 0 || opts.Retention.Monthly < 0 {
		return nil, errors.New("retention counts must not be negative")
	}
	if opts.Keep > 0 {
		opts.Retention.Last = opts.Keep
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
	kept := r.keeps(list, keepPath)
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
// that a directory never loses its last known good archive.
func (r Retention) keeps(list []ArchiveInfo, keepPath string) map[string]bool {
	kept := map[string]bool{keepPath: true}
	if r.IsZero() {
		for _, a := range list {
			kept[a.Path] = true
		}
		return kept
	}
	newest := slices.Clone(list)
	slices.Reverse(newest)
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
	for _, j := range jobsOf(tree) {
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

// FutureSkew is how far past the clock the time in the newest archive's
// name may be before Latest with a MaxAge refuses it.
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
