package backup

import (
	"bufio"
	"bytes"
	"cmp"
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
	"strconv"
	"strings"
	"time"

	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/progress"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// Archive names: convkit-<UTC time>[-N].tar.zst, -N for a second archive
// in the same second. Retention touches nothing else.
const (
	archivePrefix = "convkit-"
	archiveSuffix = ".tar.zst"
	timeLayout    = "20060102T150405Z"
)

var archiveRE = regexp.MustCompile(`^convkit-(\d{8}T\d{6}Z)(?:-([1-9]\d{0,5}))?\.tar\.zst$`)

func archiveName(t time.Time) string {
	return archivePrefix + t.UTC().Format(timeLayout) + archiveSuffix
}

// ArchiveInfo is one of convkit's archives found in a directory.
type ArchiveInfo struct {
	Name      string    `json:"name"`
	Path      string    `json:"path"`
	Time      time.Time `json:"time"`
	Seq       int       `json:"-"`
	Size      int64     `json:"size"`
	ModTime   time.Time `json:"-"`
	Info      *Info     `json:"-"` // the sidecar, nil when none (or InfoError)
	InfoError string    `json:"-"`
}

// Verification states of an archive (ArchiveInfo.Verification).
const (
	VerifiedOK     = "ok"     // the last verification of this very file matched
	VerifiedFailed = "failed" // the last verification of this very file failed
	VerifiedStale  = "stale"  // verified, but the file's size or time changed since
	VerifiedNever  = "no"     // never verified (or no readable sidecar)
	// VerifiedInvalid: it holds logs that do not read, found by its last
	// verification or by the backup; verify and restore exit 3 on it.
	VerifiedInvalid = "invalid"
)

// Verification is the state of the sidecar's last verification, if it was
// of the file as it is now (size and time).
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

// ListArchives lists convkit's archives in dir, oldest first, with their
// sidecars.
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
		seq, _ := strconv.Atoi(m[2]) // 0 without one
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
	slices.SortFunc(out, func(a, b ArchiveInfo) int {
		return cmp.Or(a.Time.Compare(b.Time), cmp.Compare(a.Seq, b.Seq))
	})
	return out, nil
}

// DirOptions configure ToDir.
type DirOptions struct {
	Options
	Retention Retention // applied once the new archive is complete
	DryRun    bool      // writes and deletes nothing: Plan says what would be
}

// DirResult is what ToDir did (on a dry run: would do, Plan set).
type DirResult struct {
	Archive      string
	Result       *Result
	Deleted      []string // by retention
	RemovedTemps []string // temporary archives of killed backups
	InfoError    string   // why the sidecar was not written (the archive is complete)
	Plan         *Plan
}

// Plan is what a dry run found: the files a backup would archive.
type Plan struct {
	Online   bool          `json:"online"`
	Index    string        `json:"index"`
	Holder   *store.Holder `json:"holder"`
	Files    []PlanFile    `json:"files"`
	Bytes    int64         `json:"bytes"`
	Problems []store.Item  `json:"problems"` // files that would be left out
	// Logs are the log files of Files, in Conversations directories.
	Logs, Conversations int
}

