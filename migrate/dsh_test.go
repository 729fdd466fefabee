package migrate

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/dshroot"
	"github.com/convkit/convkit/store"
)

const descriptorV2 = `{"type":"subagent/descriptor","seq":%d,"time":%d,"data":{"version":2,"provider":"p","mode":"one-shot","label":"L"}}`

// handRoot writes a sessions root in the runtime's layout by hand, from
// the reference's rules, holding one case of each rule. It returns what
// each input must end as, by path under the root.
func handRoot(t *testing.T, root string) map[string]string {
	t.Helper()
	app := "/home/dev/app"
	session(t, root, 3, "parent", app, "")
	session(t, root, 3, "k1", "/other", "parent", descriptorV2) // a child in another project directory
	session(t, root, 2, "k2", "", "parent")                     // a child without cwd: _no-cwd
	session(t, root, 0, "v0", app, "")
	session(t, root, 4, "v4", app, "")
	session(t, root, 3, "both", app, "")
	session(t, root, 4, "both", app, "")
	// The highest generation is unreadable, or from the future: no fallback.
	session(t, root, 3, "bad", app, "")
	put(t, root, "--home-dev-app--/bad/session.v4.jsonl", "not a log")
	session(t, root, 3, "future", app, "")
	put(t, root, "--home-dev-app--/future/session.v5.jsonl", strings.Replace(hdr(4, "future", app, ""), `"version":4`, `"version":5`, 1))
	put(t, root, "--home-dev-app--/empty/session.lock")
	// Headers that do not name their place: another id, another cwd.
	put(t, root, "--home-dev-app--/moved/session.v3.jsonl", append([]string{hdr(3, "elsewhere", app, "")}, turn()...)...)
	put(t, root, "--home-dev-app--/wrongcwd/session.v3.jsonl", append([]string{hdr(3, "wrongcwd", "/srv/x", "")}, turn()...)...)
	put(t, root, "--home-dev-app--/a b/session.v3.jsonl", append([]string{hdr(3, "a b", app, "")}, turn()...)...)
	session(t, root, 3, "twice", app, "")
	session(t, root, 3, "twice", "/other", "")
	put(t, root, "--home-dev-app--/flat.jsonl", hdr(0, "flat", app, ""))
	put(t, root, "session.v3.jsonl", hdr(3, "top", "", ""))
	put(t, root, "README.md", "not the layout's")
	elsewhere := t.TempDir()
	session(t, elsewhere, 3, "far", "/far", "")
	os.Symlink(filepath.Join(elsewhere, "--far--"), filepath.Join(root, "--linked-project--"))
	os.Symlink(filepath.Join(elsewhere, "--far--", "far"), filepath.Join(root, "--home-dev-app--", "linked"))
	return map[string]string{
		"--home-dev-app--/parent/session.v3.jsonl":   "converted",
		"--other--/k1/session.v3.jsonl":              "converted",
		"_no-cwd/k2/session.v2.jsonl":                "converted",
		"--home-dev-app--/v0/session.jsonl":          "converted",
		"--home-dev-app--/v4/session.v4.jsonl":       "already-v4",
		"--home-dev-app--/both/session.v4.jsonl":     "already-v4",
		"--home-dev-app--/bad/session.v4.jsonl":      "failed",
		"--home-dev-app--/future/session.v5.jsonl":   "failed",
		"--home-dev-app--/empty":                     "skipped",
		"--home-dev-app--/moved/session.v3.jsonl":    "failed",
		"--home-dev-app--/wrongcwd/session.v3.jsonl": "failed",
		"--home-dev-app--/a b/session.v3.jsonl":      "failed",
		"--home-dev-app--/twice/session.v3.jsonl":    "failed",
		"--other--/twice/session.v3.jsonl":           "failed",
		"--home-dev-app--/flat.jsonl":                "failed",
		"session.v3.jsonl":                           "failed",
		"--linked-project--":                         "failed",
		"--home-dev-app--/linked":                    "failed",
	}
}

