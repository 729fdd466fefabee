//go:build unix

package archive

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the process that holds a staging directory or
// a temporary archive while the tests sweep, and is then killed.
const (
	// holdStagingEnv=DIR:NAME makes a staging directory and waits.
	holdStagingEnv = "CONVKIT_TEST_HOLD_STAGING"
	// holdTempEnv=FINAL creates a temporary archive for FINAL and waits.
	holdTempEnv = "CONVKIT_TEST_HOLD_TEMP"
	// churnStagingEnv=DIR:NAME makes and removes staging directories
	// without end.
	churnStagingEnv = "CONVKIT_TEST_CHURN_STAGING"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(holdStagingEnv) != "":
		dir, name, _ := strings.Cut(os.Getenv(holdStagingEnv), ":")
		s, err := NewStaging(dir, name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(s.Dir())
		time.Sleep(time.Hour)
		os.Exit(0)
	case os.Getenv(churnStagingEnv) != "":
		dir, name, _ := strings.Cut(os.Getenv(churnStagingEnv), ":")
		fmt.Println("started")
		for {
			s, err := NewStaging(dir, name)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(1)
			}
			s.Remove()
		}
	case os.Getenv(holdTempEnv) != "":
		t, err := CreateTemp(os.Getenv(holdTempEnv))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		t.WriteString("half an archive")
		fmt.Println(t.Name())
		time.Sleep(time.Hour)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// holder starts the test binary in a holding role and returns it with the
// path it made; the caller kills it.
func holder(t *testing.T, env string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
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
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the holder said nothing: %v", err)
	}
	return cmd, strings.TrimSpace(line)
}

