package backup

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// The test binary doubles as the second processes the tests need.
const (
	// liveWriterEnv=DIR runs a fixtures.LiveWriter on DIR (the runtime:
	// it holds runtime.lock and appends) until SIGTERM.
	liveWriterEnv = "CONVKIT_TEST_LIVE_WRITER"
	liveCompEnv   = "CONVKIT_TEST_LIVE_COMPRESSION"
	// lockHolderEnv=DIR holds runtime.lock in DIR until killed.
	lockHolderEnv = "CONVKIT_TEST_LOCK_HOLDER"
	// backupEnv=DATADIR:OUTDIR runs ToDir, as `convkit backup --to`.
	backupEnv = "CONVKIT_TEST_BACKUP"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(liveWriterEnv) != "":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		lw := &fixtures.LiveWriter{DataDir: os.Getenv(liveWriterEnv), Every: 3 * time.Millisecond, Out: os.Stdout}
		if os.Getenv(liveCompEnv) == "zstd" {
			lw.Compression = convlog.Zstd
		}
		if err := lw.Run(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "live writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case os.Getenv(lockHolderEnv) != "":
		l, err := store.Open(context.Background(), os.Getenv(lockHolderEnv), store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "test holder"}, Create: store.CreateAlways})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println("locked")
		time.Sleep(time.Hour)
		l.Close()
		os.Exit(0)
	case os.Getenv(backupEnv) != "":
		data, out, _ := strings.Cut(os.Getenv(backupEnv), ":")
		fmt.Println("started")
		if _, err := toDir(context.Background(), data, out, DirOptions{Options: Options{Workers: 1}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child starts the test binary in one of its roles and returns it with a
// reader of its stdout.
func child(t *testing.T, env ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, bufio.NewReader(out)
}

func expectLine(t *testing.T, r *bufio.Reader, prefix string) string {
	t.Helper()
	line := make(chan string, 1)
	go func() {
		for {
			s, err := r.ReadString('\n')
			if err != nil || strings.HasPrefix(s, prefix) {
				line <- s
				return
			}
		}
	}()
	select {
	case s := <-line:
		if !strings.HasPrefix(s, prefix) {
			t.Fatalf("child said %q, want %q", s, prefix)
		}
		return s
	case <-time.After(60 * time.Second):
		t.Fatalf("no %q from the child", prefix)
	}
	return ""
}

func generate(t testing.TB, seed int64, n int, large bool) (string, *fixtures.Report) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	rep, err := fixtures.Generate(dir, fixtures.Options{Seed: seed, Conversations: n, Large: large, Compression: convlog.Zstd})
	if err != nil {
		t.Fatal(err)
	}
	return dir, rep
}

func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

// backupFile writes a backup of dataDir into a file and returns its path
// and the result.
func backupFile(t *testing.T, dataDir string, opts Options) (string, *Result) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "a.tar.zst")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if opts.TempDir == "" {
		opts.TempDir = t.TempDir()
	}
	res, err := writeBackup(context.Background(), dataDir, f, opts)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return p, res
}

func verifyFile(t *testing.T, p string) *VerifyResult {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := verifyReader(t, f, VerifyOptions{Archive: p, WorkDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func restoreFile(t *testing.T, p string, opts RestoreOptions) (*RestoreResult, error) {
	t.Helper()
	return restoreFileAt(t, p, opts, nil)
}

// restoreFileAt is restoreFile with the target store opened on the clock
// now, which names what is moved aside.
func restoreFileAt(t *testing.T, p string, opts RestoreOptions, now func() time.Time) (*RestoreResult, error) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opts.Archive = p
	return restoreAs(context.Background(), f, opts, now)
}

// restoreAs restores as the restore command does: a free target is made a
// store of (Restore); one that holds something is opened as a store,
// runtime.lock taken, and restored into.
func restoreAs(ctx context.Context, r io.Reader, opts RestoreOptions, now func() time.Time) (*RestoreResult, error) {
	free, err := CheckTarget(opts.Target)
	if err != nil || free || (!opts.Force && opts.Conversation == "") {
		return Restore(ctx, r, nil, opts)
	}
	s, err := store.Open(ctx, opts.Target, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "test"}, Now: now})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return Restore(ctx, r, s, opts)
}