// runSessions migrates the sessions root root in the runtime's layout.
func runSessions(t *testing.T, root string, opts Options) (*Summary, string) {
	t.Helper()
	var out bytes.Buffer
	opts.OnEvent = lines(&out)
	if opts.ReportDir == "" {
		opts.ReportDir = t.TempDir()
	}
	return runSessionsOpts(t, root, opts), out.String()
}

// runSessionsOpts migrates the sessions root root with opts as they are.
func runSessionsOpts(t *testing.T, root string, opts Options) *Summary {
	t.Helper()
	r, err := dshroot.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := RunSessions(context.Background(), r, opts)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// items indexes the failure items of a summary by path under root.
func items(t *testing.T, root string, sum *Summary) map[string]FailureItem {
	out := map[string]FailureItem{}
	for _, g := range sum.FailureGroups {
		for _, it := range g.Items {
			rel, _ := filepath.Rel(root, it.InputPath)
			out[rel] = it
		}
	}
	return out
}

func TestSessionsRoot(t *testing.T) {
	root := t.TempDir()
	want := handRoot(t, root)
	before := hashTree(t, root)
	sum, out := runSessions(t, root, Options{Jobs: 2})

	if sum.Totals != (Counts{Converted: 4, AlreadyV4: 2, Failed: 11, Skipped: 1}) || sum.InputCount != len(want) || sum.Layout != LayoutDSH {
		t.Fatalf("totals %+v, inputs %d, layout %s\n%s", sum.Totals, sum.InputCount, sum.Layout, out)
	}
	for _, l := range []string{
		"Root: " + root + "\n",
		"Layout: dsh\n",
		"Discovered 18 Session directories or invalid layout entries.\n",
		`"--home-dev-app--/parent" START session.v3.jsonl (V3, `,
		`"--home-dev-app--/parent" V3 -> V4: session.v4.jsonl (`,
		`"--home-dev-app--/v0" V0 -> V4: session.v4.jsonl (`,
		`"--home-dev-app--/v4" already V4 (opened successfully) (`,
		`"--home-dev-app--/empty" SKIPPED: no canonical Session generation; completed=`,
		"Summary: converted=4, already-V4=2, failed=11, skipped=1\n",
	} {
		if !strings.Contains(out, l) {
			t.Errorf("output lacks %q", l)
		}
	}
	it := items(t, root, sum)
	for rel, msg := range map[string]string{
		"--home-dev-app--/bad/session.v4.jsonl":      "header line is not valid JSON",
		"--home-dev-app--/future/session.v5.jsonl":   "v5",
		"--home-dev-app--/moved/session.v3.jsonl":    `: header id "elsewhere" is not the session "moved" its session directory names`,
		"--home-dev-app--/wrongcwd/session.v3.jsonl": `: header id "wrongcwd" and cwd identify "` + filepath.Join(root, "--srv-x--/wrongcwd/session.v3.jsonl") + `"`,
		"--home-dev-app--/a b/session.v3.jsonl":      `noncanonical Session directory name "a b"`,
		"--home-dev-app--/twice/session.v3.jsonl":    `duplicate JSONL session id "twice" appears in multiple project directories`,
		"--other--/twice/session.v3.jsonl":           `duplicate JSONL session id "twice" appears in multiple project directories`,
		"--home-dev-app--/flat.jsonl":                "unsupported flat-file layout; expected project/session/generation",
		"session.v3.jsonl":                           "unsupported flat-file layout; expected project/session/generation",
		"--linked-project--":                         "project symbolic links are not traversed",
		"--home-dev-app--/linked":                    "Session symbolic links are not traversed",
	} {
		got, ok := it[rel]
		if !ok || !strings.Contains(got.Message, msg) {
			t.Errorf("%s: %+v, want a message with %q", rel, got, msg)
		}
	}
	if r := it["--home-dev-app--/moved/session.v3.jsonl"].Reason; r != "corrupt_log" {
		t.Errorf("identity reason %q", r)
	}
	if r := it["--home-dev-app--/future/session.v5.jsonl"].Reason; r != "unsupported_input" {
		t.Errorf("future reason %q", r)
	}
	// sourceVersion is a number (null for the layout's own failures).
	for _, g := range sum.FailureGroups {
		for _, i := range g.Items {
			rel, _ := filepath.Rel(root, i.InputPath)
			if layout := !strings.HasSuffix(rel, ".jsonl") || rel == "session.v3.jsonl" || strings.HasSuffix(rel, "flat.jsonl"); layout != (g.SourceVersion == nil) {
				t.Errorf("%s: sourceVersion %v", rel, g.SourceVersion)
			}
		}
	}
	raw, _ := os.ReadFile(sum.SummaryPath)
	if !bytes.Contains(raw, []byte(`"sourceVersion": 5,`)) || !bytes.Contains(raw, []byte(`"sourceVersion": null,`)) || !bytes.Contains(raw, []byte(`"layout": "dsh"`)) {
		t.Errorf("summary.json:\n%s", raw)
	}

	// The originals are byte-identical; the only new files are the four
	// successors, each beside its source; nothing at the root level and no
	// session.lock beyond the converted sessions'.
	after := hashTree(t, root)
	for p, h := range before {
		if after[p] != h {
			t.Errorf("original %s changed", p)
		}
	}
	var added []string
	for p := range after {
		if _, ok := before[p]; !ok {
			added = append(added, p)
		}
	}
	sort.Strings(added)
	wantAdded := []string{
		"--home-dev-app--/parent/session.lock", "--home-dev-app--/parent/session.v4.jsonl",
		"--home-dev-app--/v0/session.lock", "--home-dev-app--/v0/session.v4.jsonl",
		"--other--/k1/session.lock", "--other--/k1/session.v4.jsonl",
		"_no-cwd/k2/session.lock", "_no-cwd/k2/session.v4.jsonl",
	}
	if strings.Join(added, " ") != strings.Join(wantAdded, " ") {
		t.Fatalf("new files:\n%s\nwant\n%s", strings.Join(added, "\n"), strings.Join(wantAdded, "\n"))
	}
	// The parent's catalog is completed from its children in other
	// session and project directories.
	body, _ := os.ReadFile(filepath.Join(root, "--home-dev-app--/parent/session.v4.jsonl"))
	for _, l := range []string{
		`{"type":"subagent/catalog","seq":5,"time":14,"data":{"version":0,"childId":"k1","childCreatedAt":1002,"mode":"one-shot","label":"L"}}`,
		`{"type":"subagent/catalog","seq":6,"time":14,"data":{"version":1,"childId":"k2","childCreatedAt":1002,"mode":"unknown"}}`,
	} {
		if !bytes.Contains(body, []byte(l+"\n")) {
			t.Errorf("parent successor lacks %s:\n%s", l, body)
		}
	}
	// The successors are strict v4 logs that still name their place.
	r, _ := dshroot.Open(root)
	for _, p := range wantAdded {
		if !strings.HasSuffix(p, ".v4.jsonl") {
			continue
		}
		full := filepath.Join(root, p)
		lr, err := convlog.Open(full, convlog.ReaderOptions{Version: 4})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.CheckIdentity(full, lr.Header()); err != nil {
			t.Error(err)
		}
		lr.Close()
		if err := strictRead(full); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}

	// A rerun converts nothing and changes no byte.
	sum2, out2 := runSessions(t, root, Options{Jobs: 2})
	if sum2.Totals != (Counts{AlreadyV4: 6, Failed: 11, Skipped: 1}) {
		t.Fatalf("rerun %+v\n%s", sum2.Totals, out2)
	}
	again := hashTree(t, root)
	if len(again) != len(after) {
		t.Fatal("the rerun changed the file set")
	}
	for p, h := range after {
		if again[p] != h {
			t.Errorf("the rerun changed %s", p)
		}
	}
}

func TestSessionsJobsGiveIdenticalSuccessors(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	handRoot(t, a)
	handRoot(t, b)
	runSessions(t, a, Options{Jobs: 1})
	runSessions(t, b, Options{Jobs: 8})
	ha, hb := hashTree(t, a), hashTree(t, b)
	n := 0
	for p, h := range ha {
		if strings.Contains(p, ".v4.") {
			n++
			if hb[p] != h {
				t.Errorf("%s differs between 1 and 8 jobs", p)
			}
		}
	}
	if n < 6 || len(ha) != len(hb) {
		t.Fatalf("%d successors; %d files vs %d", n, len(ha), len(hb))
	}
}

func TestSessionsDryRun(t *testing.T) {
	root := t.TempDir()
	handRoot(t, root)
	before := hashTree(t, root)
	sum, out := runSessions(t, root, Options{DryRun: true})
	if sum.Totals.Planned != 4 || sum.Totals.Converted != 0 || sum.Totals.Failed != 11 {
		t.Fatalf("%+v\n%s", sum.Totals, out)
	}
	if !strings.Contains(out, `"--home-dev-app--/parent" V3 -> V4: would write session.v4.jsonl (about `) {
		t.Errorf("no plan line:\n%s", out)
	}
	after := hashTree(t, root)
	if len(after) != len(before) {
		t.Fatalf("a dry run wrote files (a session.lock?): %d vs %d", len(after), len(before))
	}
}

// A root that holds both compressions is refused whole: the inputs are
// found and counted, none is worked on.
func TestSessionsMixedCompression(t *testing.T) {
	root := t.TempDir()
	session(t, root, 3, "a", "/p", "")
	put(t, root, "--p--/b/session.v3.jsonl.zstd", "x")
	before := hashTree(t, root)
	sum, out := runSessions(t, root, Options{})
	if sum.Totals != (Counts{Failed: 1}) || sum.InputCount != 2 {
		t.Fatalf("%+v, %d inputs\n%s", sum.Totals, sum.InputCount, out)
	}
	if !strings.Contains(out, "Discovered 2 Session directories") || !strings.Contains(out, `ERROR "`+root+`": session artifact "`+filepath.Join(root, "--p--/b/session.v3.jsonl.zstd")+`" uses .jsonl.zstd, but this root's compression is "none"`) {
		t.Errorf("%s", out)
	}
	if strings.Contains(out, "START") {
		t.Errorf("an input was worked on:\n%s", out)
	}
	if after := hashTree(t, root); len(after) != len(before) {
		t.Error("files were written")
	}
}

func TestSessionsEmptyAndMissingRoot(t *testing.T) {
	root := t.TempDir()
	sum, out := runSessions(t, root, Options{})
	if sum.Totals != (Counts{}) || sum.InputCount != 0 || !strings.Contains(out, "Discovered 0 Session directories or invalid layout entries.\nThe sessions root is empty: there is nothing to migrate.\n") {
		t.Fatalf("empty: %+v\n%s", sum.Totals, out)
	}
	if entries, _ := os.ReadDir(root); len(entries) != 0 {
		t.Errorf("created %v in an empty root", entries)
	}
	missing := filepath.Join(root, "missing")
	sum, out = runSessions(t, missing, Options{})
	if sum.Totals != (Counts{Failed: 1}) || sum.InputCount != 0 || !strings.Contains(out, `ERROR "`+missing+`": sessions root: no such file or directory`) {
		t.Fatalf("missing: %+v\n%s", sum.Totals, out)
	}
	var fromFile map[string]any
	b, _ := os.ReadFile(sum.SummaryPath)
	json.Unmarshal(b, &fromFile)
	if fromFile["inputCount"] != 0.0 || fromFile["bySourceVersion"].(map[string]any)["unknown"] == nil {
		t.Errorf("summary.json: %s", b)
	}
	// The runtime's reason and error name for a missing root.
	if g := sum.FailureGroups; len(g) != 1 || g[0].Reason != "other" || g[0].ErrorName != "Error" || g[0].SourceVersion != nil {
		t.Errorf("missing root's group: %+v", g)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Error("the missing root was created")
	}
}

func TestSessionsRefuseCompress(t *testing.T) {
	r, _ := dshroot.Open(t.TempDir())
	if _, err := RunSessions(context.Background(), r, Options{Compress: CompressZstd, ReportDir: t.TempDir()}); err == nil {
		t.Fatal("--compress zstd accepted in the dsh layout")
	}
}

// holdSession is the second process of TestSessionLockHeld: it takes the
// session.lock of dir as the runtime does, creates dir/../.held and lets
// go once dir/../.release exists.
func holdSession(dir string) {
	r, _ := dshroot.Open(filepath.Dir(filepath.Dir(dir)))
	l, err := r.LockSession(&dshroot.Session{Dir: dir, ID: filepath.Base(dir)})
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	os.WriteFile(filepath.Join(filepath.Dir(dir), ".held"), nil, 0o600)
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(filepath.Dir(dir), ".release")); err == nil {
			break
		}
	}
	l.Release()
	os.Exit(0)
}