// PlanFile is one file a backup would archive, at its current size.
type PlanFile struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// ToDir takes a backup of the store s into dir (made 0700 if missing),
// published by link only when complete. Killed backups' temporaries are
// removed first, and the archives opts.Retention does not keep last.
func ToDir(ctx context.Context, s *store.Store, dir string, opts DirOptions) (*DirResult, error) {
	opts.defaults()
	if opts.Retention.Last < 0 || opts.Retention.Daily < 0 || opts.Retention.Weekly < 0 || opts.Retention.Monthly < 0 {
		return nil, errors.New("retention counts must not be negative")
	}
	now := opts.Now()
	res := &DirResult{}
	if opts.DryRun {
		plan, err := PlanBackup(s, opts.NoIndex)
		if err != nil {
			return nil, err
		}
		res.Archive, _ = publishArchive("", dir, now)
		res.Plan, res.Deleted = plan, []string{}
		if !opts.Retention.IsZero() {
			if res.Deleted, err = prune(dir, opts.Retention, res.Archive, now, true); err != nil {
				return nil, err
			}
		}
		return res, nil
	}
	if err := durable.MkdirAll(dir); err != nil {
		return nil, err
	}
	res.RemovedTemps = removeStaleTemps(dir)
	// Flocked, so a sweep leaves it; once published, Discard only unlocks.
	tmp, err := archive.CreateTemp(filepath.Join(dir, archiveName(now)))
	if err != nil {
		return nil, err
	}
	defer tmp.Discard()
	tmpName := tmp.Name()
	wo := opts.Options
	wo.TempDir = dir
	wo.snapshotPath = tmpName + snapshotSuffix
	// Written back as it goes, so the final fsync waits for little.
	wb := durable.NewWriteback(tmp.File, archive.WritebackBytes)
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
	res.Archive, res.Result = final, r
	m := r.Manifest
	info := &Info{Size: r.Bytes, CreatedAt: now.UTC().Truncate(time.Second), ToolVersion: m.ToolVersion, Online: m.Online,
		Conversations: m.Counts.Conversations, Logs: m.Counts.Logs, Files: m.Counts.Files, Bytes: m.Counts.Bytes,
		LogCheck: m.LogCheck, InvalidLogs: m.Counts.InvalidLogs}
	if err := writeInfo(final, info); err != nil {
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

// publishArchive links tmpName to the first free archive name of now,
// never replacing a file; a dry run (tmpName "") only names it.
func publishArchive(tmpName, dir string, now time.Time) (string, error) {
	base := strings.TrimSuffix(archiveName(now), archiveSuffix)
	for seq := 1; seq < 1000; seq++ {
		final := filepath.Join(dir, base+archiveSuffix)
		if seq > 1 {
			final = filepath.Join(dir, base+"-"+strconv.Itoa(seq)+archiveSuffix)
		}
		if tmpName == "" {
			if _, err := os.Lstat(final); errors.Is(err, fs.ErrNotExist) {
				return final, nil
			}
			continue
		}
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
	if tmpName == "" {
		return filepath.Join(dir, archiveName(now)), nil
	}
	return "", fmt.Errorf("%s: no free archive name for %s", dir, archiveName(now))
}

// Suffixes of the files ToDir makes beside its temporary archive.
const (
	snapshotSuffix = ".index"
	spoolSuffix    = ".manifest-"
)

// companionOf is the archive, temporary or not, a file beside it goes with.
func companionOf(name string) (string, bool) {
	if a, ok := strings.CutSuffix(name, infoSuffix); ok && isArchiveName(a) {
		return a, true
	}
	if a, ok := strings.CutSuffix(name, snapshotSuffix); ok && isTempArchive(a) {
		return a, true
	}
	if i := strings.LastIndex(name, spoolSuffix); i > 0 && isTempArchive(name[:i]) {
		return name[:i], true
	}
	return "", false
}

func isArchiveOrInfo(name string) bool {
	return isArchiveName(strings.TrimSuffix(name, infoSuffix))
}

func isTempArchive(name string) bool {
	final, ok := archive.TempOf(name)
	return ok && isArchiveName(final)
}

// removeStaleTemps removes temporary archives and sidecars whose writer is
// gone, then their companions and the sidecars of archives gone.
func removeStaleTemps(dir string) []string {
	var removed []string
	for _, sw := range archive.SweepTemps(dir, isArchiveOrInfo) {
		if sw.Err == nil {
			removed = append(removed, sw.Path)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return removed
	}
	present := map[string]bool{}
	for _, e := range ents {
		present[e.Name()] = true
	}
	n := len(removed)
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if of, ok := companionOf(e.Name()); ok && e.Type().IsRegular() && !present[of] && os.Remove(p) == nil {
			removed = append(removed, p)
		}
	}
	if len(removed) > n {
		durable.SyncDir(dir)
	}
	return removed
}

// prune deletes the archives in dir that r does not keep; with dryRun it
// lists them, as if keepPath, taken at now, were there.
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
			if fi, err := os.Lstat(infoPath(a.Path)); err == nil && fi.Mode().IsRegular() {
				os.Remove(infoPath(a.Path))
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

// Retention says which archives of a directory a backup keeps, by restic
// forget's policies: an archive any of them keeps stays. The zero Retention
// keeps every archive. Days, ISO weeks and months are UTC's.
type Retention struct {
	Last   int  // the newest Last
	Within Span // taken within Within of the newest
	// The newest archive of each of the last N days (weeks, months) that
	// have one.
	Daily, Weekly, Monthly int
}

func (r Retention) IsZero() bool { return r == Retention{} }

// keeps returns the paths of list (oldest first) that r keeps, with
// keepPath and the newest verified one. One named more than futureSkew
// past now is kept outside the policies: as the newest, one wrong clock
// would make Within and Last delete the rest.
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
		if a.Time.After(now.Add(futureSkew)) {
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
	if !r.Within.IsZero() && len(newest) > 0 {
		from := r.Within.Before(newest[0].Time)
		for _, a := range newest {
			if !a.Time.Before(from) {
				kept[a.Path] = true
			}
		}
	}
	bucket := func(n int, key func(ArchiveInfo) string) {
		last := ""
		for _, a := range newest {
			if n == 0 {
				return
			}
			if k := key(a); k != last {
				kept[a.Path] = true
				last = k
				n--
			}
		}
	}
	bucket(r.Last, func(a ArchiveInfo) string { return a.Path })
	bucket(r.Daily, func(a ArchiveInfo) string { return a.Time.UTC().Format("2006-01-02") })
	bucket(r.Weekly, func(a ArchiveInfo) string { y, w := a.Time.UTC().ISOWeek(); return fmt.Sprintf("%d-W%02d", y, w) })
	bucket(r.Monthly, func(a ArchiveInfo) string { return a.Time.UTC().Format("2006-01") })
	return kept
}

// PlanBackup lists, reading no log and taking no lock, the files a backup
// of s would archive at their current sizes.
func PlanBackup(s *store.Store, noIndex bool) (*Plan, error) {
	p := &Plan{Files: []PlanFile{}, Problems: []store.Item{}, Index: IndexAbsent}
	st, err := s.LockStatus()
	if err == nil && st.Held {
		p.Online, p.Holder = true, st.Holder
	}
	if ifi, err := os.Lstat(s.IndexPath()); err == nil {
		if !ifi.Mode().IsRegular() {
			p.Index = IndexUnreadable
			p.Problems = append(p.Problems, store.Item{Kind: store.ItemUnreadable, Path: s.IndexPath(), Reason: "not a regular file (symbolic links are not followed)"})
		} else if !noIndex {
			p.Index = IndexSnapshot
			p.Files = append(p.Files, PlanFile{Name: store.IndexFileName, Size: ifi.Size()})
			p.Bytes += ifi.Size()
		}
	}
	if noIndex {
		p.Index = IndexLeftOut
	}
	tree, err := s.Walk()
	if err != nil {
		return nil, err
	}
	jobs := jobsOf(tree)
	last := -1
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
		p.Logs++
		if j.convIdx != last {
			p.Conversations, last = p.Conversations+1, j.convIdx
		}
	}
	for _, pr := range tree.Problems {
		if pr.Kind != store.ItemWarning {
			pr.Kind = store.ItemUnreadable
			p.Problems = append(p.Problems, pr)
		}
	}
	return p, nil
}

// ErrNoArchive: a backup directory holds none of convkit's archives.
var ErrNoArchive = errors.New("no archive named convkit-<UTC time>.tar.zst")

// futureSkew is how far past the clock an archive's name may be before
// Latest with a MaxAge refuses it and retention sets it aside.
const futureSkew = 5 * time.Minute

// LatestOptions say what Latest requires of the newest archive.
type LatestOptions struct {
	MaxAge   Span             // how old, by its name, it may be
	Verified bool             // its Verification must be VerifiedOK
	Now      func() time.Time // default time.Now
}

// Latest returns the newest archive in dir, with an error saying why when
// it does not meet opts; ErrNoArchive when there is none.
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
	stale := func(format string, args ...any) (*ArchiveInfo, error) {
		return &a, errors.New(a.Path + ": " + fmt.Sprintf(format, args...))
	}
	taken := a.Time.UTC().Format(time.RFC3339)
	if !opts.MaxAge.IsZero() && a.Time.After(now.Add(futureSkew)) {
		return stale("taken %s, later than now (%s): its age cannot be told", taken, now.UTC().Format(time.RFC3339))
	}
	if !opts.MaxAge.IsZero() && a.Time.Before(opts.MaxAge.Before(now)) {
		return stale("taken %s, %s ago: older than %s", taken, now.Sub(a.Time).Truncate(time.Minute), opts.MaxAge)
	}
	v := a.Verification()
	switch {
	case !opts.Verified || v == VerifiedOK:
		return &a, nil
	case v == VerifiedFailed && a.Info.Verified.Problem != "":
		return stale("its verification failed: %s", a.Info.Verified.Problem)
	}
	return stale("%s", unverified[v])
}

var unverified = map[string]string{
	VerifiedNever:   "not verified (convkit backup verify records it)",
	VerifiedStale:   "changed since it was verified",
	VerifiedInvalid: "it holds logs that do not read (INVALID)",
	VerifiedFailed:  "its verification failed",
}

// Span is a length of time as restic writes one: years, months, days and
// hours ("1y6m", "26h"), counted back on the calendar (time.AddDate).
type Span struct {
	Years, Months, Days, Hours int
}

// ParseSpan reads a Span: whole numbers each followed by y, m, d or h,
// each unit at most once, in that order.
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

func (s Span) Before(t time.Time) time.Time {
	return t.AddDate(-s.Years, -s.Months, -s.Days).Add(-time.Duration(s.Hours) * time.Hour)
}

func (s Span) IsZero() bool { return s == Span{} }

func (s Span) String() string {
	var b strings.Builder
	for i, n := range []int{s.Years, s.Months, s.Days, s.Hours} {
		if n > 0 {
			fmt.Fprintf(&b, "%d%c", n, "ymdh"[i])
		}
	}
	return cmp.Or(b.String(), "0h")
}

// An archive's sidecar, ARCHIVE.json, holds what the backup recorded (so
// 'backup list' need not read the archive) and its last verification.
const (
	infoSuffix        = ".json"
	infoFormat        = "convkit-backup-info"
	infoFormatVersion = 1
	maxInfoBytes      = 64 << 10
)

// Info is an archive's sidecar. Readers ignore fields they do not know.
type Info struct {
	Format        string        `json:"format"`
	FormatVersion int           `json:"formatVersion"`
	Archive       string        `json:"archive"` // the file name it describes
	Size          int64         `json:"size"`
	CreatedAt     time.Time     `json:"createdAt"`
	ToolVersion   string        `json:"toolVersion"`
	Online        bool          `json:"online"`
	Conversations int           `json:"conversations"`
	Logs          int           `json:"logs"`
	Files         int           `json:"files"`
	Bytes         int64         `json:"bytes"`
	LogCheck      string        `json:"logCheck,omitempty"`
	InvalidLogs   int           `json:"invalidLogs"`
	Verified      *Verification `json:"verified"` // the last 'backup verify', null until one ran
}

// Verification is one run of 'backup verify' on an archive file.
type Verification struct {
	At          time.Time `json:"at"`
	OK          bool      `json:"ok"`
	Problem     string    `json:"problem,omitempty"` // the first mismatch, or why it was refused
	InvalidLogs int       `json:"invalidLogs"`
	Invalid     string    `json:"invalid,omitempty"` // the first invalid log
	// The file as verified (SHA256 empty when it stopped early).
	Size        int64     `json:"size"`
	ModTime     time.Time `json:"modTime"`
	SHA256      string    `json:"sha256,omitempty"`
	ToolVersion string    `json:"toolVersion"`
}

func infoPath(archivePath string) string { return archivePath + infoSuffix }

func isArchiveName(name string) bool { return archiveRE.MatchString(name) }

// readInfo reads the sidecar of archivePath (nil when none).
func readInfo(archivePath string) (*Info, error) {
	f, err := durable.OpenRegular(infoPath(archivePath), os.O_RDONLY)
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
	if info.Format != infoFormat || info.Archive != filepath.Base(archivePath) {
		return nil, fmt.Errorf("%s: not the sidecar of %s (format %s, archive %s)", f.Name(), filepath.Base(archivePath), termtext.Quote(info.Format), termtext.Quote(info.Archive))
	}
	return &info, nil
}

func writeInfo(archivePath string, info *Info) error {
	info.Format, info.FormatVersion, info.Archive = infoFormat, infoFormatVersion, filepath.Base(archivePath)
	data, err := json.Marshal(info)
	if err != nil {
		return err
	}
	final := infoPath(archivePath)
	if fi, err := os.Lstat(final); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w: not replaced", final, durable.ErrNotRegular)
	}
	return publishSmall(final, append(data, '\n'), 0o600)
}

// ResolveArchive names the archive an argument means: "DIR/latest", when no
// file of that name exists, is the newest archive in DIR.
func ResolveArchive(arg string) (string, error) {
	if arg == "-" || filepath.Base(arg) != "latest" {
		return arg, nil
	}
	if _, err := os.Lstat(arg); !errors.Is(err, fs.ErrNotExist) {
		return arg, nil
	}
	a, err := Latest(filepath.Dir(arg), LatestOptions{})
	if errors.Is(err, ErrNoArchive) {
		return "", fmt.Errorf("%s: %v in %s", arg, ErrNoArchive, filepath.Dir(arg))
	} else if err != nil {
		return "", fmt.Errorf("%s: %w", arg, err)
	}
	return a.Path, nil
}

// VerifyArchive checks the archive at path ("-": opts.Stdin) as a restore
// does, under opts.WorkDir: every entry and checksum against the manifest,
// every log read as at backup time, the metadata.db snapshot's
// quick_check, and an index rebuilt and compared. A damaged or hostile
// archive is an error, disagreements Mismatches. The verification of a
// named archive is recorded in its sidecar; recordErr says why it was not.
func VerifyArchive(ctx context.Context, path string, opts VerifyOptions) (res *VerifyResult, rec *Verification, recordErr, err error) {
	var in io.Reader = opts.Stdin
	var fi os.FileInfo
	if path != "-" {
		// A link is followed (it is only read); a FIFO is refused unblocked.
		f, err := durable.OpenInput(path)
		if err != nil {
			return nil, nil, nil, err
		}
		defer f.Close()
		if fi, err = f.Stat(); err != nil {
			return nil, nil, nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, nil, nil, fmt.Errorf("%s: %w", path, durable.ErrNotRegular)
		}
		in = f
	}
	cr := &countingReader{r: in, h: sha256.New(), p: opts.Progress}
	if fi == nil {
		cr.h = nil // nothing to record
	} else if cr.p != nil {
		cr.p.SetTotal(fi.Size())
	}
	opts.Progress = nil
	if opts.Archive == "" {
		opts.Archive = path
	}
	opts.defaults()
	dir, err := os.MkdirTemp(opts.WorkDir, "convkit-verify-")
	if err != nil {
		return nil, nil, nil, err
	}
	defer os.RemoveAll(dir)
	res, err = verifyInto(ctx, cr, dir, opts, false, false)
	if fi == nil || ctx.Err() != nil || !isArchiveName(filepath.Base(path)) {
		return res, nil, nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	rec = &Verification{At: opts.Now().UTC(), Size: fi.Size(), ModTime: fi.ModTime().UTC(), ToolVersion: opts.ToolVersion}
	switch {
	case err != nil:
		rec.Problem = err.Error()
	case !res.OK:
		rec.Problem = res.Mismatches[0].Path + ": " + res.Mismatches[0].Reason
	default:
		rec.OK = true
		if rec.InvalidLogs = res.InvalidLogs; len(res.Invalid) > 0 {
			rec.Invalid = res.Invalid[0].String() // its reason never names the log
		}
		// The reader stopped at the tar trailer; the digest is the file's.
		if _, cerr := io.Copy(io.Discard, cr); cerr == nil && cr.n == fi.Size() {
			rec.SHA256 = hex.EncodeToString(cr.h.Sum(nil))
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

type countingReader struct {
	r io.Reader
	h hash.Hash
	n int64
	p progress.Progress
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if c.h != nil {
		c.h.Write(p[:n])
	}
	c.n += int64(n)
	if c.p != nil && n > 0 {
		c.p.Add(int64(n))
	}
	return n, err
}

// metricsMode: node_exporter reads the file as its own user; it holds
// counts and times only.
const metricsMode = 0o644

const maxMetricsBytes = 64 << 10

// MetricsRun is one backup run, for WriteMetrics.
type MetricsRun struct {
	End      time.Time
	Duration time.Duration
	ExitCode int
	Result   *Result // nil: no complete archive, the earlier file's figures stay
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metrics are the gauges; those of an archive (!run) keep their values
// after a run that made none.
var metrics = []struct {
	name, help string
	run        bool
	value      func(MetricsRun) float64
}{
	{"convkit_backup_last_success_timestamp_seconds", "When the last run that wrote a complete archive ended (Unix seconds; 0: none yet). Exit 3 counts: the archive is complete, the problems have metrics of their own.", false, func(r MetricsRun) float64 { return float64(r.End.Unix()) }},
	{"convkit_backup_last_run_timestamp_seconds", "When the last run ended (Unix seconds), whatever its outcome.", true, func(r MetricsRun) float64 { return float64(r.End.Unix()) }},
	{"convkit_backup_last_run_exit_code", "The last run's exit status (0 success, 1 failure, 3 complete but a file left out or a log invalid, 130 interrupted).", true, func(r MetricsRun) float64 { return float64(r.ExitCode) }},
	{"convkit_backup_duration_seconds", "How long the last run took, in seconds.", true, func(r MetricsRun) float64 { return r.Duration.Seconds() }},
	{"convkit_backup_archive_bytes", "The last complete archive's size in bytes.", false, func(r MetricsRun) float64 { return float64(r.Result.Bytes) }},
	{"convkit_backup_conversations", "Conversations in the last complete archive.", false, func(r MetricsRun) float64 { return float64(r.Result.Manifest.Counts.Conversations) }},
	{"convkit_backup_files", "Files in the last complete archive (logs and the index).", false, func(r MetricsRun) float64 { return float64(r.Result.Manifest.Counts.Files) }},
	{"convkit_backup_bytes", "Bytes of the store's files in the last complete archive.", false, func(r MetricsRun) float64 { return float64(r.Result.Manifest.Counts.Bytes) }},
	{"convkit_backup_invalid_logs", "Logs of the last complete archive that failed their check (archived whole); see convkit_backup_strict.", false, func(r MetricsRun) float64 { return float64(r.Result.Manifest.Counts.InvalidLogs) }},
	{"convkit_backup_strict", "1 when the last complete archive's logs were read event by event (--strict), 0 when by their structure only: invalid_logs then counts broken framing, not content.", false, func(r MetricsRun) float64 { return boolValue(r.Result.Manifest.LogCheck == LogCheckStrict) }},
	{"convkit_backup_unreadable_files", "Files of the store left out of the last complete archive because they could not be read.", false, func(r MetricsRun) float64 { return float64(len(r.Result.Manifest.Problems)) }},
	{"convkit_backup_online", "1 when the last complete archive was taken while another process held runtime.lock.", false, func(r MetricsRun) float64 { return boolValue(r.Result.Manifest.Online) }},
}

// WriteMetrics replaces the file at path with run's metrics in the
// Prometheus text format (node_exporter's textfile collector).
func WriteMetrics(path string, run MetricsRun) error {
	var prev map[string]float64
	if run.Result == nil {
		var err error
		if prev, err = readMetrics(path); err != nil {
			return err
		}
	}
	var b bytes.Buffer
	for _, m := range metrics {
		v := prev[m.name]
		if m.run || run.Result != nil {
			v = m.value(run)
		}
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s %s\n", m.name, m.help, m.name, m.name, strconv.FormatFloat(v, 'f', -1, 64))
	}
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s: is a directory", path)
	}
	return publishSmall(path, b.Bytes(), metricsMode)
}

// readMetrics reads the values of an earlier metrics file at path.
func readMetrics(path string) (map[string]float64, error) {
	values := map[string]float64{}
	f, err := durable.OpenRegular(path, os.O_RDONLY)
	if errors.Is(err, fs.ErrNotExist) {
		return values, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, maxMetricsBytes))
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		if x, err := strconv.ParseFloat(v, 64); err == nil {
			values[name] = x
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return values, nil
}

// publishSmall replaces the file at path with data, mode perm, by a
// flocked temporary file renamed over it (a link is replaced, not followed).
func publishSmall(path string, data []byte, perm fs.FileMode) error {
	tmp, err := archive.CreateTemp(path)
	if err != nil {
		return err
	}
	defer tmp.Discard() // once renamed, it only unlocks
	name := tmp.Name()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	if err := os.Rename(name, path); err != nil {
		return fmt.Errorf("publish %s: %w", path, err)
	}
	return durable.SyncDir(filepath.Dir(path))
}
