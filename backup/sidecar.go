package backup

import (
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
	"strings"
	"time"

	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/progress"
	"github.com/convkit/convkit/internal/termtext"
)

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

// writeInfo publishes the sidecar of the archive at archivePath: a
// temporary file beside it (flock'ed while written, so that a backup
// cleaning up after killed writers leaves it alone), fsynced, renamed over
// the old sidecar, the directory fsynced. The rename replaces a directory
// entry; it never writes through a link.
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
	dir := filepath.Dir(final)
	tmp, err := durable.CreateTemp(dir, "."+filepath.Base(final))
	if err != nil {
		return err
	}
	name := tmp.Name()
	held, err := archive.LockTemp(tmp)
	if err != nil {
		tmp.Close()
		os.Remove(name)
		return err
	}
	defer held.Close()
	published := false
	defer func() {
		if !published {
			tmp.Close()
			os.Remove(name)
		}
	}()
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", name, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	if err := os.Rename(name, final); err != nil {
		return fmt.Errorf("publish %s: %w", final, err)
	}
	published = true
	return durable.SyncDir(dir)
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