// A session whose session.lock a real second process holds fails with
// reason write_locked and is left as it is; the rest converts; once the
// holder let go, a rerun converts it. The lock file stays.
func TestSessionLockHeld(t *testing.T) {
	root := t.TempDir()
	session(t, root, 3, "busy", "/p", "")
	session(t, root, 3, "idle", "/p", "")
	busy := filepath.Join(root, "--p--", "busy")
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "CONVKIT_TEST_HOLD_SESSION="+busy)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	held := filepath.Join(root, "--p--", ".held")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(held); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the holder never took the lock")
		}
	}
	os.Remove(held)
	lockBefore, _ := os.Lstat(filepath.Join(busy, "session.lock"))
	sum, out := runSessions(t, root, Options{Jobs: 2})
	os.WriteFile(filepath.Join(root, "--p--", ".release"), nil, 0o600)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("holder: %v", err)
	}
	os.Remove(filepath.Join(root, "--p--", ".release"))
	if sum.Totals != (Counts{Converted: 1, Failed: 1}) {
		t.Fatalf("%+v\n%s", sum.Totals, out)
	}
	it := items(t, root, sum)["--p--/busy/session.v3.jsonl"]
	if it.Reason != "write_locked" || it.ErrorName != "SessionAlreadyOwnedError" ||
		it.Message != `session "busy" is already owned: `+filepath.Join(busy, "session.lock")+` is locked by another process` {
		t.Fatalf("%+v", it)
	}
	if _, err := os.Stat(filepath.Join(busy, "session.v4.jsonl")); !os.IsNotExist(err) {
		t.Fatal("converted a locked session")
	}
	lockAfter, err := os.Lstat(filepath.Join(busy, "session.lock"))
	if err != nil || !os.SameFile(lockBefore, lockAfter) {
		t.Fatal("session.lock was replaced or removed")
	}
	sum, out = runSessions(t, root, Options{})
	if sum.Totals != (Counts{Converted: 1, AlreadyV4: 1}) {
		t.Fatalf("after the holder let go: %+v\n%s", sum.Totals, out)
	}
	if _, err := os.Lstat(filepath.Join(busy, "session.lock")); err != nil {
		t.Fatal("session.lock removed after the conversion")
	}
}