func reindexStore(t *testing.T, dir string) *reindex.Result {
	t.Helper()
	s, err := store.Open(context.Background(), dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := reindex.Run(context.Background(), s, reindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// logEntries are a manifest's log entries by name, without what says where
// they came from.
func logEntries(m *Manifest) map[string]File {
	out := map[string]File{}
	for _, f := range m.Files {
		if f.Log != nil {
			out[f.Name] = f
		}
	}
	return out
}

// TestBackupRestoreBackup: backup, verify, restore, backup again: the same
// manifest entry for every log. The one exception is the interrupted
// deletion, which the restore's reindex finishes, as reindex does in the
// store.
func TestBackupRestoreBackup(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprintf("strict=%v", strict), func(t *testing.T) {
			dataDir, rep := generate(t, 11, 30, true)
			withIndex(t, dataDir)
			now := time.Date(2026, 9, 2, 3, 4, 5, 0, time.UTC)
			prog := &countProgress{}
			a1, r1 := backupFile(t, dataDir, Options{Now: fixedClock(now), ToolVersion: "test", Strict: strict, Progress: prog})
			m1 := r1.Manifest
			if m1.Online || m1.Index != IndexSnapshot || m1.IndexMethod != IndexByCopy || len(m1.Problems) != 0 || !m1.CreatedAt.Equal(now) {
				t.Fatalf("manifest: online=%v index=%s problems=%v createdAt=%v", m1.Online, m1.Index, m1.Problems, m1.CreatedAt)
			}
			// The walk comes first: the total is known from the start
			// (every file archived, and the manifest).
			if total, done := prog.total.Load(), prog.done.Load(); total != int64(m1.Counts.Files)+1 || done != total || prog.setAfterAdd.Load() {
				t.Fatalf("progress: total %d, done %d (set after an add: %v), want %d files and the manifest", total, done, prog.setAfterAdd.Load(), m1.Counts.Files)
			}
			// The corrupt log is archived whole; found by the structure
			// check only when its structure is broken, by the strict read
			// always.
			corrupt := rep.Find(fixtures.CaseCorrupt)
			if strict && m1.Counts.InvalidLogs != 1 {
				t.Fatalf("strict: %d invalid logs, want 1 (%s)", m1.Counts.InvalidLogs, corrupt.ID)
			}
			if r1.Partial() != (m1.Counts.InvalidLogs > 0) {
				t.Fatal("Partial disagrees with the counts")
			}

			v := verifyFile(t, a1)
			if !v.OK {
				t.Fatalf("verify: %+v", v.Mismatches)
			}
			if v.InvalidLogs != 1 || v.Rebuilt.Skipped != 1 || v.Rebuilt.DeletionsFinished != 1 || v.Index != "ok" {
				t.Fatalf("verify: %+v", v)
			}

			target := filepath.Join(t.TempDir(), "restored")
			rr, err := restoreFile(t, a1, RestoreOptions{Target: target})
			if err != nil {
				t.Fatal(err)
			}
			if rr.Reindex == nil || rr.Reindex.Indexed != v.Rebuilt.Indexed || len(rr.Reindex.Skipped) != 1 {
				t.Fatalf("restore: %+v", rr.Reindex)
			}
			checkModes(t, target)
			if _, err := os.Stat(filepath.Join(target, archive.ManifestName)); err == nil {
				t.Fatal("the manifest was left in the restored store")
			}

			a2, _ := backupFile(t, target, Options{Now: fixedClock(now), ToolVersion: "test", Strict: strict})
			e1, e2 := logEntries(extractedManifest(t, a1)), logEntries(extractedManifest(t, a2))
			if len(e1) < 30 {
				t.Fatalf("the first backup lists %d logs", len(e1))
			}
			deleted := rep.Find(fixtures.CaseInterruptedDelete)
			for name, f1 := range e1 {
				f2, ok := e2[name]
				if strings.Contains(name, "/"+mustEncode(t, deleted.ID)+"/") {
					if ok {
						t.Fatalf("%s: the interrupted deletion was not finished", name)
					}
					continue
				}
				if !ok {
					t.Fatalf("%s: missing from the second backup", name)
				}
				if f1.Size != f2.Size || f1.SHA256 != f2.SHA256 || *f1.Log != *f2.Log {
					t.Fatalf("%s: %+v %+v, then %+v %+v", name, f1, *f1.Log, f2, *f2.Log)
				}
			}
			if len(e2) != len(e1)-len(deletedLogs(e1, mustEncode(t, deleted.ID))) {
				t.Fatalf("%d logs, then %d", len(e1), len(e2))
			}
		})
	}
}

// withIndex gives the store a real metadata.db without finishing its
// interrupted deletion: the index of a reindexed copy.
func withIndex(t *testing.T, dataDir string) {
	t.Helper()
	clone := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.Command("cp", "-a", dataDir, clone).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	reindexStore(t, clone)
	data, err := os.ReadFile(filepath.Join(clone, store.IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, store.IndexFileName), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustEncode(t *testing.T, id string) string {
	name, err := store.EncodeSegment(id)
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func deletedLogs(e map[string]File, dir string) []string {
	var out []string
	for n := range e {
		if strings.Contains(n, "/"+dir+"/") {
			out = append(out, n)
		}
	}
	return out
}

// checkModes: directories 0700, files 0600 under dir.
func checkModes(t *testing.T, dir string) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := d.Info()
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		return nil
	})
}

// TestOnlineBackupWhileTheRuntimeAppends takes backups while a real second
// process holds runtime.lock and appends, as the runtime does. Every
// archived log is a committed prefix of the log the writer leaves, the
// restored store reads strictly without a torn tail, and reindex indexes
// it.
func TestOnlineBackupWhileTheRuntimeAppends(t *testing.T) {
	for _, comp := range []string{"zstd", "none"} {
		t.Run(comp, func(t *testing.T) {
			dataDir, _ := generate(t, 5, 0, false)
			// Only the live conversation: the generated special cases
			// include a corrupt log on purpose.
			os.RemoveAll(store.ConversationsDir(dataDir))
			withIndex(t, dataDir)
			cmd, out := child(t, liveWriterEnv+"="+dataDir, liveCompEnv+"="+comp)
			expectLine(t, out, "ready ")
			expectLine(t, out, "turn 3 ")
			go io.Copy(io.Discard, out)

			var archives []string
			var cut int64
			for i := 0; i < 8; i++ {
				p, res := backupFile(t, dataDir, Options{Strict: i%2 == 1})
				m := res.Manifest
				if m.Index != IndexSnapshot || m.IndexMethod != IndexByVacuum {
					t.Fatalf("backup %d: index %s by %s", i, m.Index, m.IndexMethod)
				}
				if !m.Online || m.Holder == nil || m.Holder.PID != cmd.Process.Pid {
					t.Fatalf("backup %d: online=%v holder=%+v, want pid %d", i, m.Online, m.Holder, cmd.Process.Pid)
				}
				if res.Partial() {
					t.Fatalf("backup %d: problems %v, invalid %d", i, m.Problems, m.Counts.InvalidLogs)
				}
				cut += m.LiveTailBytes
				archives = append(archives, p)
			}
			cmd.Process.Signal(syscall.SIGTERM)
			if err := cmd.Wait(); err != nil {
				t.Fatalf("live writer: %v", err)
			}
			t.Logf("%d online backups, %d bytes of live tails left out", len(archives), cut)

			for _, a := range archives {
				v := verifyFile(t, a)
				if !v.OK || v.InvalidLogs != 0 || v.Rebuilt.Indexed != 1 {
					t.Fatalf("%s: %+v", a, v)
				}
				target := filepath.Join(t.TempDir(), "restored")
				if _, err := restoreFile(t, a, RestoreOptions{Target: target}); err != nil {
					t.Fatal(err)
				}
				tree, err := reader(t, target).Walk()
				if err != nil || len(tree.Problems) != 0 || len(tree.Conversations) != 1 {
					t.Fatalf("restored tree %+v (%v)", tree, err)
				}
				for _, l := range tree.Conversations[0].Logs {
					restored, err := os.ReadFile(l.Path)
					if err != nil {
						t.Fatal(err)
					}
					live, err := os.ReadFile(filepath.Join(dataDir, store.ConversationsDirName, tree.Conversations[0].Name, l.Current.String()))
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.HasPrefix(live, restored) {
						t.Fatalf("%s: the archived bytes are not a prefix of the log", l.Path)
					}
					r, err := convlog.Open(l.Path, convlog.ReaderOptions{})
					if err != nil {
						t.Fatal(err)
					}
					for _, err := range r.Events() {
						if err != nil {
							t.Fatalf("%s: %v", l.Path, err)
						}
					}
					if st := r.Stats(); st.TornTail || st.CommittedBytes != int64(len(restored)) {
						t.Fatalf("%s: %+v", l.Path, st)
					}
					r.Close()
				}
				if rr := reindexStore(t, target); rr.Indexed != 1 || len(rr.Skipped) != 0 {
					t.Fatalf("reindex of the restored store: %+v", rr)
				}
			}
		})
	}
}

// TestFlippedByteIsCaught: one flipped byte anywhere in an archive makes
// verify fail (an error, or mismatches), never pass.
func TestFlippedByteIsCaught(t *testing.T) {
	dataDir, _ := generate(t, 12, 20, false)
	a, _ := backupFile(t, dataDir, Options{Archive: archive.WriterOptions{ChunkSize: 32 << 10}})
	data, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	positions := []int{0, 5, len(data) / 2, len(data) - 3, len(data) - 1}
	for range 25 {
		positions = append(positions, rng.IntN(len(data)))
	}
	for _, pos := range positions {
		bad := bytes.Clone(data)
		bad[pos] ^= 0x20
		res, err := verifyReader(t, bytes.NewReader(bad), VerifyOptions{Archive: "flipped", WorkDir: t.TempDir()})
		if err == nil && res.OK {
			t.Fatalf("a byte flipped at %d of %d went unnoticed", pos, len(data))
		}
	}
}

// TestSIGKILLDuringBackup kills real backup processes at random moments:
// no file ever appears under an archive name, and the next backup removes
// the killed one's temporary file and publishes a good archive.
func TestSIGKILLDuringBackup(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	dataDir, _ := generate(t, 13, 60, true)
	out := filepath.Join(t.TempDir(), "backups")
	rng := rand.New(rand.NewPCG(2, 2))
	for i := 0; i < 8; i++ {
		cmd, stdout := child(t, backupEnv+"="+dataDir+":"+out)
		expectLine(t, stdout, "started")
		time.Sleep(time.Duration(rng.IntN(120)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		list, err := ListArchives(out)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		for _, a := range list {
			// A backup that finished before the kill is complete.
			if v := verifyFile(t, a.Path); !v.OK {
				t.Fatalf("after kill %d: %s is published but does not verify", i, a.Name)
			}
			os.Remove(a.Path)
		}
	}
	res, err := toDir(context.Background(), dataDir, out, DirOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The rerun's archive and its sidecar, nothing else.
	ents, _ := os.ReadDir(out)
	if len(ents) != 2 || ents[0].Name() != filepath.Base(res.Archive) || ents[1].Name() != filepath.Base(infoPath(res.Archive)) {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("the backup directory holds %v (removed temps: %v)", names, res.RemovedTemps)
	}
	if v := verifyFile(t, res.Archive); !v.OK {
		t.Fatalf("%+v", v.Mismatches)
	}
}

// hostileArchive is a tar.zst holding one good log, then an entry that
// tries to escape.
func hostileArchive(t *testing.T, evil *tar.Header) []byte {
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	good := "conversations/abc/metadata.v4.jsonl"
	tw.WriteHeader(&tar.Header{Name: good, Size: 2, Mode: 0o600, Typeflag: tar.TypeReg})
	tw.Write([]byte("{}"))
	if evil.Mode == 0 {
		evil.Mode = 0o777
	}
	tw.WriteHeader(evil)
	if evil.Typeflag == tar.TypeReg {
		tw.Write(bytes.Repeat([]byte("!"), int(evil.Size)))
	}
	tw.Close()
	e, _ := zstd.NewWriter(nil)
	defer e.Close()
	return e.EncodeAll(tb.Bytes(), nil)
}

// TestRestoreOfHostileArchiveWritesNothing: entries with absolute paths,
// "..", links or devices make restore fail before anything reaches the
// target or leaves the staging directory.
func TestRestoreOfHostileArchiveWritesNothing(t *testing.T) {
	cases := map[string]*tar.Header{
		"absolute": {Name: "/tmp/convkit-evil", Size: 4, Typeflag: tar.TypeReg},
		"dotdot":   {Name: "../convkit-evil", Size: 4, Typeflag: tar.TypeReg},
		"deep":     {Name: "conversations/abc/../../../convkit-evil", Size: 4, Typeflag: tar.TypeReg},
		"symlink":  {Name: "conversations/abc/x.v4.jsonl", Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"},
		"hardlink": {Name: "conversations/abc/x.v4.jsonl", Typeflag: tar.TypeLink, Linkname: "/etc/passwd"},
		"device":   {Name: "conversations/abc/x.v4.jsonl", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3},
		"fifo":     {Name: "conversations/abc/x.v4.jsonl", Typeflag: tar.TypeFifo},
		"dir":      {Name: "conversations/abc/", Typeflag: tar.TypeDir},
		"cron":     {Name: "etc/cron.d/x", Size: 4, Typeflag: tar.TypeReg},
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			target := filepath.Join(parent, "store")
			data := hostileArchive(t, h)
			_, err := restoreAs(context.Background(), bytes.NewReader(data), RestoreOptions{Archive: name, Target: target}, nil)
			if !errors.Is(err, archive.ErrRefused) {
				t.Fatalf("restore: %v", err)
			}
			if ents, _ := os.ReadDir(parent); len(ents) != 0 {
				t.Fatalf("restore left %v", ents)
			}
			for _, p := range []string{"/tmp/convkit-evil", filepath.Join(filepath.Dir(parent), "convkit-evil")} {
				if _, err := os.Lstat(p); err == nil {
					t.Fatalf("%s was written", p)
				}
			}
			// Into an existing store, with --force: the store is untouched.
			dataDir, _ := generate(t, 14, 0, false)
			before := treeHash(t, dataDir)
			_, err = restoreAs(context.Background(), bytes.NewReader(data), RestoreOptions{Archive: name, Target: dataDir, Force: true}, nil)
			if !errors.Is(err, archive.ErrRefused) {
				t.Fatalf("restore --force: %v", err)
			}
			if after := treeHash(t, dataDir); after != before {
				t.Fatal("the store changed")
			}
			if ents, _ := os.ReadDir(filepath.Dir(dataDir)); len(ents) != 1 {
				t.Fatalf("restore --force left %v beside the store", ents)
			}
		})
	}
}

// treeHash lists every entry under dir with its mode, size and content.
func treeHash(t *testing.T, dir string) string {
	var b strings.Builder
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := d.Info()
		if d.Name() != store.LockFileName {
			fmt.Fprintf(&b, "%s %v %d\n", p, fi.Mode(), fi.Size())
		}
		if d.Name() == store.LockFileName {
			return nil // taking the lock writes the holder into it
		}
		if d.Type().IsRegular() {
			data, _ := os.ReadFile(p)
			b.Write(data)
		}
		return nil
	})
	return b.String()
}

func TestRestoreRefusesAndReplaces(t *testing.T) {
	dataDir, _ := generate(t, 15, 0, false)
	a, _ := backupFile(t, dataDir, Options{})
	target := filepath.Join(t.TempDir(), "live")
	other, _ := generate(t, 16, 0, false)
	if err := os.Rename(other, target); err != nil {
		t.Fatal(err)
	}
	before := treeHash(t, target)

	// Not empty: refused, nothing touched.
	if _, err := restoreFile(t, a, RestoreOptions{Target: target}); !errors.Is(err, ErrTargetNotEmpty) {
		t.Fatalf("restore into a store: %v", err)
	}
	// --force while the runtime holds the lock: refused (exit 11).
	cmd, out := child(t, lockHolderEnv+"="+target)
	expectLine(t, out, "locked")
	if _, err := restoreFile(t, a, RestoreOptions{Target: target, Force: true}); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("restore --force with the lock held: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if treeHash(t, target) != before {
		t.Fatal("a refused restore changed the target")
	}
	// --force: the old store is moved aside, whole.
	now := time.Date(2026, 9, 3, 0, 0, 0, 0, time.UTC)
	rr, err := restoreFileAt(t, a, RestoreOptions{Target: target, Force: true}, fixedClock(now))
	if err != nil {
		t.Fatal(err)
	}
	if rr.MovedAside != target+".replaced-20260903T000000Z" || treeHash(t, rr.MovedAside) != strings.ReplaceAll(before, target, rr.MovedAside) {
		t.Fatalf("moved aside to %q", rr.MovedAside)
	}
	// A directory that is not a store is never moved: it does not open
	// as one.
	notStore := filepath.Join(t.TempDir(), "home")
	os.MkdirAll(filepath.Join(notStore, "Documents"), 0o700)
	if _, err := restoreFile(t, a, RestoreOptions{Target: notStore, Force: true}); !errors.Is(err, store.ErrNoStore) {
		t.Fatalf("restore --force into a non-store: %v", err)
	}
	if _, err := os.Stat(filepath.Join(notStore, "Documents")); err != nil {
		t.Fatal(err)
	}
	// A symbolic link as target is refused.
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(target, link)
	if _, err := restoreFile(t, a, RestoreOptions{Target: link, Force: true}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("restore into a link: %v", err)
	}
}

// TestRestoreOneConversation restores a fork after compaction: it comes
// with the conversation it reads older history from.
func TestRestoreOneConversation(t *testing.T) {
	dataDir, rep := generate(t, 17, 0, false)
	fork := rep.Find(fixtures.CaseForkAfterCompaction)
	if fork == nil || len(fork.DependsOn) == 0 {
		t.Fatal("no fork after compaction in the fixtures")
	}
	a, _ := backupFile(t, dataDir, Options{})

	// Into a new store: the fork and its ancestors only.
	target := filepath.Join(t.TempDir(), "new")
	rr, err := restoreFile(t, a, RestoreOptions{Target: target, Conversation: fork.ID})
	if err != nil {
		t.Fatal(err)
	}
	want := append([]string{fork.ID}, fork.DependsOn...)
	slices.Sort(want)
	got := slices.Clone(rr.Conversations)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("restored %v, want %v", got, want)
	}
	tree, _ := reader(t, target).Walk()
	if len(tree.Conversations) != len(want) {
		t.Fatalf("%d conversations in the new store", len(tree.Conversations))
	}
	db, err := index.Open(filepath.Join(target, store.IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := db.All(context.Background())
	db.Close()
	if rows[fork.ID] == nil {
		t.Fatal("the fork is not indexed")
	}
	checkModes(t, target)

	// Into the live store after the fork was deleted: the source is there
	// and is kept as it is.
	s, err := store.Open(context.Background(), dataDir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAll(context.Background(), []string{fork.ID}, store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	rr, err = restoreFile(t, a, RestoreOptions{Target: dataDir, Conversation: fork.ID})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rr.Conversations, []string{fork.ID}) || !slices.Equal(rr.Kept, fork.DependsOn) {
		t.Fatalf("restored %v, kept %v", rr.Conversations, rr.Kept)
	}
	if _, err := reader(t, dataDir).ReadConversation(fork.ID); err != nil {
		t.Fatal(err)
	}
	// Present now, as archived (the rerun of a killed restore finds it
	// so): already restored, nothing moved.
	rr, err = restoreFile(t, a, RestoreOptions{Target: dataDir, Conversation: fork.ID})
	if err != nil || !slices.Equal(rr.Conversations, []string{fork.ID}) || rr.MovedAside != "" {
		t.Fatalf("restore of the conversation as archived: %+v, %v", rr, err)
	}
	// Changed since: refused, then replaced with --force (moved aside).
	s, err = store.Open(context.Background(), dataDir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Rename(fork.ID, "changed since the backup"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := restoreFile(t, a, RestoreOptions{Target: dataDir, Conversation: fork.ID}); !errors.Is(err, ErrConversationExists) {
		t.Fatalf("restore of a present conversation: %v", err)
	}
	rr, err = restoreFile(t, a, RestoreOptions{Target: dataDir, Conversation: fork.ID, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dataDir, store.ReplacedDirName, mustEncode(t, fork.ID)+"-"); !strings.HasPrefix(rr.MovedAside, want) {
		t.Fatalf("moved aside to %s, want %s<UTC time>", rr.MovedAside, want)
	}
	if m, _ := filepath.Glob(filepath.Join(rr.MovedAside, "metadata.*")); len(m) == 0 {
		t.Fatal("the conversation log was not moved aside with its directory")
	}
	ents, _ := os.ReadDir(dataDir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".restore-") {
			t.Fatalf("staging left behind: %s", e.Name())
		}
	}
	if _, err := restoreFile(t, a, RestoreOptions{Target: dataDir, Conversation: "no-such-conversation", Force: true}); !errors.Is(err, ErrNotInArchive) {
		t.Fatalf("restore of a missing conversation: %v", err)
	}
}

func TestRetention(t *testing.T) {
	dataDir, _ := generate(t, 18, 0, false)
	out := t.TempDir()
	// Files retention must never touch.
	others := []string{"convkit-notes.txt", "other.tar.zst", "convkit-2026.tar.zst", "convkit-20260101T000000Z.tar.zst.bak"}
	for _, n := range others {
		os.WriteFile(filepath.Join(out, n), []byte("x"), 0o600)
	}
	os.Symlink("/etc/passwd", filepath.Join(out, "convkit-20200101T000000Z.tar.zst"))
	base := time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC)
	var made []string
	for i := 0; i < 4; i++ {
		now := base.Add(time.Duration(i) * time.Hour)
		res, err := toDir(context.Background(), dataDir, out, DirOptions{Options: Options{Now: fixedClock(now)}, Retention: Retention{Last: 3}})
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, res.Archive)
		if i == 3 && (len(res.Deleted) != 1 || res.Deleted[0] != made[0]) {
			t.Fatalf("deleted %v", res.Deleted)
		}
	}
	// Two in the same second get distinct names.
	res, err := toDir(context.Background(), dataDir, out, DirOptions{Options: Options{Now: fixedClock(base.Add(3 * time.Hour))}})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(res.Archive) != "convkit-20260901T030000Z-2.tar.zst" {
		t.Fatalf("second archive of one second: %s", res.Archive)
	}
	// Dry run: says what it would delete, deletes nothing, writes nothing.
	dr, err := toDir(context.Background(), dataDir, out, DirOptions{Options: Options{Now: fixedClock(base.Add(9 * time.Hour))}, Retention: Retention{Last: 2}, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	list, _ := ListArchives(out)
	if len(list) != 4 || len(dr.Deleted) != 3 || dr.Plan == nil || len(dr.Plan.Files) == 0 {
		t.Fatalf("dry run: %d archives, would delete %v", len(list), dr.Deleted)
	}
	for _, n := range others {
		if _, err := os.Stat(filepath.Join(out, n)); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(out, "convkit-20200101T000000Z.tar.zst")); err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		t.Fatal("the link was touched")
	}
}

// TestLeftOutFilesArePartial: links, FIFOs and stray files are never
// followed or read; they are listed, and the backup is partial (exit 3).
func TestLeftOutFilesArePartial(t *testing.T) {
	dataDir, rep := generate(t, 19, 0, false)
	conv := filepath.Join(store.ConversationsDir(dataDir), mustEncode(t, rep.Conversations[0].ID))
	os.Symlink("/etc/passwd", filepath.Join(conv, "evil.v4.jsonl"))
	syscall.Mkfifo(filepath.Join(conv, "fifo.v4.jsonl"), 0o600)
	os.WriteFile(filepath.Join(store.ConversationsDir(dataDir), "stray.v4.jsonl"), []byte("{}\n"), 0o600)
	p, res := backupFile(t, dataDir, Options{})
	if !res.Partial() || len(res.Manifest.Problems) != 3 {
		t.Fatalf("problems %+v", res.Manifest.Problems)
	}
	for _, f := range extractedManifest(t, p).Files {
		if strings.Contains(f.Name, "evil") || strings.Contains(f.Name, "fifo") || strings.Contains(f.Name, "stray") {
			t.Fatalf("%s archived", f.Name)
		}
	}
}

// TestPrefixMatchesReader: the committed prefix backup archives online
// (convlog.CommittedPrefix) is where convlog's Reader puts CommittedBytes,
// on every prefix of real logs, over a file as in memory, and the copy
// reads as the same events.
func TestPrefixMatchesReader(t *testing.T) {
	dataDir, _ := generate(t, 20, 0, false)
	tree, _ := reader(t, dataDir).Walk()
	n := 0
	for _, c := range tree.Conversations {
		for _, l := range c.Logs {
			data, err := os.ReadFile(l.Path)
			if err != nil {
				t.Fatal(err)
			}
			step := max(1, len(data)/97)
			comp := l.Current.Compression
			for cut := 0; cut <= len(data); cut += step {
				b := data[:cut]
				mem, merr := convlog.CommittedPrefix(convlog.Bytes(b), int64(len(b)), comp, "x")
				file, ferr := convlog.CommittedPrefix(bytes.NewReader(b), int64(len(b)), comp, "x")
				if mem != file || fmt.Sprint(merr) != fmt.Sprint(ferr) {
					t.Fatalf("%s[:%d]: %+v %v in memory, %+v %v through the file", l.Path, cut, mem, merr, file, ferr)
				}
				r, err := convlog.NewReader(bytes.NewReader(b), int64(len(b)), "x", convlog.ReaderOptions{Version: l.Current.Version, Compression: &comp})
				if err != nil {
					continue // no complete header: nothing to compare
				}
				events := 0
				for _, err = range r.Events() {
					if err == nil {
						events++
					}
				}
				st := r.Stats()
				r.Close()
				if err != nil {
					continue // content the structure says nothing about
				}
				if merr != nil && st.CommittedBytes == 0 {
					// No complete header frame or line: the reader may recover
					// the header from a torn frame's blocks; the structure
					// check calls the log broken (it is archived whole).
					continue
				}
				if merr != nil || st.CommittedBytes != mem.Bytes || st.TornTail != mem.Torn || st.RecoveredLines != mem.RecoveredLines {
					t.Fatalf("%s[:%d]: prefix %+v %v, reader stats %+v", l.Path, cut, mem, merr, st)
				}
				cp, err := io.ReadAll(mem.Reader(bytes.NewReader(b)))
				if err != nil || int64(len(cp)) != mem.Len() {
					t.Fatalf("%s[:%d]: copy of %d bytes, Len %d: %v", l.Path, cut, len(cp), mem.Len(), err)
				}
				cr, err := convlog.NewReader(bytes.NewReader(cp), int64(len(cp)), "x", convlog.ReaderOptions{Version: l.Current.Version, Compression: &comp})
				if err != nil {
					t.Fatal(err)
				}
				copied := 0
				for _, err = range cr.Events() {
					if err == nil {
						copied++
					}
				}
				if cst := cr.Stats(); err != nil || copied != events || cst.TornTail {
					t.Fatalf("%s[:%d]: copy reads %d events of %d, %+v, %v", l.Path, cut, copied, events, cst, err)
				}
				cr.Close()
				n++
			}
		}
	}
	t.Logf("%d prefixes agree", n)
}

// TestOnlineBackupCutsAnAppendInFlight: the runtime holds the lock while a
// session log grows a few bytes at a time, as a slow append would. Every
// online backup archives the log's committed prefix (up to its last
// complete line or frame, and the complete lines of a frame torn in its
// checksum in a frame of their own), never a partial line, and says how
// much it left out: the restored log holds the first events of the log.
func TestOnlineBackupCutsAnAppendInFlight(t *testing.T) {
	for _, comp := range []convlog.Compression{convlog.Zstd, convlog.Plain} {
		t.Run(comp.String(), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			rep, err := fixtures.Generate(dir, fixtures.Options{Seed: 21, Conversations: 0, Compression: comp})
			if err != nil {
				t.Fatal(err)
			}
			var logPath string
			for _, c := range rep.Conversations {
				if c.Deleting {
					continue // the restore's reindex finishes its deletion
				}
				for _, l := range c.Logs {
					if l.SessionID != "" && l.Compression == comp && l.Expect == fixtures.ExpectValid && l.Version == convlog.CurrentVersion {
						logPath = l.Path
					}
				}
			}
			if logPath == "" {
				t.Fatal("no session log to grow")
			}
			tail := appendedBytes(t, logPath, 6)

			holder, out := child(t, lockHolderEnv+"="+dir)
			expectLine(t, out, "locked")
			done := make(chan error, 1)
			go func() {
				f, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					done <- err
					return
				}
				defer f.Close()
				for i := 0; i < len(tail); i += 3 {
					if _, err := f.Write(tail[i:min(i+3, len(tail))]); err != nil {
						done <- err
						return
					}
					time.Sleep(100 * time.Microsecond)
				}
				done <- nil
			}()
			var archives []string
			var cut int64
			for finished := false; !finished; {
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
					finished = true
				default:
				}
				a, res := backupFile(t, dir, Options{Workers: 1})
				if !res.Manifest.Online {
					t.Fatal("not online")
				}
				cut += res.Manifest.LiveTailBytes
				archives = append(archives, a)
			}
			holder.Process.Kill()
			holder.Wait()
			if cut == 0 {
				t.Fatalf("%d online backups, none caught the append in flight", len(archives))
			}
			final, _ := os.ReadFile(logPath)
			finalEvents := eventsOf(t, logPath)
			name, _ := filepath.Rel(dir, logPath)
			grew := 0
			for _, a := range archives {
				target := filepath.Join(t.TempDir(), "r")
				if _, err := restoreFile(t, a, RestoreOptions{Target: target}); err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(filepath.Join(target, name))
				if err != nil {
					t.Fatal(err)
				}
				if len(got) > len(final)-len(tail) {
					grew++
				}
				evs := eventsOf(t, filepath.Join(target, name))
				if len(evs) > len(finalEvents) {
					t.Fatalf("restored log holds %d events, the log %d", len(evs), len(finalEvents))
				}
				for i := range evs {
					if evs[i] != finalEvents[i] {
						t.Fatalf("restored event %d is not the log's: %s", i, evs[i])
					}
				}
			}
			if grew == 0 {
				t.Fatal("no backup saw the log grow")
			}
			t.Logf("%d online backups (%d saw the log grow) left %d bytes of appends in flight and torn tails out", len(archives), grew, cut)
		})
	}
}

// eventsOf reads the log at p strictly (no torn tail allowed): its lines.
func eventsOf(t *testing.T, p string) []string {
	t.Helper()
	r, err := convlog.Open(p, convlog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	for e, err := range r.Events() {
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out = append(out, string(e.Raw))
	}
	if r.Stats().TornTail {
		t.Fatalf("%s: a torn tail: %+v", p, r.Stats())
	}
	return out
}

// appendedBytes returns the bytes n more batches would append to the log
// at p (copies of its own events), computed on a scratch copy.
func appendedBytes(t *testing.T, p string, n int) []byte {
	t.Helper()
	orig, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var events []convlog.Event
	r, err := convlog.Open(p, convlog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for e, err := range r.Events() {
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, e.Clone())
	}
	r.Close()
	scratch := filepath.Join(t.TempDir(), filepath.Base(p))
	if err := os.WriteFile(scratch, orig, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := convlog.OpenAppend(scratch, convlog.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Two log-only events a batch: the last turn has ended, and repeating
	// its end would break the turn's path.
	last := events[len(events)-1].Time
	for i := 0; i < n; i++ {
		title := convlog.Event{Type: "session/title", Time: last, Data: []byte(fmt.Sprintf(`{"title":"grown %d","messageSeqs":[],"source":{"kind":"user"}}`, i))}
		if err := w.Append([]convlog.Event{title, title}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	grown, _ := os.ReadFile(scratch)
	return grown[len(orig):]
}

type failAfter struct{ n int }

func (f *failAfter) Write(p []byte) (int, error) {
	if f.n -= len(p); f.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

// TestWriteStopsCleanly: a failing destination or a cancelled context
// ends the backup with an error, leaves no file under an archive name and
// no goroutine behind.
func TestWriteStopsCleanly(t *testing.T) {
	dataDir, _ := generate(t, 22, 200, true)
	if _, err := writeBackup(context.Background(), dataDir, &failAfter{n: 1 << 20}, Options{TempDir: t.TempDir(),
		Archive: archive.WriterOptions{ChunkSize: 64 << 10}}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("failing destination: %v", err)
	}
	out := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if _, err := toDir(ctx, dataDir, out, DirOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Fatalf("left %v", ents)
	}
	// The lock was released: an offline backup runs again.
	res, err := toDir(context.Background(), dataDir, out, DirOptions{})
	if err != nil || res.Result.Manifest.Online {
		t.Fatalf("after the cancelled backup: %v", err)
	}
}

// TestIndexSnapshotWithPendingLog: offline, a metadata.db with a pending
// write-ahead log is not copied as a file but through VACUUM INTO.
func TestIndexSnapshotWithPendingLog(t *testing.T) {
	dataDir, _ := generate(t, 23, 0, false)
	withIndex(t, dataDir)
	os.WriteFile(filepath.Join(dataDir, store.IndexFileName)+"-wal", []byte("not a valid WAL, ignored by SQLite"), 0o600)
	a, res := backupFile(t, dataDir, Options{})
	if res.Manifest.Online || res.Manifest.IndexMethod != IndexByVacuum {
		t.Fatalf("index by %s", res.Manifest.IndexMethod)
	}
	if v := verifyFile(t, a); !v.OK || v.Index != "ok" {
		t.Fatalf("%+v", v)
	}
}

// zstdSessionStore generates a small compressed store in a new data
// directory and returns it with the path of its last valid v4 session log.
func zstdSessionStore(t *testing.T) (dir, logPath string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "data")
	rep, err := fixtures.Generate(dir, fixtures.Options{Seed: 5, Conversations: 0, Compression: convlog.Zstd})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Conversations {
		for _, l := range c.Logs {
			if !c.Deleting && l.SessionID != "" && l.Compression == convlog.Zstd && l.Expect == fixtures.ExpectValid && l.Version == convlog.CurrentVersion {
				logPath = l.Path
			}
		}
	}
	if logPath == "" {
		t.Fatal("no compressed session log")
	}
	return dir, logPath
}

// TestOnlineBackupKeepsTheLinesOfATornFrame: a compressed log whose last
// frame lost its checksum (a crash in the last append) holds that frame's
// lines as events: an online backup archives them, in a frame of their own,
// so the restored log reads as the store's does, without a torn tail, and
// the restore drill agrees with the manifest.
func TestOnlineBackupKeepsTheLinesOfATornFrame(t *testing.T) {
	dir, logPath := zstdSessionStore(t)
	data, _ := os.ReadFile(logPath)
	want := eventsOf(t, logPath)
	if err := os.WriteFile(logPath, data[:len(data)-2], 0o600); err != nil {
		t.Fatal(err)
	}
	holder, out := child(t, lockHolderEnv+"="+dir)
	expectLine(t, out, "locked")
	a, res := backupFile(t, dir, Options{Workers: 1, Strict: true})
	holder.Process.Kill()
	holder.Wait()
	if !res.Manifest.Online || res.Manifest.LiveTailBytes == 0 {
		t.Fatalf("online=%v, live tail %d", res.Manifest.Online, res.Manifest.LiveTailBytes)
	}
	name, _ := filepath.Rel(dir, logPath)
	e, ok := logEntries(extractedManifest(t, a))[filepath.ToSlash(name)]
	if !ok || e.Log.TornTail || e.Log.Committed != e.Size || e.Log.Events != int64(len(want)) {
		t.Fatalf("manifest entry %+v (%v), want %d events", e, ok, len(want))
	}
	if v := verifyFile(t, a); !v.OK {
		t.Fatalf("verify: %+v", v)
	}
	target := filepath.Join(t.TempDir(), "r")
	if _, err := restoreFile(t, a, RestoreOptions{Target: target}); err != nil {
		t.Fatal(err)
	}
	got := eventsOf(t, filepath.Join(target, name))
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("restored %d events, the store's reader reads %d", len(got), len(want))
	}
}

// TestStrictOnlineBackupOfForeignFraming: a compressed log the zstd tool
// wrote in frames cut inside lines, whole or with a last line torn inside
// its one frame, backed up online with --strict (the read that counts the
// events also gives the committed prefix when it found the log whole):
// the manifest counts the reader's events, the archive verifies, and the
// restored log reads as the store's does.
func TestStrictOnlineBackupOfForeignFraming(t *testing.T) {
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Fatal("the zstd tool is needed (.ci/run installs it)")
	}
	zstdTool := func(in []byte) []byte {
		cmd := exec.Command("zstd", "-q", "-c")
		cmd.Stdin = bytes.NewReader(in)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	for _, c := range []struct {
		name string
		cut  int    // bytes of plain text per frame (0: one frame)
		torn string // appended to the text: a line the runtime never finished
	}{
		{"frames cut inside lines", 97, ""},
		{"one frame ending inside a line", 0, `{"type":"turn/start","seq":999,"ti`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, logPath := zstdSessionStore(t)
			want := eventsOf(t, logPath)
			dec := exec.Command("zstd", "-q", "-d", "-c", logPath)
			text, err := dec.Output()
			if err != nil {
				t.Fatal(err)
			}
			text = append(text, c.torn...)
			var data []byte
			if c.cut == 0 {
				data = zstdTool(text)
			} else {
				for off := 0; off < len(text); off += c.cut {
					data = append(data, zstdTool(text[off:min(off+c.cut, len(text))])...)
				}
			}
			if err := os.WriteFile(logPath, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if c.torn == "" { // the strict helper refuses a torn tail
				if got := eventsOf(t, logPath); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("the rewritten log reads %d events, the original %d", len(got), len(want))
				}
			}
			holder, out := child(t, lockHolderEnv+"="+dir)
			expectLine(t, out, "locked")
			a, res := backupFile(t, dir, Options{Workers: 1, Strict: true})
			holder.Process.Kill()
			holder.Wait()
			if !res.Manifest.Online {
				t.Fatal("the backup was not online")
			}
			name, _ := filepath.Rel(dir, logPath)
			e, ok := logEntries(extractedManifest(t, a))[filepath.ToSlash(name)]
			if !ok || e.Log.TornTail || e.Log.Committed != e.Size || e.Log.Events != int64(len(want)) || e.Log.Error != "" {
				t.Fatalf("manifest entry %+v (%v), want %d events", e, ok, len(want))
			}
			if v := verifyFile(t, a); !v.OK {
				t.Fatalf("verify: %+v", v)
			}
			target := filepath.Join(t.TempDir(), "r")
			if _, err := restoreFile(t, a, RestoreOptions{Target: target}); err != nil {
				t.Fatal(err)
			}
			if got := eventsOf(t, filepath.Join(target, name)); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("restored %d events, the store's reader reads %d", len(got), len(want))
			}
		})
	}
}

// countProgress records what a job reports.
type countProgress struct {
	total, done atomic.Int64
	setAfterAdd atomic.Bool
}

func (p *countProgress) Add(n int64) { p.done.Add(n) }

func (p *countProgress) SetTotal(n int64) {
	if p.done.Load() > 0 {
		p.setAfterAdd.Store(true)
	}
	p.total.Store(n)
}

// verifyReader verifies the archive r yields, as 'backup verify -' does.
func verifyReader(t *testing.T, r io.Reader, opts VerifyOptions) (*VerifyResult, error) {
	t.Helper()
	opts.Stdin = r
	res, _, _, err := VerifyArchive(context.Background(), "-", opts)
	return res, err
}
