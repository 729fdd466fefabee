//go:build unix

package crashtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/store"
)

// signalDeadline is how long a job may take to end after SIGTERM: a hang
// detector, far above the second the command line promises.
const signalDeadline = 20 * time.Second

// TestSIGTERM sends SIGTERM to each job mid-run (the process is stopped as
// soon as it has started its work, signalled if it is still at it once
// stopped, and continued, so the signal always lands mid-way) and checks
// that it exits 130 within the deadline, leaves no temporary file, and
// leaves its originals as they were.
func TestSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds convkit and signals processes")
	}
	h := &harness{env: childEnv(t.TempDir())}
	base := t.TempDir()
	src := filepath.Join(base, "src")
	// Large logs make every job last long enough that the signal, sent
	// the moment its work begins, lands well before it ends.
	rep, err := fixtures.Generate(src, fixtures.Options{Seed: 41, Conversations: 60, Large: true})
	if err != nil {
		t.Fatal(err)
	}
	// Without interrupted deletions: reindex would rightly finish them.
	var ids []string
	for _, c := range rep.Conversations {
		if c.Deleting {
			if err := os.RemoveAll(c.Dir); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if !c.Has(fixtures.CaseCorrupt) {
			ids = append(ids, c.ID)
		}
	}
	bundle := filepath.Join(base, "bundle.tar.zst")
	h.must(t, 0, append([]string{"--data-dir", src, "-q", "export", "--to", bundle}, ids...)...)
	tmp := strings.TrimPrefix(h.env[len(h.env)-1], "TMPDIR=")
	bk := filepath.Join(base, "backups")
	h.must(t, 0, "--data-dir", src, "-q", "backup", "--to", bk)
	backups, err := filepath.Glob(filepath.Join(bk, "convkit-*.tar.zst"))
	if err != nil || len(backups) != 1 {
		t.Fatalf("backups: %v %v", backups, err)
	}
	sessions := filepath.Join(base, "sessions")
	if _, err := fixtures.GenerateSessions(context.Background(), sessions, fixtures.SessionsOptions{Seed: 43, Sessions: 40,
		Compression: convlog.Zstd, Large: true, OrdinaryOnly: true}); err != nil {
		t.Fatal(err)
	}

	type trial struct {
		args []string
		// started is a glob that matches once the job has begun its work;
		// until, when set, one that matches once it is past what the
		// signal is for (started may still match then).
		started, until string
		// scan must hold no temporary file afterwards; unchanged are the
		// trees whose files must be as they were (lock file aside), and
		// absent the paths that must not exist.
		scan, unchanged, absent []string
		// lockedBy, when set, is a store whose runtime.lock this test
		// holds while the job runs with --lock-timeout: the job is
		// signalled while it waits for the lock (started is unused),
		// once it has runtime.lock open.
		lockedBy string
		// rerun, when set, are the exit codes the same command may give
		// when run again after the interruption; made are the paths that
		// must exist after that run, and check a command that must exit 0
		// after it.
		rerun       []int
		made, check []string
	}
	// An edit waits for runtime.lock held here: quick commands are
	// signalled while they wait, which is where they spend their time
	// when the runtime is busy.
	edit := func(args ...string) func(t *testing.T, dir string) trial {
		return func(t *testing.T, dir string) trial {
			data := filepath.Join(dir, "data")
			copyTree(t, src, data)
			return trial{args: append([]string{"--data-dir", data, "--lock-timeout", "1m"}, args...),
				scan: []string{data}, unchanged: []string{data}, lockedBy: data}
		}
	}
	jobs := []struct {
		name    string
		prepare func(t *testing.T, dir string) trial
	}{
		{"reindex", func(t *testing.T, dir string) trial {
			data := filepath.Join(dir, "data")
			copyTree(t, src, data)
			return trial{args: []string{"--data-dir", data, "reindex", "--jobs", "9007199254740991"},
				started: filepath.Join(data, ".metadata.db.*.tmp"), scan: []string{data}, unchanged: []string{data},
				absent: []string{filepath.Join(data, "metadata.db")}}
		}},
		{"migrate", func(t *testing.T, dir string) trial {
			data := filepath.Join(dir, "data")
			copyTree(t, src, data)
			clearReports(tmp)
			return trial{args: []string{"--data-dir", data, "migrate", "--jobs", "2"},
				started: filepath.Join(tmp, "convkit-migrate-v4-*"), scan: []string{data}, unchanged: []string{data}}
		}},
		{"backup", func(t *testing.T, dir string) trial {
			data, bk := filepath.Join(dir, "data"), filepath.Join(dir, "bk")
			copyTree(t, src, data)
			return trial{args: []string{"--data-dir", data, "backup", "--to", bk},
				started: filepath.Join(bk, ".convkit-*"), scan: []string{data, bk}, unchanged: []string{data}}
		}},
		{"export", func(t *testing.T, dir string) trial {
			data, out := filepath.Join(dir, "data"), filepath.Join(dir, "out.tar.zst")
			copyTree(t, src, data)
			return trial{args: append([]string{"--data-dir", data, "export", "--to", out}, ids...),
				started: filepath.Join(dir, ".out.tar.zst.*"), scan: []string{dir}, unchanged: []string{data},
				absent: []string{out}}
		}},
		{"import", func(t *testing.T, dir string) trial {
			target, arch := filepath.Join(dir, "target"), filepath.Join(dir, "bundle.tar.zst")
			copyData(bundle, arch)
			return trial{args: []string{"--data-dir", target, "import", arch},
				// The staging stays until the end; the index in place
				// means the work is done.
				started: filepath.Join(target, ".conversations.import-*"),
				until:   filepath.Join(target, "metadata.db"), scan: []string{dir},
				unchanged: []string{filepath.Dir(arch)}}
		}},
		{"import, while it builds the index", func(t *testing.T, dir string) trial {
			// Into a new store: the conversations are placed, then the index
			// is built beside them, as reindex builds it; interrupted there,
			// it is not swapped in.
			target, arch := filepath.Join(dir, "target"), filepath.Join(dir, "bundle.tar.zst")
			copyData(bundle, arch)
			return trial{args: []string{"--data-dir", target, "import", arch},
				started: filepath.Join(target, ".metadata.db.*.tmp"), scan: []string{dir},
				unchanged: []string{filepath.Dir(arch)}, absent: []string{filepath.Join(target, "metadata.db")},
				// The rerun finds the conversations placed and builds the
				// index (exit 3: the generated working directories do not
				// exist here), which then agrees with the logs.
				rerun: []int{0, 3}, made: []string{filepath.Join(target, "metadata.db")},
				check: []string{"--data-dir", target, "reindex", "--check"}}
		}},
		{"rename", edit("rename", ids[0], "renamed while the runtime was busy")},
		{"archive", edit("archive", ids[0], ids[1])},
		{"unarchive", edit("unarchive", ids[0])},
		{"delete", edit("delete", ids[0], ids[1])},
		{"restore", func(t *testing.T, dir string) trial {
			target := filepath.Join(dir, "restored")
			return trial{args: []string{"restore", backups[0], "--to", target},
				started: filepath.Join(dir, ".restored.restore-*"), scan: []string{dir},
				unchanged: []string{bk}, absent: []string{target}}
		}},
		{"restore --conversation waiting for the lock", func(t *testing.T, dir string) trial {
			data := filepath.Join(dir, "data")
			copyTree(t, src, data)
			return trial{args: []string{"--lock-timeout", "1m", "restore", "--conversation", ids[0], "--force", "--to", data, backups[0]},
				scan: []string{data}, unchanged: []string{data, bk}, lockedBy: data}
		}},
		{"backup verify", func(t *testing.T, dir string) trial {
			return trial{args: []string{"backup", "verify", backups[0]},
				started: filepath.Join(tmp, "convkit-verify-*"), scan: []string{bk, tmp}, unchanged: []string{bk}}
		}},
		{"migrate on a sessions root", func(t *testing.T, dir string) trial {
			root := filepath.Join(dir, "sessions")
			copyTree(t, sessions, root)
			clearReports(tmp)
			return trial{args: []string{"migrate", "--sessions-dir", root, "--jobs", "2"},
				started: filepath.Join(tmp, "convkit-migrate-v4-*"), scan: []string{root}, unchanged: []string{root}}
		}},
	}
	for _, j := range jobs {
		t.Run(j.name, func(t *testing.T) {
			var tr trial
			var before map[string]map[string]string
			var code int
			var took time.Duration
			var stderr string
			// A run that ends before it could be stopped where its
			// trial wants it (the machine loaded, the poll late) proves
			// nothing: it is made again, from the start.
			for attempt := 1; ; attempt++ {
				dir := t.TempDir()
				tr = j.prepare(t, dir)
				before = map[string]map[string]string{}
				for _, u := range tr.unchanged {
					before[u] = hashTree(t, u, isLockFile)
				}
				ready := func(int) bool {
					m, _ := filepath.Glob(tr.started)
					past, _ := filepath.Glob(tr.until)
					return len(m) > 0 && (tr.until == "" || len(past) == 0)
				}
				var held *store.Store
				if tr.lockedBy != "" {
					var err error
					held, err = store.Open(context.Background(), tr.lockedBy, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "crash test"}})
					if err != nil {
						t.Fatal(err)
					}
					lock := filepath.Join(tr.lockedBy, store.LockFileName)
					ready = func(pid int) bool { return hasOpen(pid, lock) }
				}
				var ok bool
				code, took, stderr, ok = h.interruptWhen(t, ready, tr.args...)
				if held != nil {
					held.Close()
				}
				if ok {
					break
				}
				if code != 0 && code != 3 {
					t.Fatalf("convkit %s failed (exit %d) before it could be interrupted\n%s", j.name, code, stderr)
				}
				if attempt == 10 {
					t.Fatalf("convkit %s ended (exit %d) before it could be interrupted, %d times\n%s", j.name, code, attempt, stderr)
				}
				t.Logf("convkit %s ended (exit %d) before it could be interrupted; again", j.name, code)
			}
			t.Logf("convkit %s: exit %d %s after SIGTERM", j.name, code, took.Round(time.Millisecond))
			if code != 130 {
				t.Fatalf("exit %d after SIGTERM, want 130\n%s", code, stderr)
			}
			if took > signalDeadline {
				t.Fatalf("took %s to end after SIGTERM", took)
			}
			if left := temps(t, tr.scan...); len(left) > 0 {
				t.Fatalf("temporary files left: %v", left)
			}
			for _, u := range tr.unchanged {
				after := hashTree(t, u, isLockFile)
				for rel, sum := range before[u] {
					if after[rel] != sum {
						t.Fatalf("%s/%s changed or vanished", u, rel)
					}
				}
			}
			for _, p := range tr.absent {
				if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("%s exists after the interrupted run", p)
				}
			}
			if tr.rerun == nil {
				return
			}
			if o := h.run(t, tr.args...); !slices.Contains(tr.rerun, o.code) {
				t.Fatalf("convkit %s run again: exit %d, want one of %v\n%s", j.name, o.code, tr.rerun, o.stderr)
			}
			for _, p := range tr.made {
				if _, err := os.Lstat(p); err != nil {
					t.Fatalf("after the run again: %v", err)
				}
			}
			if tr.check != nil {
				h.must(t, 0, tr.check...)
			}
		})
	}
}