// A child that changes between the parent's preparation and publication
// defers the parent, which the retry then converts with the child's new
// state; a parent whose children stay as they are is not deferred.
func TestSessionsChildChangeDefers(t *testing.T) {
	root := t.TempDir()
	session(t, root, 3, "parent", "/p", "")
	child := session(t, root, 3, "kid", "/q", "parent", descriptorV2)
	var mu sync.Mutex
	calls := 0
	hook := func(src string) {
		mu.Lock()
		defer mu.Unlock()
		if !strings.Contains(src, "/parent/") {
			return
		}
		if calls++; calls == 1 {
			// The child's log changes on disk meanwhile.
			f, _ := os.OpenFile(child, os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString("")
			f.Close()
			now := time.Now().Add(time.Hour)
			os.Chtimes(child, now, now)
		}
	}
	// One job, the parent first: the child is converted after it.
	sum, out := runSessions(t, root, Options{Jobs: 1, BeforePublish: hook})
	// The deferral names what changed: the child's log.
	if !strings.Contains(out, `"--p--/parent" DEFERRED: historical session generation changed during migration: "`+filepath.Join(root, "--p--/parent/session.v3.jsonl")+
		`": child session "kid" changed: `+child+`: its modification time changed (same size); retry once after initial jobs finish`) ||
		!strings.Contains(out, `"--p--/parent" RETRY session.v3.jsonl (V3, `) {
		t.Fatalf("no deferral and retry:\n%s", out)
	}
	if sum.Totals != (Counts{Converted: 2}) || calls != 2 {
		t.Fatalf("%+v, %d calls\n%s", sum.Totals, calls, out)
	}
}

// zstdCLI compresses text with the real zstd tool, one frame with its
// content checksum.
func zstdCLI(t *testing.T, text string) []byte {
	t.Helper()
	bin, err := exec.LookPath("zstd")
	if err != nil {
		t.Fatal("the zstd tool is needed (.ci/run installs it)")
	}
	cmd := exec.Command(bin, "-q", "-c", "--check")
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Compressed sources written by the real zstd tool (a header frame, then a
// body frame, as the runtime writes them) are read; each successor keeps
// its source's suffix (.jsonl.zstd in, .v4.jsonl.zstd out; .zst in, .zst
// out); a torn last frame contributes its complete lines; zstd -dc reads
// every successor.
func TestSessionsZstdFromTheCLI(t *testing.T) {
	root := t.TempDir()
	write := func(rel, header string, events []string) string {
		b := zstdCLI(t, header+"\n")
		b = append(b, zstdCLI(t, strings.Join(events, "\n")+"\n")...)
		return putBytes(t, root, rel, b)
	}
	p1 := write("--p--/a/session.v3.jsonl.zstd", hdr(3, "a", "/p", ""), turn())
	p2 := write("--p--/b/session.jsonl.zstd", hdr(0, "b", "/p", ""), turn())
	p3 := write("_no-cwd/c/session.v2.jsonl.zst", hdr(2, "c", "", ""), turn())
	// d: its body is two frames, the last torn in half.
	torn := zstdCLI(t, hdr(3, "d", "/p", "")+"\n")
	torn = append(torn, zstdCLI(t, strings.Join(turn()[:3], "\n")+"\n")...)
	last := zstdCLI(t, strings.Join(turn()[3:], "\n")+"\n")
	torn = append(torn, last[:len(last)/2]...)
	p4 := putBytes(t, root, "--p--/d/session.v3.jsonl.zstd", torn)
	before := hashTree(t, root)

	sum, out := runSessions(t, root, Options{Jobs: 2})
	if sum.Totals != (Counts{Converted: 4}) {
		t.Fatalf("%+v\n%s", sum.Totals, out)
	}
	for src, dst := range map[string]string{p1: "session.v4.jsonl.zstd", p2: "session.v4.jsonl.zstd", p3: "session.v4.jsonl.zst", p4: "session.v4.jsonl.zstd"} {
		succ := filepath.Join(filepath.Dir(src), dst)
		if err := strictRead(succ); err != nil {
			t.Errorf("%s: %v", succ, err)
		}
		plain, err := exec.Command("zstd", "-dc", succ).Output()
		if err != nil || !bytes.HasPrefix(plain, []byte(`{"type":"session","version":4,`)) {
			t.Errorf("zstd -dc %s: %v\n%.200s", succ, err, plain)
		}
	}
	// The torn source gave its first frame's three events (turn/start,
	// step/start, user/message) plus what v3→v4 adds.
	r, err := convlog.Open(filepath.Join(root, "--p--/d/session.v4.jsonl.zstd"), convlog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, err := range r.Events() {
		if err != nil {
			break
		}
		n++
	}
	r.Close()
	if n != 3 {
		t.Errorf("the torn source's successor holds %d events, want 3", n)
	}
	for p, h := range before {
		if hashTree(t, root)[p] != h {
			t.Errorf("original %s changed", p)
		}
	}
}

func putBytes(t *testing.T, root, rel string, b []byte) string {
	t.Helper()
	p := put(t, root, rel)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// In convkit's layout too a successor keeps its source's suffix: a
// session log renamed to the runtime's .zstd spelling gets a .v4.jsonl.zstd
// successor, a .zst one a .v4.jsonl.zst successor.
func TestConvkitLayoutKeepsSuffix(t *testing.T) {
	dir := generate(t)
	root := store.ConversationsDir(dir)
	var zst []string
	for p := range hashTree(t, root) {
		if n, ok := convlog.ParseName(filepath.Base(p)); ok && n.Compression == convlog.Zstd && n.Version < 4 && n.Base != store.ConversationLogBase {
			zst = append(zst, p)
		}
	}
	sort.Strings(zst)
	if len(zst) < 2 {
		t.Fatalf("the generated store has %d compressed older session logs", len(zst))
	}
	renamed := strings.TrimSuffix(zst[0], ".zst") + ".zstd"
	if err := os.Rename(filepath.Join(root, zst[0]), filepath.Join(root, renamed)); err != nil {
		t.Fatal(err)
	}
	run(t, root, Options{Jobs: 2})
	for src, want := range map[string]string{renamed: ".v4.jsonl.zstd", zst[1]: ".v4.jsonl.zst"} {
		n, _ := convlog.ParseName(filepath.Base(src))
		succ := filepath.Join(root, filepath.Dir(src), n.Base+want)
		if err := strictRead(succ); err != nil {
			t.Errorf("%s: %v", src, err)
		}
		other := strings.TrimSuffix(succ, "d")
		if want == ".v4.jsonl.zst" {
			other = succ + "d"
		}
		if _, err := os.Lstat(other); err == nil {
			t.Errorf("%s: a successor with the other suffix too: %s", src, other)
		}
	}
}

// A stray copy of a child's session directory (cp -r kid kid-bak) fails on
// its own identity check, is reported once as no child, and the parent
// converts with its one child: no deferral, in one job or two.
func TestSessionsStrayChildCopy(t *testing.T) {
	for _, jobs := range []int{1, 2} {
		root := t.TempDir()
		session(t, root, 3, "parent", "", "")
		kid := session(t, root, 3, "kid", "", "parent", descriptorV2)
		body, _ := os.ReadFile(kid)
		put(t, root, "_no-cwd/kid-bak/session.v3.jsonl", strings.TrimSuffix(string(body), "\n"))
		sum, out := runSessions(t, root, Options{Jobs: jobs})
		if sum.Totals != (Counts{Converted: 2, Failed: 1}) || strings.Contains(out, "DEFERRED") {
			t.Fatalf("jobs %d: %+v\n%s", jobs, sum.Totals, out)
		}
		it := items(t, root, sum)["_no-cwd/kid-bak/session.v3.jsonl"]
		if it.Reason != "corrupt_log" || !strings.Contains(it.Message, `header id "kid" is not the session "kid-bak" its session directory names`) {
			t.Fatalf("the copy: %+v", it)
		}
		if n := strings.Count(out, `Ignored "`+filepath.Join(root, "_no-cwd/kid-bak")+`" as a child of session "parent": corrupt session log`); n != 1 {
			t.Fatalf("jobs %d: the copy reported %d times\n%s", jobs, n, out)
		}
		parent, _ := os.ReadFile(filepath.Join(root, "_no-cwd/parent/session.v4.jsonl"))
		if n := strings.Count(string(parent), `"type":"subagent/catalog"`); n != 1 || !strings.Contains(string(parent), `"childId":"kid"`) {
			t.Fatalf("jobs %d: parent's catalog:\n%s", jobs, parent)
		}
	}
}
