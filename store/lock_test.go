package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// lockHolderEnv makes the test binary a lock holder in another process: it
// takes runtime.lock in the named data directory, says "locked" and sleeps
// until killed.
const lockHolderEnv = "CONVKIT_TEST_LOCK_HOLDER"

const holderCommand = "convkit test-holder"

func TestMain(m *testing.M) {
	if dir := os.Getenv(lockHolderEnv); dir != "" {
		l, err := lockDir(context.Background(), dir, LockOptions{Mode: LockExclusive, Command: holderCommand})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		fmt.Println("locked")
		time.Sleep(time.Hour)
		l.release()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startHolder runs a lock holder for dir and waits until it holds the lock.
func startHolder(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+dir)
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
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if s != "locked\n" {
			t.Fatalf("holder said %q", s)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("holder did not take the lock")
	}
	return cmd
}

func TestLockAcrossProcesses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	child := startHolder(t, dir)
	pid := child.Process.Pid
	ctx := context.Background()

	// Held: fail fast, naming the holder.
	start := time.Now()
	l, err := lockDir(ctx, dir, LockOptions{Mode: LockExclusive, Command: "convkit test"})
	if err == nil {
		l.release()
		t.Fatal("Open succeeded while another process holds the lock")
	}
	if d := time.Since(start); d > 250*time.Millisecond {
		t.Errorf("fail-fast Open took %v", d)
	}
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("error %v does not wrap ErrLocked", err)
	}
	var le *LockedError
	if !errors.As(err, &le) || le.Holder == nil || le.Holder.PID != pid || le.Holder.Command != holderCommand {
		t.Fatalf("LockedError %#v does not name pid %d", le, pid)
	}
	for _, want := range []string{"runtime.lock is held by pid " + strconv.Itoa(pid), `("` + holderCommand + `")`, " on host ", " since ", lockPath(dir)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}

	st, err := LockStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Held || st.Holder == nil || st.Holder.PID != pid || st.Path != lockPath(dir) {
		t.Fatalf("LockStatus = %+v, want held by %d", st, pid)
	}

	// Held: wait for the timeout.
	start = time.Now()
	_, err = lockDir(ctx, dir, LockOptions{Mode: LockExclusive, Timeout: 300 * time.Millisecond})
	if d := time.Since(start); !errors.Is(err, ErrLocked) || d < 290*time.Millisecond || d > 5*time.Second {
		t.Fatalf("Open with timeout: %v after %v", err, d)
	}

	// Held: a cancelled context ends the wait.
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	_, err = lockDir(cctx, dir, LockOptions{Mode: LockExclusive, Timeout: time.Minute})
	if !errors.Is(err, ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Open with a context deadline: %v", err)
	}

	// Readers take nothing and never wait.
	r, err := lockDir(ctx, dir, LockOptions{Mode: LockNone})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.release(); err != nil {
		t.Fatal(err)
	}

	// Killed holder: the kernel drops the lock.
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	child.Wait()
	st, err = LockStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Held || st.Holder == nil || st.Holder.PID != pid {
		t.Fatalf("LockStatus after kill = %+v, want free, last held by %d", st, pid)
	}
	start = time.Now()
	l, err = lockDir(ctx, dir, LockOptions{Mode: LockExclusive, Command: "convkit test"})
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		t.Errorf("Open of a free lock took %v", d)
	}
	st, err = LockStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Held || st.Holder == nil || st.Holder.PID != os.Getpid() || st.Holder.Command != "convkit test" {
		t.Fatalf("LockStatus while held by this process = %+v", st)
	}
	if err := l.release(); err != nil {
		t.Fatal(err)
	}
	if err := l.release(); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	st, err = LockStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Held {
		t.Fatalf("LockStatus after Release = %+v, want free", st)
	}
	if _, err := os.Stat(lockPath(dir)); err != nil {
		t.Fatalf("lock file gone after Release: %v", err)
	}
}