// kill ends a holder with SIGKILL, as a crash would.
func kill(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func sweptPaths(sw []Swept) []string {
	var out []string
	for _, s := range sw {
		if s.Err != nil {
			out = append(out, s.Path+": "+s.Err.Error())
		} else {
			out = append(out, s.Path)
		}
	}
	return out
}

// TestStagingLayout: a staging directory and its tree are 0700 whatever
// the umask, its lock file (0600) is beside it and held (another open
// file cannot lock it), and Remove takes everything away, twice without
// harm.
func TestStagingLayout(t *testing.T) {
	dir := t.TempDir()
	old := syscall.Umask(0o077 | 0o200) // even one that takes the owner's write bit
	defer syscall.Umask(old)
	s, err := NewStaging(dir, ".x.restore")
	if err != nil {
		t.Fatal(err)
	}
	if !isStaging(filepath.Base(s.Dir()), ".x.restore") || filepath.Dir(s.Dir()) != dir {
		t.Fatalf("named %s", s.Dir())
	}
	for _, p := range []string{s.Dir(), s.Tree()} {
		fi, err := os.Lstat(p)
		if err != nil || fi.Mode() != fs.ModeDir|0o700 {
			t.Fatalf("%s: %v %v", p, fi.Mode(), err)
		}
	}
	if ents, _ := os.ReadDir(s.Tree()); len(ents) != 0 {
		t.Fatalf("tree holds %v", ents)
	}
	ents, _ := os.ReadDir(dir)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	lock := strings.TrimSuffix(filepath.Base(s.Dir()), ".tmp") + ".lock.tmp"
	if strings.Join(names, " ") != lock+" "+filepath.Base(s.Dir()) {
		t.Fatalf("beside the staging directory: %v", names)
	}
	if fi, err := os.Lstat(filepath.Join(dir, lock)); err != nil || fi.Mode() != 0o600 {
		t.Fatalf("lock file: %v %v", fi.Mode(), err)
	}
	if st, f := probeLock(filepath.Join(dir, lock)); st != lockHeld {
		f.Close()
		t.Fatalf("the lock is not held: %v", st)
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left %v", ents)
	}
}

// TestSweepStagingKilledProcess: a staging directory held by a live
// process (another one, as a concurrent restore or import is) survives
// every sweep; once that process is killed, the next sweep removes it.
func TestSweepStagingKilledProcess(t *testing.T) {
	dir := t.TempDir()
	cmd, p := holder(t, holdStagingEnv+"="+dir+":.conversations.import")
	if err := os.WriteFile(filepath.Join(p, "tree", "MANIFEST.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, age := range []time.Duration{UnlockedStagingAge, 0} {
		if sw := SweepStaging(dir, ".conversations.import", nil, age); len(sw) != 0 || !exists(p) {
			t.Fatalf("a live process's staging directory was swept: %v", sweptPaths(sw))
		}
	}
	kill(t, cmd)
	sw := SweepStaging(dir, ".conversations.import", nil, UnlockedStagingAge)
	if got := sweptPaths(sw); len(got) != 1 || got[0] != p {
		t.Fatalf("swept %v, want %s", got, p)
	}
	if exists(p) {
		t.Fatal("the killed process's staging directory is still there")
	}
}

// TestStagingKilledAtAnyMoment: a process making and removing staging
// directories is killed at random moments; whatever it was doing, the next
// sweep (which must not take an unlocked directory younger than an hour
// for a dead one) leaves nothing behind. A directory is never without its
// lock file.
func TestStagingKilledAtAnyMoment(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for k := range 25 {
		cmd, _ := holder(t, churnStagingEnv+"="+dir+":.x.restore")
		time.Sleep(time.Duration(rng.Int64N(int64(5 * time.Millisecond))))
		kill(t, cmd)
		SweepStaging(dir, ".x.restore", nil, UnlockedStagingAge)
		if ents, _ := os.ReadDir(dir); len(ents) != 0 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			t.Fatalf("kill %d: left %v", k, names)
		}
	}
}

// TestSweepStaging: what a sweep removes and what it leaves, by the
// lock file, its age, the names and what the entries are. Nothing is ever
// followed through a link, and a FIFO as the lock file does not block.
func TestSweepStaging(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	if err := os.WriteFile(victim, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	const name = ".store.restore"
	n := 0
	mk := func(lock string) string { // a staging directory as a process left it
		n++
		p := filepath.Join(dir, fmt.Sprintf("%s-%012x.tmp", name, n))
		if err := os.MkdirAll(filepath.Join(p, "tree", "conversations"), 0o700); err != nil {
			t.Fatal(err)
		}
		switch lock {
		case "free":
			if err := os.WriteFile(filepath.Join(p, ".lock"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		case "link":
			if err := os.Symlink(victim, filepath.Join(p, ".lock")); err != nil {
				t.Fatal(err)
			}
		case "fifo":
			if err := syscall.Mkfifo(filepath.Join(p, ".lock"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	old := func(p string) string {
		then := time.Now().Add(-2 * UnlockedStagingAge)
		if err := os.Chtimes(p, then, then); err != nil {
			t.Fatal(err)
		}
		return p
	}
	killed := mk("free")    // an earlier build's import: the lock file inside
	killedNow := mk("none") // this build's: the lock file beside
	if err := os.WriteFile(strings.TrimSuffix(killedNow, ".tmp")+".lock.tmp", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	orphanNow := filepath.Join(dir, name+"-deadbeef0000.lock.tmp") // killed before it made its directory
	if err := os.WriteFile(orphanNow, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	live, err := NewStaging(dir, name)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Remove()
	young := mk("none")
	aged := old(mk("none"))
	linked := mk("link") // not a lock: goes by its age
	fifo := old(mk("fifo"))
	// Earlier builds' restores: the lock file beside the directory.
	legacyKilled := mk("none")
	if err := os.WriteFile(legacyKilled+".lock", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	legacyLive := mk("none")
	held, err := os.Create(legacyLive + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if ok, err := tryLock(held); err != nil || !ok {
		t.Fatal("lock", err)
	}
	orphan := filepath.Join(dir, name+"-feedfacecafe.tmp.lock")
	if err := os.WriteFile(orphan, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	// Not staging directories of this name: never touched.
	others := []string{filepath.Join(dir, ".other.restore-000000000001.tmp"), filepath.Join(dir, name+"-000000000002"),
		filepath.Join(dir, name+".tmp")}
	for _, p := range others {
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		old(p)
	}
	plainFile := filepath.Join(dir, name+"-ffff00000003.tmp")
	if err := os.WriteFile(plainFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	linkDir := filepath.Join(dir, name+"-ffff00000004.tmp")
	if err := os.Symlink(outside, linkDir); err != nil {
		t.Fatal(err)
	}

	done := make(chan []Swept, 1)
	go func() { done <- SweepStaging(dir, name, nil, UnlockedStagingAge) }()
	var sw []Swept
	select {
	case sw = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the sweep hangs")
	}
	gone := []string{killed, killedNow, strings.TrimSuffix(killedNow, ".tmp") + ".lock.tmp", orphanNow, aged, fifo, legacyKilled,
		legacyKilled + ".lock", orphan}
	kept := append([]string{live.Dir(), live.Tree(), live.lockPath, young, linked, legacyLive, legacyLive + ".lock", plainFile,
		linkDir, victim, outside}, others...)
	for _, p := range gone {
		if exists(p) {
			t.Errorf("%s was left", filepath.Base(p))
		}
	}
	for _, p := range kept {
		if !exists(p) {
			t.Errorf("%s was removed", filepath.Base(p))
		}
	}
	if data, err := os.ReadFile(victim); err != nil || string(data) != "keep me" {
		t.Errorf("the file a lock link points to: %q %v", data, err)
	}
	if len(sw) != 7 { // a lock file beside a directory goes with it
		t.Errorf("reported %v", sweptPaths(sw))
	}
	for _, s := range sw {
		if s.Err != nil {
			t.Errorf("%s: %v", s.Path, s.Err)
		}
	}

	// The caller's own staging is never swept, and age 0 (its caller holds
	// what every maker of one holds first) takes every unlocked one.
	own := mk("free")
	SweepStaging(dir, name, &Staging{dir: own}, 0)
	for _, p := range []string{young, linked} {
		if exists(p) {
			t.Errorf("age 0: %s was left", filepath.Base(p))
		}
	}
	for _, p := range []string{own, live.Dir(), live.lockPath, legacyLive, victim} {
		if !exists(p) {
			t.Errorf("age 0: %s was removed", filepath.Base(p))
		}
	}
}

// TestTempFileKilledWriter: a temporary archive being written by a live
// process survives the sweep of the next writer for the same name; once
// the writer is killed it is removed, and nothing else is.
func TestTempFileKilledWriter(t *testing.T) {
	dir := t.TempDir()
	isOut := func(name string) bool { f, ok := TempOf(name); return ok && f == "out.tar.zst" }
	final := filepath.Join(dir, "out.tar.zst")
	cmd, p := holder(t, holdTempEnv+"="+final)
	if filepath.Dir(p) != dir || !isOut(filepath.Base(p)) {
		t.Fatalf("named %s", p)
	}
	// Names that are not this file's temporaries.
	others := []string{".out.tar.zst.tmp", ".out.tar.zst.0123456789abcdeg.tmp", ".other.tar.zst.0123456789abcdef.tmp",
		"out.tar.zst.0123456789abcdef.tmp", ".out.tar.zst.0123456789abcdef.tmp.index"}
	for _, o := range others {
		if err := os.WriteFile(filepath.Join(dir, o), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, ".out.tar.zst.00000000000000aa.tmp")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	if sw := SweepTemps(dir, func(b string) bool { return b == "out.tar.zst" }); len(sw) != 0 || !exists(p) {
		t.Fatalf("a live writer's temporary file was swept: %v", sweptPaths(sw))
	}
	kill(t, cmd)
	if got := sweptPaths(SweepTemps(dir, func(b string) bool { return b == "out.tar.zst" })); len(got) != 1 || got[0] != p {
		t.Fatalf("swept %v, want %s", got, p)
	}
	for _, o := range append(others, filepath.Base(link)) {
		if !exists(filepath.Join(dir, o)) {
			t.Errorf("%s was removed", o)
		}
	}
	if data, _ := os.ReadFile(victim); string(data) != "keep me" {
		t.Error("the file a link points to changed")
	}
}

// TestTempFilePublish: a published temporary file is the final file
// (0600) and leaves no temporary name; a discarded one leaves nothing; an
// existing final name is never replaced.
func TestTempFilePublish(t *testing.T) {
	dir := t.TempDir()
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	final := filepath.Join(dir, "a.tar.zst")
	tf, err := CreateTemp(final)
	if err != nil {
		t.Fatal(err)
	}
	if st, f := probeLock(tf.Name()); st != lockHeld {
		f.Close()
		t.Fatal("a temporary file being written is not locked")
	}
	tf.WriteString("archive")
	if err := tf.Publish(final); err != nil {
		t.Fatal(err)
	}
	tf.Discard()
	if fi, err := os.Lstat(final); err != nil || fi.Mode() != 0o600 {
		t.Fatalf("%v %v", fi, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("left %v", ents)
	}
	tf, err = CreateTemp(final)
	if err != nil {
		t.Fatal(err)
	}
	tf.WriteString("another")
	if err := tf.Publish(final); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("published over an existing file: %v", err)
	}
	tf.Discard()
	if data, _ := os.ReadFile(final); string(data) != "archive" {
		t.Fatalf("the final file changed: %q", data)
	}
	tf, err = CreateTemp(final)
	if err != nil {
		t.Fatal(err)
	}
	tf.Discard()
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("left %v", ents)
	}
}
