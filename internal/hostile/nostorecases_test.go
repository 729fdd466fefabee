package hostile

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/convkit/convkit/store"
)

// holderEnv makes the test binary a second process holding runtime.lock of
// the data directory it names, as the runtime does: it says "locked" and
// holds the lock until its stdin closes.
const holderEnv = "HOSTILE_LOCK_HOLDER"

func holderMain(dir string) int {
	s, err := store.Open(context.Background(), dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "runtime"}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("locked")
	io.Copy(io.Discard, os.Stdin)
	s.Close()
	return 0
}

// holdLock starts a second process that holds runtime.lock of the store in
// dir until the case ends, and records its pid as {holder}.
func (f *fx) holdLock(dir string) {
	f.t.Helper()
	self, err := os.Executable()
	if err != nil {
		f.t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), holderEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	line := make(chan string, 1)
	go func() {
		s, _ := bufio.NewReader(out).ReadString('\n')
		line <- s
	}()
	select {
	case s := <-line:
		if s != "locked\n" {
			f.t.Fatalf("the lock holder said %q", s)
		}
	case <-time.After(30 * time.Second):
		f.t.Fatal("the lock holder did not take the lock")
	}
	f.vars["holder"] = strconv.Itoa(cmd.Process.Pid)
}

// otherStore copies the base store to {root}/other, a second store whose
// conversations directory is {other}.
func (f *fx) otherStore() string {
	f.t.Helper()
	other := filepath.Join(f.root, "other")
	copyTree(f.t, f.data, other)
	f.vars["other"] = store.ConversationsDir(other)
	return other
}

func noStoreCases() []hcase {
	noStore := []string{"no store at {data}: the directory does not exist",
		"convkit: hint: name the store's data directory with --data-dir DIR or $CONVKIT_DATA_DIR"}
	mistyped := func(name string, code int, cmd func(f *fx) []string) hcase {
		return hcase{name: "mistyped data directory: " + name + " refuses it, creates nothing", bare: true,
			setup: cmd, code: code, stderr: noStore}
	}
	args := func(a ...string) func(f *fx) []string { return func(*fx) []string { return a } }
	return []hcase{
		mistyped("reindex", 1, args("reindex")),
		mistyped("reindex --check", 1, args("reindex", "--check")),
		mistyped("migrate", 1, args("migrate")),
		mistyped("delete", 1, args("delete", "f97a18db-beba-4b0d-88c6-6fe12af79903")),
		mistyped("list", 1, args("list", "--all")),
		mistyped("search", 1, args("search", "retry")),
		mistyped("backup", 1, func(f *fx) []string { return []string{"backup", "--to", f.path("backups")} }),
		mistyped("export", 1, func(f *fx) []string {
			return []string{"export", "f97a18db-beba-4b0d-88c6-6fe12af79903", "--to", f.path("out.tar.zst")}
		}),
		{name: "mistyped data directory: import refuses a directory that is neither a store nor empty, creates nothing", bare: true,
			setup: func(f *fx) []string {
				// A real archive, from a copy of the base store.
				src := filepath.Join(f.root, "src")
				copyTree(f.t, base.basic.Dir, filepath.Join(store.ConversationsDir(src), filepath.Base(base.basic.Dir)))
				p := f.path("one.tar.zst")
				if r := f.runFull("--data-dir", src, "export", base.basic.ID, "--to", p); r.code != 0 {
					f.t.Fatalf("setup export: %d %s", r.code, r.stderr)
				}
				f.write(filepath.Join(f.data, "notes.txt"), []byte("not a store\n"))
				return []string{"import", p}
			}, code: 1,
			stderr: []string{"no store at {data}: it holds no conversations/, metadata.db or runtime.lock",
				"--data-dir DIR or $CONVKIT_DATA_DIR"}},
		{name: "sessions root of another store whose runtime holds its lock: migrate takes that lock, exit 11, changes nothing",
			noDataDir: true,
			setup: func(f *fx) []string {
				other := f.otherStore()
				f.env["CONVKIT_DATA_DIR"] = f.data
				f.holdLock(other)
				return []string{"migrate", "--sessions-dir", f.vars["other"]}
			}, code: 11,
			stderr: []string{"runtime.lock is held by pid {holder} (\"runtime\")", "{root}/other/runtime.lock"}},
		{name: "sessions root of another store beside a different --data-dir: migrate refuses it as a usage error, changes nothing",
			setup: func(f *fx) []string {
				other := f.otherStore()
				f.holdLock(other)
				return []string{"migrate", "--sessions-dir", f.vars["other"]}
			}, code: 2,
			stderr: []string{"--sessions-dir {other} belongs to the store {root}/other, not to --data-dir {data}"}},
		{name: "sessions root that is no store's conversations directory: migrate refuses it, changes nothing",
			setup: func(f *fx) []string {
				root := filepath.Join(f.root, "sessions")
				copyTree(f.t, store.ConversationsDir(f.data), root)
				return []string{"migrate", "--sessions-dir", root}
			}, code: 1,
			stderr: []string{"--sessions-dir {root}/sessions: not a sessions root convkit knows"}},
	}
}