// hasOpen reports whether process pid has the file path open.
func hasOpen(pid int, path string) bool {
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); err == nil && l == path {
			return true
		}
	}
	return false
}

// interruptWhen starts convkit and, once ready reports true of it, stops
// it; if ready still holds when every thread has stopped (a file the poll
// saw may be gone by then), it sends SIGTERM and lets it go on, so the
// signal lands where ready said. It returns the exit code, how long the
// process took to end once continued and its stderr; ok is false when the
// process ended before that (code and stderr are then of that run).
func (h *harness) interruptWhen(t *testing.T, ready func(pid int) bool, args ...string) (code int, took time.Duration, stderr string, ok bool) {
	t.Helper()
	cmd, _, errb := h.command(args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	pid := cmd.Process.Pid
	deadline := time.Now().Add(time.Minute)
	for {
		if ready(pid) {
			cmd.Process.Signal(syscall.SIGSTOP)
			if stopped(t, pid) && ready(pid) {
				break
			}
			cmd.Process.Signal(syscall.SIGCONT)
		}
		select {
		case err := <-done:
			return exitCode(t, err, args, errb.String()), 0, errb.String(), false
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("convkit %s: not ready to be interrupted after a minute", strings.Join(args, " "))
		}
		time.Sleep(time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	start := time.Now()
	cmd.Process.Signal(syscall.SIGCONT)
	var err error
	select {
	case err = <-done:
	case <-time.After(signalDeadline + 10*time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("convkit %s still runs %s after SIGTERM", strings.Join(args, " "), time.Since(start).Round(time.Second))
	}
	took = time.Since(start)
	return exitCode(t, err, args, errb.String()), took, errb.String(), true
}

// exitCode is the exit code of a process that exited; it fails the test
// when the process was killed by a signal.
func exitCode(t *testing.T, err error, args []string, stderr string) int {
	t.Helper()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee) && ee.Exited():
		return ee.ExitCode()
	}
	t.Fatalf("convkit %s: %v\n%s", strings.Join(args, " "), err, stderr)
	return 0
}

// stopped waits until every thread of process pid has stopped (SIGSTOP is
// delivered to each thread as it next runs); false: the process has ended.
func stopped(t *testing.T, pid int) bool {
	t.Helper()
	deadline := time.Now().Add(signalDeadline)
	for {
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		if err != nil {
			return false
		}
		all := true
		for _, task := range tasks {
			stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, task.Name()))
			if err != nil {
				continue // the thread ended
			}
			// The state follows the command name, which is in parentheses.
			i := bytes.LastIndexByte(stat, ')')
			if i < 0 || i+2 >= len(stat) {
				all = false
				break
			}
			switch stat[i+2] {
			case 'T', 't':
			case 'Z', 'X':
				return false
			default:
				all = false
			}
		}
		if all {
			return true
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL) // never leave it stopped
			t.Fatalf("process %d did not stop within %s of SIGSTOP", pid, signalDeadline)
		}
		time.Sleep(time.Millisecond)
	}
}

// clearReports removes migrate's report folders of earlier runs, which are
// kept for days and would match a trial's start at once.
func clearReports(tmp string) {
	old, _ := filepath.Glob(filepath.Join(tmp, "convkit-migrate-v4-*"))
	for _, p := range old {
		os.RemoveAll(p)
	}
}
