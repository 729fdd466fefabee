//go:build linux

package crashtest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/convkit/convkit/fixtures"
)

// noMount makes TestFullDisk act as if mount(2) were not permitted, to
// run only its fallback: CONVKIT_CRASH_NO_MOUNT=1.
var noMount = os.Getenv("CONVKIT_CRASH_NO_MOUNT") != ""

// TestFullDisk runs import and restore --force where there is no room:
//
//   - on a small tmpfs, filled to its last byte, that holds the store
//     (import) or the directory the target is in (restore): they refuse
//     before writing, saying how much they need;
//   - under RLIMIT_FSIZE, which makes the first large file they write
//     fail half-way (EFBIG), as a disk that fills while they write:
//     this also runs where mount(2) is not permitted.
//
// Either way the command exits 1, the store (or the replaced one) is
// intact, nothing is half-published and no temporary file is left. With
// the room back, the same command then gives the result of a run that had
// room all along.
func TestFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("builds convkit and mounts file systems")
	}
	h := &harness{env: childEnv(t.TempDir())}
	in := prepareInputs(t, h)
	for _, j := range []*job{importJob(h, in), restoreJob(h, in)} {
		t.Run(j.name, func(t *testing.T) {
			base := t.TempDir()
			ref := j.prepare(t, filepath.Join(base, "ref"))
			refCode := h.run(t, ref.args...).code
			want := ref.result(t)
			os.RemoveAll(filepath.Join(base, "ref"))

			t.Run("tmpfs", func(t *testing.T) {
				dir := filepath.Join(base, "tmpfs")
				// The file system of the store import writes, or of the
				// directory restore stages the target beside.
				fsDir := filepath.Join(dir, "data")
				if j.name == "restore" {
					fsDir = filepath.Join(dir, "t")
				}
				if err := mountTmpfs(t, fsDir, 256<<20); err != nil {
					t.Skipf("%v (the RLIMIT_FSIZE case runs instead)", err)
				}
				tr := j.prepare(t, dir)
				filler := fill(t, fsDir)
				before := hashTree(t, tr.dataDir, isLockFile)
				o := h.run(t, tr.args...)
				if o.code != 1 || !strings.Contains(o.stderr, "free after the") {
					t.Fatalf("on a full file system: exit %d, want 1 and the room it needs\n%s", o.code, o.stderr)
				}
				t.Logf("on a full file system: %s", strings.TrimSpace(o.stderr))
				noHarm(t, tr, "full tmpfs", before)
				if err := os.Remove(filler); err != nil {
					t.Fatal(err)
				}
				again(t, h, tr, refCode, want, "full tmpfs, with room again")
			})

			t.Run("RLIMIT_FSIZE", func(t *testing.T) {
				tr := j.prepare(t, filepath.Join(base, "rlimit"))
				before := hashTree(t, tr.dataDir, isLockFile)
				o := h.runLimited(t, 64, tr.args...)
				if o.code != 1 || !strings.Contains(o.stderr, "file too large") {
					t.Fatalf("under RLIMIT_FSIZE: exit %d, want 1 and \"file too large\"\n%s", o.code, o.stderr)
				}
				t.Logf("under RLIMIT_FSIZE: %s", strings.TrimSpace(o.stderr))
				noHarm(t, tr, "RLIMIT_FSIZE", before)
				again(t, h, tr, refCode, want, "RLIMIT_FSIZE, unlimited again")
			})
		})
	}
}

// noHarm checks a trial after a run that failed for want of room: the
// inputs intact, nothing half-published, no temporary file, and the store
// (the target, for restore) as it was.
func noHarm(t *testing.T, tr *trial, at string, before map[string]string) {
	t.Helper()
	tr.intact(t, at)
	tr.published(t, at, nil)
	if left := temps(t, tr.scan...); len(left) > 0 {
		t.Fatalf("%s: temporary files remain: %v", at, left)
	}
	if after := hashTree(t, tr.dataDir, isLockFile); !equalMaps(after, before) {
		t.Fatalf("%s: the store changed", at)
	}
}