func TestLockHolderRecord(t *testing.T) {
	dir := t.TempDir()
	at := time.Now().Truncate(time.Second)
	host, _ := os.Hostname()
	l, err := lockDir(context.Background(), dir, LockOptions{
		Mode: LockExclusive, Command: "convkit reindex",
		now: func() time.Time { return at },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer l.release()
	data, err := os.ReadFile(lockPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	rec := fmt.Sprintf(`{"pid":%d,"host":%q,"command":"convkit reindex","startedAt":%q}`, os.Getpid(), host, at.UTC().Format(time.RFC3339))
	if string(data) != rec+"\n" {
		t.Fatalf("lock file holds %q, want %q", data, rec)
	}

	// A second acquisition in this process conflicts too (flock is per open
	// file), and the error renders the record: it is the holder's.
	_, err = lockDir(context.Background(), dir, LockOptions{Mode: LockExclusive})
	wantErr := fmt.Sprintf(`runtime.lock is held by pid %d ("convkit reindex") on host %s since %s (%s)`, os.Getpid(), host, at.UTC().Format(time.RFC3339), lockPath(dir))
	if err == nil || err.Error() != wantErr {
		t.Fatalf("got %v, want %s", err, wantErr)
	}

	// A record that cannot be the holder's is not believed.
	for _, tc := range []struct {
		name string
		h    Holder
		want string
	}{
		{"another host", Holder{PID: os.Getpid(), Host: "elsewhere", StartedAt: at},
			fmt.Sprintf("the last record names pid %d on host elsewhere, which cannot be checked from this host", os.Getpid())},
		{"a pid not running", Holder{PID: deadPID(t), Host: host, StartedAt: at}, "which is not running"},
		{"written before the process started", Holder{PID: os.Getpid(), Host: host, StartedAt: time.Unix(1000, 0)}, "after the record was written"},
	} {
		rec, err := os.OpenFile(lockPath(dir), os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := writeHolder(rec, tc.h); err != nil {
			t.Fatal(err)
		}
		rec.Close()
		_, err = lockDir(context.Background(), dir, LockOptions{Mode: LockExclusive})
		var le *LockedError
		if !errors.As(err, &le) || le.Holder != nil || !strings.Contains(err.Error(), "runtime.lock is held by a process that left no record (") ||
			!strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want no holder and %q", tc.name, err, tc.want)
		}
		st, err := LockStatus(dir)
		if err != nil || !st.Held || st.Holder != nil || !strings.Contains(st.NoRecordText(), tc.want) {
			t.Errorf("%s: LockStatus %+v, %v", tc.name, st, err)
		}
	}
}

// deadPID is the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// TestLockHeldWithoutRecord: flock(1) holds runtime.lock and writes no
// record; the file still names the convkit process that held it before.
// Both the lock status and the refusal say the holder left no record, and
// which process the kernel says holds it.
func TestLockHeldWithoutRecord(t *testing.T) {
	flockBin, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("flock(1) is not installed")
	}
	dir := filepath.Join(t.TempDir(), "data")
	child := startHolder(t, dir)
	child.Process.Kill()
	child.Wait()
	ready := filepath.Join(t.TempDir(), "ready")
	cmd := exec.Command(flockBin, "--nonblock", lockPath(dir), "sh", "-c", "touch "+ready+"; exec sleep 60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("flock did not take the lock")
		}
	}
	st, err := LockStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Held || st.Holder != nil || !strings.HasPrefix(st.NoRecordText(), "held by a process that left no record (") ||
		!strings.Contains(st.RecordIgnored, fmt.Sprintf("pid %d, which is not running", child.Process.Pid)) {
		t.Fatalf("LockStatus = %+v (%s)", st, st.NoRecordText())
	}
	_, err = lockDir(context.Background(), dir, LockOptions{Mode: LockExclusive})
	var le *LockedError
	if !errors.As(err, &le) || le.Holder != nil || !strings.Contains(err.Error(), "runtime.lock is held by a process that left no record") {
		t.Fatalf("lock: %v", err)
	}
	if pids, ok := lockPIDs(lockPath(dir)); ok {
		// flock(1) takes the lock itself, then runs the shell.
		if len(pids) != 1 || pids[0] != cmd.Process.Pid || !strings.Contains(err.Error(), fmt.Sprintf("the kernel lists pid %d as holding it", cmd.Process.Pid)) {
			t.Fatalf("the kernel lists %v; error %v; flock is pid %d", pids, err, cmd.Process.Pid)
		}
	}
}

func TestLockedErrorMessage(t *testing.T) {
	tests := []struct {
		name string
		err  LockedError
		want string
	}{
		{"no holder", LockedError{Status{Path: "/d/runtime.lock"}}, "runtime.lock is held by a process that left no record (/d/runtime.lock)"},
		{"no holder, what is known", LockedError{Status{Path: "/d/runtime.lock", RecordIgnored: "the last record names pid 9, which is not running", KernelPIDs: []int{12}}},
			"runtime.lock is held by a process that left no record (the kernel lists pid 12 as holding it; the last record names pid 9, which is not running) (/d/runtime.lock)"},
		{"full", LockedError{Status{Path: "/d/runtime.lock", Holder: &Holder{PID: 7, Host: "h", Command: "convkit serve", StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}},
			`runtime.lock is held by pid 7 ("convkit serve") on host h since 2026-01-02T03:04:05Z (/d/runtime.lock)`},
		{"pid only", LockedError{Status{Path: "/d/runtime.lock", Holder: &Holder{PID: 7}}}, "runtime.lock is held by pid 7 (/d/runtime.lock)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			if !errors.Is(&tt.err, ErrLocked) {
				t.Fatal("does not wrap ErrLocked")
			}
		})
	}
}

