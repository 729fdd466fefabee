package prune

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/internal/dshroot"
	"github.com/convkit/convkit/internal/handlog"
	"github.com/convkit/convkit/migrate"
	"github.com/convkit/convkit/store"
)

// TestMain lets the test binary hold a session's lock for another test.
func TestMain(m *testing.M) {
	if dir := os.Getenv("CONVKIT_TEST_HOLD_SESSION"); dir != "" {
		r, _ := dshroot.Open(filepath.Dir(filepath.Dir(dir)))
		l, err := r.LockSession(&dshroot.Session{Dir: dir, ID: filepath.Base(dir)})
		if err != nil {
			os.Exit(1)
		}
		os.WriteFile(dir+".held", nil, 0o600)
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(dir + ".release"); err == nil {
				break
			}
		}
		l.Release()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// files hashes every file under dir by its path under dir.
func files(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// migratedStore is a generated store, migrated: every older session log
// has its v4 successor beside it.
func migratedStore(t *testing.T) *store.Store {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := fixtures.Generate(dir, fixtures.Options{Seed: 7, Conversations: 12}); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(context.Background(), dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := migrate.Run(context.Background(), s, migrate.Options{Jobs: 2, ReportDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	return s
}

// older lists the generations below their log's current one.
func older(t *testing.T, s *store.Store) []string {
	t.Helper()
	tree, err := s.Walk()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range tree.Conversations {
		for _, l := range c.Logs {
			for _, g := range l.Generations[1:] {
				if g.Version < l.Current.Version {
					out = append(out, filepath.Join(c.Path, g.String()))
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func readAll(t *testing.T, path string) {
	t.Helper()
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, err := range r.Events() {
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
}

// A migrated store loses its older generations and nothing else; a dry run
// reports the same and removes nothing; a second prune finds nothing.
func TestStore(t *testing.T) {
	s := migratedStore(t)
	conv := s.ConversationsDir()
	want := older(t, s)
	if len(want) < 3 {
		t.Fatalf("the migrated store has %d older generations", len(want))
	}
	before := files(t, conv)
	var dry []string
	res, err := Store(context.Background(), s, Options{DryRun: true, OnEvent: func(f Generation) {
		if f.Action != ActionRemovable {
			t.Errorf("dry run: %+v", f)
		}
		dry = append(dry, f.Path)
	}})
	if err != nil || res.Files != len(want) || res.Kept != 0 {
		t.Fatalf("dry run: %+v %v", res, err)
	}
	if after := files(t, conv); len(after) != len(before) {
		t.Fatal("the dry run removed files")
	}
	var got, successors []string
	var bytes int64
	res, err = Store(context.Background(), s, Options{OnEvent: func(f Generation) {
		got = append(got, f.Path)
		successors = append(successors, f.Successor)
		bytes += f.Bytes
		if f.Action != ActionRemoved || f.Version >= 4 || !strings.Contains(filepath.Base(f.Successor), ".v4.") || filepath.Dir(f.Successor) != filepath.Dir(f.Path) {
			t.Errorf("%+v", f)
		}
	}})
	if err != nil || res.Files != len(want) || res.Bytes != bytes || res.Kept != 0 || res.Logs != len(want) {
		t.Fatalf("%+v %v", res, err)
	}
	sort.Strings(got)
	sort.Strings(dry)
	if strings.Join(got, "\n") != strings.Join(want, "\n") || strings.Join(dry, "\n") != strings.Join(want, "\n") {
		t.Fatalf("removed:\n%s\ndry run:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(dry, "\n"), strings.Join(want, "\n"))
	}
	// Everything else is byte-identical, and every current log reads.
	after := files(t, conv)
	for rel, h := range before {
		p := filepath.Join(conv, rel)
		if _, removed := after[rel]; !removed {
			if sort.SearchStrings(want, p) == len(want) || want[sort.SearchStrings(want, p)] != p {
				t.Errorf("%s removed", rel)
			}
			continue
		}
		if after[rel] != h {
			t.Errorf("%s changed", rel)
		}
	}
	for _, p := range successors {
		readAll(t, p)
	}
	if res, err := Store(context.Background(), s, Options{}); err != nil || res.Files != 0 || res.Kept != 0 {
		t.Fatalf("second prune: %+v %v", res, err)
	}
}

// Store refuses a store opened without the exclusive lock, except for a
// dry run.
func TestStoreNeedsTheLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := fixtures.Generate(dir, fixtures.Options{Seed: 3, Conversations: 2}); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(context.Background(), dir, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Store(context.Background(), s, Options{}); err == nil || !strings.Contains(err.Error(), "exclusive lock") {
		t.Fatalf("without the lock: %v", err)
	}
	if _, err := Store(context.Background(), s, Options{DryRun: true}); err != nil {
		t.Fatal(err)
	}
}

// session writes a plain generation of session id under the project
// directory of cwd in root.
func session(t *testing.T, root string, v int, id, cwd string, lines ...string) string {
	t.Helper()
	dir, err := dshroot.SessionDir(id)
	if err != nil {
		t.Fatal(err)
	}
	return handlog.Put(t, root, filepath.Join(dshroot.ProjectDir(cwd), dir, dshroot.GenerationName(v, 0, "")),
		append([]string{handlog.Header(v, id, cwd, "")}, lines...)...)
}

func migrateRoot(t *testing.T, root string) {
	t.Helper()
	r, err := dshroot.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrate.RunSessions(context.Background(), r, migrate.Options{Jobs: 1, ReportDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
}

func pruneRoot(t *testing.T, root string, opts Options) (*Result, map[string]string) {
	t.Helper()
	r, err := dshroot.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]string{}
	opts.OnEvent = func(k Generation) {
		if k.Action != ActionKept {
			return
		}
		rel, _ := filepath.Rel(root, k.Path)
		kept[rel] = k.Reason
	}
	res, err := Sessions(context.Background(), r, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res, kept
}

// The check, case by case, in the runtime's layout: what a successor does
// not hold, or holds otherwise than the chain derives it, is kept; what it
// holds, with events appended since or written by another program in
// another key order, is removed; a log without a v4 successor is never
// touched.
func TestSessionsCheck(t *testing.T) {
	root := t.TempDir()
	p := "/p"
	turn := handlog.Turn()
	ids := []string{"plain", "appended", "reordered", "short", "altered", "foreign", "broken", "badsource"}
	for _, id := range ids {
		session(t, root, 3, id, p, turn...)
	}
	// Two older generations: the chain derives the same events from both.
	session(t, root, 0, "two", p, turn...)
	session(t, root, 1, "two", p, turn...)
	// A v2 log beside a v3 one: the chain inserts a system message into
	// the v2 one's events (v2→v3) that the v3 one, written apart, lacks.
	session(t, root, 2, "apart", p, turn...)
	session(t, root, 3, "apart", p, turn...)
	migrateRoot(t, root)
	// No successor: the current generation is older (never touched).
	session(t, root, 2, "unmigrated", p, turn...)
	session(t, root, 3, "unmigrated", p, turn...)
	succ := func(id string) string { return filepath.Join(root, "--p--", id, "session.v4.jsonl") }
	edit := func(id string, f func(lines []string) []string) {
		b, err := os.ReadFile(succ(id))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if err := os.WriteFile(succ(id), []byte(strings.Join(f(lines), "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	edit("appended", func(l []string) []string {
		return append(l, `{"type":"turn/start","seq":5,"time":20,"data":{"turn":2}}`)
	})
	edit("reordered", func(l []string) []string {
		// As the runtime writes rows: data before seq and time, spaced.
		l[1] = `{"type":"turn/start","data":{ "turn": 1 },"seq":0,"time":10}`
		return l
	})
	edit("short", func(l []string) []string { return l[:len(l)-2] })
	edit("altered", func(l []string) []string {
		l[3] = strings.Replace(l[3], `"hello"`, `"HELLO"`, 1)
		return l
	})
	edit("foreign", func(l []string) []string {
		l[0] = strings.Replace(l[0], `"createdAt":1007`, `"createdAt":1`, 1)
		return l
	})
	edit("broken", func(l []string) []string {
		l[2] = `{"type":"step/start","seq":1,"time":11,"data":`
		return append(l, l[len(l)-1])
	})
	src := filepath.Join(root, "--p--", "badsource", "session.v3.jsonl")
	os.WriteFile(src, []byte(handlog.Header(3, "badsource", p, "")+"\n"+`{"type":"turn/start","seq":7,"time":1,"data":{"turn":1}}`+"\n"), 0o600)

	before := files(t, root)
	res, kept := pruneRoot(t, root, Options{})
	removed := map[string]bool{}
	for rel := range before {
		if _, err := os.Lstat(filepath.Join(root, rel)); os.IsNotExist(err) {
			removed[rel] = true
		}
	}
	wantRemoved := "--p--/apart/session.v3.jsonl --p--/appended/session.v3.jsonl --p--/plain/session.v3.jsonl --p--/reordered/session.v3.jsonl --p--/two/session.jsonl --p--/two/session.v1.jsonl"
	var got []string
	for rel := range removed {
		got = append(got, rel)
	}
	sort.Strings(got)
	if strings.Join(got, " ") != wantRemoved || res.Files != 6 || res.Logs != 5 {
		t.Fatalf("removed %v (%+v), want %s\nkept %v", got, res, wantRemoved, kept)
	}
	for id, why := range map[string]string{
		"short":     "ends after 3 events, before the event of seq 3",
		"altered":   "the successor's event of seq 2 is not the one the upgrade chain derives from it: its data differs",
		"foreign":   "the successor's header",
		"broken":    "does not read",
		"badsource": "the upgrade chain does not read it",
		"apart":     `the successor's event of seq 2 is not the one the upgrade chain derives from it: type "user/message", derived "system/message"`,
	} {
		gen := "/session.v3.jsonl"
		if id == "apart" {
			gen = "/session.v2.jsonl"
		}
		if r := kept["--p--/"+id+gen]; !strings.Contains(r, why) {
			t.Errorf("%s kept for %q, want %q", id, r, why)
		}
	}
	if len(kept) != 6 || res.Kept != 6 {
		t.Errorf("kept %v", kept)
	}
	for rel, h := range files(t, root) {
		if before[rel] != h {
			t.Errorf("%s changed", rel)
		}
	}
}

// A session whose session.lock a real second process holds is kept, its
// files untouched; once the holder let go, it is pruned.
func TestSessionsLocked(t *testing.T) {
	root := t.TempDir()
	session(t, root, 3, "busy", "/p", handlog.Turn()...)
	session(t, root, 3, "idle", "/p", handlog.Turn()...)
	migrateRoot(t, root)
	busy := filepath.Join(root, "--p--", "busy")
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "CONVKIT_TEST_HOLD_SESSION="+busy)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(busy + ".held"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the holder never took the lock")
		}
	}
	os.Remove(busy + ".held")
	res, kept := pruneRoot(t, root, Options{})
	os.WriteFile(busy+".release", nil, 0o600)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	os.Remove(busy + ".release")
	if res.Files != 1 || res.Kept != 1 || !strings.Contains(kept["--p--/busy/session.v3.jsonl"], "session.lock") {
		t.Fatalf("%+v %v", res, kept)
	}
	if _, err := os.Lstat(filepath.Join(busy, "session.v3.jsonl")); err != nil {
		t.Fatal("the locked session lost its older generation")
	}
	if res, _ := pruneRoot(t, root, Options{}); res.Files != 1 || res.Kept != 0 {
		t.Fatalf("after the holder let go: %+v", res)
	}
}

// A zstd successor is read through its frames as the plain one is.
func TestSessionsZstd(t *testing.T) {
	root := t.TempDir()
	report, err := fixtures.GenerateSessions(context.Background(), root, fixtures.SessionsOptions{Seed: 9, Sessions: 12, Compression: convlog.Zstd, OrdinaryOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = report
	migrateRoot(t, root)
	res, kept := pruneRoot(t, root, Options{})
	if res.Files == 0 || res.Kept != 0 {
		t.Fatalf("%+v %v", res, kept)
	}
	var left bytes.Buffer
	r, _ := dshroot.Open(root)
	tree, _ := r.Walk()
	for _, e := range tree.Entries {
		if s := e.Session; s != nil {
			if len(s.Generations) > 1 {
				left.WriteString(s.Dir + " ")
			}
			if p := s.Path(); p != "" {
				readAll(t, p)
			}
		}
	}
	if left.Len() > 0 {
		t.Fatalf("older generations left: %s", left.String())
	}
}