// again reruns the trial's command and checks it exits and results as a
// run with room does.
func again(t *testing.T, h *harness, tr *trial, code int, want map[string]string, at string) {
	t.Helper()
	if o := h.run(t, tr.args...); o.code != code {
		t.Fatalf("%s: exit %d, want %d\n%s", at, o.code, code, o.stderr)
	}
	tr.intact(t, at)
	tr.published(t, at, want)
	if left := temps(t, tr.scan...); len(left) > 0 {
		t.Fatalf("%s: temporary files remain: %v", at, left)
	}
	compare(t, at, want, tr.result(t), tr.extra)
}

// runLimited runs convkit under RLIMIT_FSIZE: no file it writes may grow
// past blocks × 512 bytes (Go ignores SIGXFSZ, so the write fails with
// EFBIG).
func (h *harness) runLimited(t *testing.T, blocks int, args ...string) outcome {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"-c", fmt.Sprintf(`ulimit -f %d && exec "$0" "$@"`, blocks), bin}, args...)...)
	cmd.Env = h.env
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	o := outcome{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee) && ee.Exited():
		o.code = ee.ExitCode()
	default:
		t.Fatalf("convkit %s under ulimit -f %d: %v\n%s", strings.Join(args, " "), blocks, err, o.stderr)
	}
	return o
}

// mountTmpfs mounts a tmpfs of size bytes at dir (made if missing),
// unmounted when the test ends, or says why it cannot.
func mountTmpfs(t *testing.T, dir string, size int64) error {
	t.Helper()
	if noMount {
		return errors.New("CONVKIT_CRASH_NO_MOUNT is set")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return nil
}

// fill writes dir/filler until its file system is full, and returns its
// path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for _, n := range []int{len(buf), 4096, 1} {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatal(err)
				}
				break
			}
		}
	}
	return p
}

// TestFullDiskExport runs `export --to FILE` where FILE's file system has
// no room: on a tmpfs filled to its last byte, and under RLIMIT_FSIZE (a
// disk that fills while the archive is written). Either way export exits
// 1 naming the temporary file it could not write, publishes nothing at
// FILE, leaves no temporary file and the store as it was; with room again
// the same command publishes the archive an export with room gives.
func TestFullDiskExport(t *testing.T) {
	if testing.Short() {
		t.Skip("builds convkit and mounts file systems")
	}
	h := &harness{env: childEnv(t.TempDir())}
	base := t.TempDir()
	data := filepath.Join(base, "data")
	rep := generate(t, data, 35, 20)
	var ids []string
	for _, c := range rep.Conversations {
		if !c.Deleting && !c.Has(fixtures.CaseCorrupt) {
			ids = append(ids, c.ID)
		}
	}
	orig := hashTree(t, data, isLockFile)
	args := func(file string) []string {
		return append([]string{"--data-dir", data, "-q", "export", "--to", file}, ids...)
	}
	ref := filepath.Join(base, "ref", "out.tar.zst")
	if err := os.MkdirAll(filepath.Dir(ref), 0o700); err != nil {
		t.Fatal(err)
	}
	h.must(t, 0, args(ref)...)
	want := withoutKeys(t, manifestOf(t, ref), "createdAt")
	again := func(t *testing.T, at, dir string) {
		t.Helper()
		file := filepath.Join(dir, "out.tar.zst")
		h.must(t, 0, args(file)...)
		if got := withoutKeys(t, manifestOf(t, file), "createdAt"); got != want {
			t.Fatalf("%s: the archive's manifest is not that of an export with room", at)
		}
		if left := temps(t, dir); len(left) > 0 {
			t.Fatalf("%s: temporary files remain: %v", at, left)
		}
	}
	(&outOfRoom{h: h, data: data, orig: orig, temp: ".out.tar.zst.",
		args: func(dir string) []string { return args(filepath.Join(dir, "out.tar.zst")) },
		published: func(t *testing.T, dir string) []string {
			file := filepath.Join(dir, "out.tar.zst")
			if _, err := os.Lstat(file); !errors.Is(err, os.ErrNotExist) {
				return []string{file}
			}
			return nil
		},
		again: again}).run(t, base)
}