func TestLockStatusCreatesNothing(t *testing.T) {
	tests := []struct {
		name  string
		setup func(dir string) error
	}{
		{"missing data dir", func(string) error { return nil }},
		{"missing lock file", func(dir string) error { return os.Mkdir(dir, 0o700) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			if err := tt.setup(dir); err != nil {
				t.Fatal(err)
			}
			st, err := LockStatus(dir)
			if err != nil {
				t.Fatal(err)
			}
			if st.Held || st.Holder != nil || st.Path != lockPath(dir) {
				t.Fatalf("LockStatus = %+v", st)
			}
			if _, err := os.Lstat(lockPath(dir)); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("LockStatus created the lock file: %v", err)
			}
		})
	}
}

func TestLockNoneCreatesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	l, err := lockDir(context.Background(), dir, LockOptions{Mode: LockNone})
	if err != nil {
		t.Fatal(err)
	}
	if l.Mode() != LockNone || l.Path() != lockPath(dir) {
		t.Fatalf("lock %+v", l)
	}
	if err := l.release(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("LockNone created the data directory: %v", err)
	}
}

func TestLockFileModes(t *testing.T) {
	for _, mask := range []int{0, 0o277} {
		t.Run(fmt.Sprintf("umask %03o", mask), func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "a", "data")
			old := syscall.Umask(mask)
			defer syscall.Umask(old)
			l, err := lockDir(context.Background(), dir, LockOptions{Mode: LockExclusive})
			if err != nil {
				t.Fatal(err)
			}
			defer l.release()
			for p, want := range map[string]fs.FileMode{dir: 0o700, lockPath(dir): 0o600} {
				fi, err := os.Lstat(p)
				if err != nil {
					t.Fatal(err)
				}
				if got := fi.Mode().Perm(); got != want {
					t.Errorf("%s: mode %03o, want %03o", p, got, want)
				}
			}
		})
	}
}

// TestLockRefusesLinksAndSpecialFiles: a runtime.lock that is a symbolic
// link, a FIFO or a directory is refused by Open (exclusive) and LockStatus,
// without blocking, and nothing is written through it.
func TestLockRefusesLinksAndSpecialFiles(t *testing.T) {
	cases := []struct {
		name string
		make func(t *testing.T, lockPath, victim string)
		want string
	}{
		{"symlink to a file", func(t *testing.T, p, victim string) {
			if err := os.Symlink(victim, p); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"dangling symlink", func(t *testing.T, p, victim string) {
			if err := os.Symlink(victim+".missing", p); err != nil {
				t.Fatal(err)
			}
		}, "is a symbolic link"},
		{"FIFO", func(t *testing.T, p, _ string) {
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Skipf("mkfifo: %v", err)
			}
		}, "not a regular file (a FIFO)"},
		{"directory", func(t *testing.T, p, _ string) {
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "not a regular file (a directory)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "data")
			if err := os.Mkdir(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			victim := filepath.Join(root, "victim")
			const content = "root:x:0:0:root:/root:/bin/sh\n"
			if err := os.WriteFile(victim, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			c.make(t, lockPath(dir), victim)

			done := make(chan struct{})
			var lockErr, statusErr error
			go func() {
				defer close(done)
				var l *Lock
				l, lockErr = lockDir(context.Background(), dir, LockOptions{Mode: LockExclusive, Command: "test"})
				if lockErr == nil {
					l.release()
				}
				_, statusErr = LockStatus(dir)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("Open or LockStatus blocked")
			}
			for what, err := range map[string]error{"Open": lockErr, "LockStatus": statusErr} {
				if err == nil {
					t.Errorf("%s accepted the %s", what, c.name)
					continue
				}
				if msg := err.Error(); !strings.Contains(msg, c.want) || !strings.Contains(msg, lockPath(dir)) {
					t.Errorf("%s: %q, want it to name %s and say %q", what, msg, lockPath(dir), c.want)
				}
				if strings.Count(err.Error(), lockPath(dir)) != 1 {
					t.Errorf("%s: %q names the path more than once", what, err)
				}
			}
			got, err := os.ReadFile(victim)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != content {
				t.Errorf("the file behind the link was changed: %q", got)
			}
		})
	}
}