// TestFullDiskBackup: `backup --to DIR` where the archive does not fit (a
// full tmpfs holding DIR; RLIMIT_FSIZE, also where mount(2) is not
// permitted) exits 1 naming the temporary archive it could not write,
// publishes no archive, leaves no temporary file in DIR and the store as
// it was; with room again the same command publishes the archive a backup
// with room writes. (The hostile catalogue's full-disk backup case checks
// the message and the temporary file on one of the two; this one also
// checks the store, both ways of running out of room, and the rerun.)
func TestFullDiskBackup(t *testing.T) {
	if testing.Short() {
		t.Skip("builds convkit and mounts file systems")
	}
	h := &harness{env: childEnv(t.TempDir())}
	base := t.TempDir()
	data := filepath.Join(base, "data")
	generate(t, data, 36, 20)
	h.must(t, 0, "--data-dir", data, "-q", "reindex")
	orig := hashTree(t, data, isLockFile)
	args := func(dir string) []string { return []string{"--data-dir", data, "-q", "backup", "--to", dir} }
	refDir := filepath.Join(base, "ref")
	refCode := h.run(t, args(refDir)...).code
	archives := func(t *testing.T, dir string) []string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(dir, "convkit-*.tar.zst"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	ref := archives(t, refDir)
	if len(ref) != 1 {
		t.Fatalf("the backup with room made %v (exit %d)", ref, refCode)
	}
	want := withoutKeys(t, manifestOf(t, ref[0]), "createdAt")
	again := func(t *testing.T, at, dir string) {
		t.Helper()
		if o := h.run(t, args(dir)...); o.code != refCode {
			t.Fatalf("%s: exit %d, want %d as with room\n%s", at, o.code, refCode, o.stderr)
		}
		m := archives(t, dir)
		if len(m) != 1 {
			t.Fatalf("%s: archives %v, want one", at, m)
		}
		if got := withoutKeys(t, manifestOf(t, m[0]), "createdAt"); got != want {
			t.Fatalf("%s: the archive's manifest is not that of a backup with room", at)
		}
		if left := temps(t, dir); len(left) > 0 {
			t.Fatalf("%s: temporary files remain: %v", at, left)
		}
	}
	(&outOfRoom{h: h, data: data, orig: orig, temp: ".convkit-", args: args, published: archives, again: again}).run(t, base)
}

// outOfRoom runs a command that writes one file into a directory where it
// does not fit: a full tmpfs, then RLIMIT_FSIZE (also where mount(2) is
// not permitted). Each run must exit 1 naming the temporary file it could
// not write (in the directory, its name starting with temp) and why,
// publish nothing, leave no temporary file and the store at data as orig
// hashes it; with room again, again checks the same command.
type outOfRoom struct {
	h         *harness
	data      string
	orig      map[string]string
	temp      string
	args      func(dir string) []string
	published func(t *testing.T, dir string) []string
	again     func(t *testing.T, at, dir string)
}

func (r *outOfRoom) run(t *testing.T, base string) {
	t.Run("tmpfs", func(t *testing.T) {
		dir := filepath.Join(base, "tmpfs")
		if err := mountTmpfs(t, dir, 8<<20); err != nil {
			t.Skipf("%v (the RLIMIT_FSIZE case runs instead)", err)
		}
		filler := fill(t, dir)
		r.failed(t, "on a full file system", dir, r.h.run(t, r.args(dir)...), "no space left on device")
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		r.again(t, "full tmpfs, with room again", dir)
	})
	t.Run("RLIMIT_FSIZE", func(t *testing.T) {
		dir := filepath.Join(base, "rlimit")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		r.failed(t, "under RLIMIT_FSIZE", dir, r.h.runLimited(t, 16, r.args(dir)...), "file too large")
		r.again(t, "RLIMIT_FSIZE, unlimited again", dir)
	})
}

func (r *outOfRoom) failed(t *testing.T, at, dir string, o outcome, wantErr string) {
	t.Helper()
	if o.code != 1 || !strings.Contains(o.stderr, wantErr) || !strings.Contains(o.stderr, filepath.Join(dir, r.temp)) {
		t.Fatalf("%s: exit %d, want 1 naming the temporary file and %q\n%s", at, o.code, wantErr, o.stderr)
	}
	t.Logf("%s: %s", at, strings.TrimSpace(o.stderr))
	if p := r.published(t, dir); len(p) > 0 {
		t.Fatalf("%s: published %v", at, p)
	}
	if left := temps(t, dir); len(left) > 0 {
		t.Fatalf("%s: temporary files remain: %v", at, left)
	}
	if !equalMaps(hashTree(t, r.data, isLockFile), r.orig) {
		t.Fatalf("%s: the store changed", at)
	}
}
