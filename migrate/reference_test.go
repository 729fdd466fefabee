package migrate

// The runtime's own migration command is specified by its scenarios
// (scripts/migrate-sessions-to-v4.spec.ts): each is run here in the
// runtime's layout, built as that spec builds it, with what it asserts.
// Where convkit differs by choice, docs/CLI.md's table of differences says
// why; the differences met here are noted at the assertion.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/dshroot"
)

// refFixture is one session written as the spec's fixture() writes it:
// root/_no-cwd/<encodeSegment(id)>/<generation name>, the header
// {type, version, id, createdAt:1, delegationDepth:0, isSeeded:false (v2
// on)} with fields overridden in place or added after (a JavaScript
// spread), each event {...event, seq, time: seq+2}: its keys in the
// order written, then seq and time. A zstd log is a header frame and, when
// there are events, one body frame, each from the zstd tool.
type refFixture struct {
	path, dir string
	bytes     []byte
}

func refSession(t *testing.T, root, id string, version int, zstd bool, events []string, fields ...string) refFixture {
	t.Helper()
	name, err := dshroot.SessionDir(id)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, dshroot.NoCwdDir, name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	type kv struct{ k, v string }
	h := []kv{{"type", `"session"`}, {"version", fmt.Sprint(version)}, {"id", jsonString(id)}, {"createdAt", "1"}, {"delegationDepth", "0"}}
	if version >= 2 {
		h = append(h, kv{"isSeeded", "false"})
	}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		replaced := false
		for i := range h {
			if h[i].k == k {
				h[i].v, replaced = v, true
			}
		}
		if !replaced {
			h = append(h, kv{k, v})
		}
	}
	var parts []string
	for _, f := range h {
		parts = append(parts, jsonString(f.k)+":"+f.v)
	}
	header := "{" + strings.Join(parts, ",") + "}\n"
	var body strings.Builder
	for seq, ev := range events {
		fmt.Fprintf(&body, `%s,"seq":%d,"time":%d}`+"\n", strings.TrimSuffix(ev, "}"), seq, seq+2)
	}
	var b []byte
	c := convlog.Plain
	if zstd {
		c = convlog.Zstd
		b = zstdCLI(t, header)
		if body.Len() > 0 {
			b = append(b, zstdCLI(t, body.String())...)
		}
	} else {
		b = []byte(header + body.String())
	}
	p := filepath.Join(dir, dshroot.GenerationName(version, c, ""))
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return refFixture{path: p, dir: dir, bytes: b}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// refToolTurn is the spec's toolTurn: one turn whose tool result is a v3
// user-role wrapper.
var refToolTurn = []string{
	`{"type":"turn/start","data":{"turn":1}}`,
	`{"type":"step/start","data":{"turn":1,"step":1}}`,
	`{"type":"request/header","data":{"reason":"initial","header":{"config":{"provider":"mock","model":"mock"}}}}`,
	`{"type":"assistant/message","surfaceOp":"append","data":{"turn":1,"step":1,"stream":[],"message":{"id":"assistant","role":"assistant","source":{"kind":"model","provider":"mock","model":"mock"},"content":[{"type":"tool-call","id":"call","name":"read","arguments":"{}"}]}}}`,
	`{"type":"tool/call","data":{"turn":1,"step":1,"callId":"call","name":"read","arguments":"{}"}}`,
	`{"type":"tool/result","surfaceOp":"append","data":{"turn":1,"step":1,"message":{"id":"result","role":"user","source":{"kind":"tool","callId":"call"},"content":[{"type":"tool-result","toolCallId":"call","isError":false,"content":[{"type":"text","text":"saved output"}]}]}}}`,
	`{"type":"step/end","data":{"turn":1,"step":1}}`,
	`{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}`,
}

// refResult is a run as the spec's run() sees it: stdout (the lines
// OnEvent gets), the text log and the summary file parsed.
type refResult struct {
	sum     *Summary
	stdout  string
	log     string
	summary map[string]any
	json    string
}

// refRun runs the command as the spec does, without a layout flag: the
// root is recognised (FindRoot, auto) and must be the runtime's.
func refRun(t *testing.T, root string, opts Options) refResult {
	t.Helper()
	found, err := FindRoot(root, LayoutAuto)
	if err != nil || found.Layout != LayoutDSH {
		t.Fatalf("FindRoot: %+v %v", found, err)
	}
	r, err := dshroot.Open(found.Dir)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	var mu sync.Mutex
	opts.OnEvent = func(ev Event) {
		mu.Lock()
		out.WriteString(ev.Line() + "\n")
		mu.Unlock()
	}
	opts.ReportDir = t.TempDir()
	sum, err := RunSessions(context.Background(), r, opts)
	if err != nil {
		t.Fatal(err)
	}
	res := refResult{sum: sum, stdout: out.String()}
	log, err := os.ReadFile(sum.TextLogPath)
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(sum.SummaryPath)
	if err != nil {
		t.Fatal(err)
	}
	res.log, res.json = string(log), string(js)
	if err := json.Unmarshal(js, &res.summary); err != nil {
		t.Fatal(err)
	}
	return res
}

// plainOf is a log's text: as it is, or decoded by the zstd tool.
func plainOf(t *testing.T, path string) string {
	t.Helper()
	if !strings.HasSuffix(path, ".zstd") {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	b, err := exec.Command("zstd", "-dc", path).Output()
	if err != nil {
		t.Fatalf("zstd -dc %s: %v", path, err)
	}
	return string(b)
}

func counts(c, a, f, s int) map[string]any {
	return map[string]any{"converted": float64(c), "alreadyV4": float64(a), "failed": float64(f), "skipped": float64(s)}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

var compressions = map[string]bool{"none": false, "zstd": true}

func sameBytes(t *testing.T, fs ...refFixture) {
	t.Helper()
	for _, f := range fs {
		if b, err := os.ReadFile(f.path); err != nil || !bytes.Equal(b, f.bytes) {
			t.Errorf("original %s changed (%v)", f.path, err)
		}
	}
}

// "runs each input to completion before starting the next with one job":
// START, then the result, input by input.
func TestReferenceOneJobInOrder(t *testing.T) {
	root := t.TempDir()
	for _, id := range []string{"a", "b", "c"} {
		refSession(t, root, id, 3, false, refToolTurn)
	}
	res := refRun(t, root, Options{Jobs: 1})
	var steps []string
	for _, l := range strings.Split(res.stdout, "\n") {
		if m := regexp.MustCompile(`^\[(\d)/3\] "[^"]*" (START|V3 -> V4)`).FindStringSubmatch(l); m != nil {
			steps = append(steps, m[2]+" "+m[1])
		}
	}
	if got := strings.Join(steps, ", "); got != "START 1, V3 -> V4 1, START 2, V3 -> V4 2, START 3, V3 -> V4 3" {
		t.Fatalf("order: %s\n%s", got, res.stdout)
	}
}

// "drains ten thousand immediate inputs without exceeding the worker
// limit": each input is reported once, with 16 jobs. 2,000 session
// directories here: the spec's inputs are in memory, and making and
// removing 10,000 directories takes 11 s on this project's disk.
func TestReferenceManyImmediateInputs(t *testing.T) {
	n := 2000
	root := t.TempDir()
	for i := range n {
		if err := os.MkdirAll(filepath.Join(root, dshroot.NoCwdDir, fmt.Sprintf("s%05d", i)), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	res := refRun(t, root, Options{Jobs: 16})
	seen := make([]int, n+1)
	for _, l := range strings.Split(res.stdout, "\n") {
		var i int
		if _, err := fmt.Sscanf(l, "[%d/", &i); err == nil && strings.Contains(l, "SKIPPED: no canonical Session generation") {
			seen[i]++
		}
	}
	for i := 1; i <= n; i++ {
		if seen[i] != 1 {
			t.Fatalf("input %d reported %d times", i, seen[i])
		}
	}
	if res.sum.Totals != (Counts{Skipped: n}) {
		t.Fatalf("%+v", res.sum.Totals)
	}
}

// "publishes <compression> successors, preserves sources and current bytes
// on rerun".
func TestReferencePublishAndRerun(t *testing.T) {
	for name, zstd := range compressions {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			old := refSession(t, root, "old", 0, zstd, nil)
			older := refSession(t, root, "tool/session~名", 0, zstd, nil)
			source := refSession(t, root, "tool/session~名", 3, zstd, refToolTurn)
			current := refSession(t, root, "current", 4, zstd, nil)
			if err := os.Mkdir(filepath.Join(root, "_no-cwd", "empty"), 0o700); err != nil {
				t.Fatal(err)
			}
			suffix := map[bool]string{false: "", true: ".zstd"}[zstd]
			first := refRun(t, root, Options{})
			jobs := DefaultJobs()
			for _, l := range []string{fmt.Sprintf("Session jobs: %d\n", jobs), "converted=2, already-V4=1, failed=0, skipped=1",
				"START session.v3.jsonl" + suffix, "V3 -> V4: session.v4.jsonl" + suffix} {
				if !strings.Contains(first.stdout, l) {
					t.Errorf("stdout lacks %q", l)
				}
			}
			// The summary as the spec matches it; checkoutCommit and
			// runtime are the build's (docs/CLI.md's table).
			for k, want := range map[string]any{
				"schemaVersion": 1.0, "targetVersion": 4.0, "sessionRoot": root, "inputCount": 4.0, "jobs": float64(jobs),
				"textLogPath": first.sum.TextLogPath, "summaryPath": first.sum.SummaryPath,
				"totals": counts(2, 1, 0, 1),
				"bySourceVersion": map[string]any{"0": counts(1, 0, 0, 0), "3": counts(1, 0, 0, 0), "4": counts(0, 1, 0, 0),
					"unknown": counts(0, 0, 0, 1)},
				"failureGroups": []any{},
			} {
				if !jsonEqual(first.summary[k], want) {
					t.Errorf("summary %s: %v, want %v", k, first.summary[k], want)
				}
			}
			target := filepath.Join(source.dir, "session.v4.jsonl"+suffix)
			targetBytes, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			decoded := plainOf(t, target)
			if !strings.Contains(decoded, `"role":"tool"`) || !strings.Contains(decoded, `"text":"saved output"`) || strings.Contains(decoded, `"type":"tool-result"`) {
				t.Errorf("successor:\n%s", decoded)
			}
			second := refRun(t, root, Options{})
			if !strings.Contains(second.stdout, "converted=0, already-V4=3, failed=0, skipped=1") ||
				!jsonEqual(second.summary["bySourceVersion"].(map[string]any)["4"], counts(0, 3, 0, 0)) ||
				!jsonEqual(second.summary["failureGroups"], []any{}) {
				t.Errorf("rerun:\n%s", second.stdout)
			}
			if b, _ := os.ReadFile(target); !bytes.Equal(b, targetBytes) {
				t.Error("the rerun changed the successor")
			}
			sameBytes(t, old, older, source, current)
			if !strings.Contains(first.log, strings.TrimSpace(first.stdout)) || !strings.Contains(first.log, "Go: ") {
				t.Errorf("the log does not hold stdout:\n%s", first.log)
			}
			if filepath.Join(filepath.Dir(first.sum.TextLogPath), "summary.json") != first.sum.SummaryPath || !strings.HasSuffix(first.log, first.json) {
				t.Errorf("the log does not end with summary.json")
			}
			for _, p := range []string{first.sum.TextLogPath, first.sum.SummaryPath} {
				if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("%s: %v %v", p, fi.Mode(), err)
				}
			}
		})
	}
}

// "preserves <compression> parent/child history and catalog with serial or
// parallel jobs".
func TestReferenceParentChildCatalog(t *testing.T) {
	for name, zstd := range compressions {
		t.Run(name, func(t *testing.T) {
			var outputs []string
			for _, jobs := range []int{1, 2} {
				root := t.TempDir()
				parent := refSession(t, root, "a-parent", 3, zstd, nil)
				child := refSession(t, root, "z-child", 3, zstd, []string{
					`{"type":"subagent/descriptor","data":{"version":3,"mode":"continuable","provider":"spawn","label":"saved child"}}`,
				}, `origin="subagent"`, `parentSession="a-parent"`, `createdAt=2`, `delegationDepth=1`)
				res := refRun(t, root, Options{Jobs: jobs})
				if !strings.Contains(res.stdout, "converted=2, already-V4=0, failed=0, skipped=0") || !strings.Contains(res.stdout, "completed=2/2") {
					t.Fatalf("jobs %d:\n%s", jobs, res.stdout)
				}
				sameBytes(t, parent, child)
				var current []string
				for _, f := range []refFixture{parent, child} {
					name := "session.v4.jsonl" + map[bool]string{false: "", true: ".zstd"}[zstd]
					current = append(current, plainOf(t, filepath.Join(f.dir, name)))
				}
				lines := strings.Split(strings.TrimSpace(current[0]), "\n")[1:]
				var ev struct {
					Type string
					Data map[string]any
				}
				if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &ev) != nil || ev.Type != "subagent/catalog" ||
					!jsonEqual(ev.Data, map[string]any{"version": 0, "childId": "z-child", "childCreatedAt": 2, "mode": "continuable", "label": "saved child"}) {
					t.Fatalf("jobs %d: parent's successor:\n%s", jobs, current[0])
				}
				outputs = append(outputs, strings.Join(current, "\x00"))
			}
			if outputs[0] != outputs[1] {
				t.Fatal("one job and two give different successors")
			}
		})
	}
}

// "reports a bad Session and still migrates a later good Session".
func TestReferenceBadThenGood(t *testing.T) {
	root := t.TempDir()
	bad := refSession(t, root, "a-bad", 3, false, []string{`{"type":"unrecognized/required","data":{}}`})
	good := refSession(t, root, "z-good", 3, false, refToolTurn)
	res := refRun(t, root, Options{})
	if res.sum.Totals.Failed != 1 || !strings.Contains(res.stdout, "converted=1, already-V4=0, failed=1, skipped=0") {
		t.Fatalf("%s", res.stdout)
	}
	for _, re := range []string{`\[1/2\].*FAILED`, `\[2/2\].*V3 -> V4`} {
		if !regexp.MustCompile(re).MatchString(res.stdout) {
			t.Errorf("stdout lacks %s", re)
		}
	}
	// "Failures (full stacks and causes are in the log):" in the runtime.
	if strings.Contains(res.stdout, "DEFERRED") || strings.Contains(res.stdout, "RETRY") ||
		!strings.Contains(res.stdout, "Failures (full messages are in the log):") || !strings.Contains(res.stdout, bad.path) {
		t.Errorf("stdout:\n%s", res.stdout)
	}
	if !strings.Contains(res.log, "unrecognized/required") {
		t.Error("the log does not name the event type")
	}
	sameBytes(t, bad)
	if _, err := os.Stat(filepath.Join(bad.dir, "session.v4.jsonl")); !os.IsNotExist(err) {
		t.Error("the bad session got a successor")
	}
	if _, err := os.Stat(filepath.Join(good.dir, "session.v4.jsonl")); err != nil {
		t.Error(err)
	}
}

// "groups matching failures by source version while retaining each input
// diagnostic".
func TestReferenceFailureGroups(t *testing.T) {
	root := t.TempDir()
	event := []string{`{"type":"unrecognized/required","data":{}}`}
	first := refSession(t, root, "a-v3", 3, false, event)
	second := refSession(t, root, "b-v3", 3, false, event)
	legacy := refSession(t, root, "c-v0", 0, false, event)
	res := refRun(t, root, Options{})
	if !jsonEqual(res.summary["totals"], counts(0, 0, 3, 0)) || res.summary["inputCount"] != 3.0 ||
		!jsonEqual(res.summary["bySourceVersion"], map[string]any{"0": counts(0, 0, 1, 0), "3": counts(0, 0, 2, 0)}) {
		t.Fatalf("summary:\n%s", res.json)
	}
	g := res.sum.FailureGroups
	if len(g) != 2 || *g[0].SourceVersion != 0 || *g[1].SourceVersion != 3 || g[0].Count != 1 || g[1].Count != 2 {
		t.Fatalf("groups: %+v", g)
	}
	for i, want := range [][]string{{legacy.path}, {first.path, second.path}} {
		if g[i].Reason != "unknown_event" || g[i].EventType != "unrecognized/required" || len(g[i].Items) != len(want) {
			t.Fatalf("group %d: %+v", i, g[i])
		}
		for j, it := range g[i].Items {
			if it.InputPath != want[j] || it.Reason != "unknown_event" || it.ErrorName == "" || it.Message == "" {
				t.Errorf("group %d item %d: %+v", i, j, it)
			}
		}
	}
	// One kind, one name, whatever the version (the runtime's too).
	if g[0].ErrorName != g[1].ErrorName {
		t.Errorf("error names %q and %q", g[0].ErrorName, g[1].ErrorName)
	}
	sameBytes(t, first, second, legacy)
}

// "groups sequence failures without dropping their distinct sequence
// coordinates".
func TestReferenceSequenceGaps(t *testing.T) {
	root := t.TempDir()
	var want []string
	for _, c := range []struct {
		id     string
		actual int
	}{{"a-gap", 2}, {"b-gap", 4}} {
		f := refSession(t, root, c.id, 2, false, []string{
			`{"type":"turn/start","data":{"turn":1}}`,
			`{"type":"step/start","data":{"turn":1,"step":1}}`,
			`{"type":"turn/end","data":{"turn":1,"reason":{"kind":"completed"}}}`,
		})
		b := bytes.Replace(f.bytes, []byte(`"seq":1`), []byte(fmt.Sprintf(`"seq":%d`, c.actual)), 1)
		if err := os.WriteFile(f.path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%s 1 %d", f.path, c.actual))
	}
	res := refRun(t, root, Options{})
	g := res.sum.FailureGroups
	if !jsonEqual(res.summary["bySourceVersion"], map[string]any{"2": counts(0, 0, 2, 0)}) || len(g) != 1 ||
		*g[0].SourceVersion != 2 || g[0].Reason != "sequence_gap" || g[0].Count != 2 {
		t.Fatalf("summary:\n%s", res.json)
	}
	var got []string
	for _, it := range g[0].Items {
		if it.ExpectedSeq == nil || it.ActualSeq == nil {
			t.Fatalf("item without its coordinates: %+v", it)
		}
		got = append(got, fmt.Sprintf("%s %d %d", it.InputPath, *it.ExpectedSeq, *it.ActualSeq))
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("items:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// "reports a source-change deferral and retries after the other input
// completes": the parent's source changes once before its publication.
func TestReferenceDeferralAndRetry(t *testing.T) {
	root := t.TempDir()
	parent := refSession(t, root, "a-parent", 3, false, nil)
	child := refSession(t, root, "b-child", 3, false, []string{
		`{"type":"subagent/descriptor","data":{"version":3,"mode":"continuable","provider":"spawn","label":"fixture child"}}`,
	}, `origin="subagent"`, `parentSession="a-parent"`, `createdAt=2`, `delegationDepth=1`)
	var once sync.Once
	touched := time.Now().Add(time.Hour)
	res := refRun(t, root, Options{Jobs: 2, BeforePublish: func(src string) {
		if src == parent.path {
			once.Do(func() { os.Chtimes(parent.path, touched, touched) })
		}
	}})
	lines := strings.Split(res.stdout, "\n")
	find := func(f func(string) bool) int {
		for i, l := range lines {
			if f(l) {
				return i
			}
		}
		return -1
	}
	deferred := find(func(l string) bool { return strings.Contains(l, "[1/2]") && strings.Contains(l, "DEFERRED") })
	childDone := find(func(l string) bool { return strings.Contains(l, "[2/2]") && strings.Contains(l, "completed=1/2") })
	retry := find(func(l string) bool { return strings.Contains(l, "[1/2]") && strings.Contains(l, "RETRY") })
	// The two jobs run at once: the child may finish before or after the
	// parent's deferral, and the retry comes after both.
	if deferred < 0 || childDone < 0 || retry <= max(deferred, childDone) || strings.Count(res.stdout, "RETRY") != 1 {
		t.Fatalf("deferred at %d, child done at %d, retry at %d:\n%s", deferred, childDone, retry, res.stdout)
	}
	if !strings.Contains(lines[deferred], "its modification time changed (same size)") {
		t.Errorf("the deferral does not say what changed: %s", lines[deferred])
	}
	if res.sum.Totals != (Counts{Converted: 2}) || len(res.sum.FailureGroups) != 0 {
		t.Fatalf("%+v", res.sum.Totals)
	}
	if target := plainOf(t, filepath.Join(parent.dir, "session.v4.jsonl")); !strings.Contains(target, `"type":"subagent/catalog"`) {
		t.Errorf("parent's successor:\n%s", target)
	}
	os.Chtimes(parent.path, touched, touched)
	sameBytes(t, parent, child)
}

// "opens an existing V4 torn tail without repairing its bytes".
func TestReferenceTornV4(t *testing.T) {
	root := t.TempDir()
	current := refSession(t, root, "current", 4, false, nil)
	torn := append(append([]byte(nil), current.bytes...), `{"unfinished"`...)
	if err := os.WriteFile(current.path, torn, 0o600); err != nil {
		t.Fatal(err)
	}
	res := refRun(t, root, Options{})
	if res.sum.Totals.Failed != 0 || !strings.Contains(res.stdout, "already V4 (opened successfully)") {
		t.Fatalf("%s", res.stdout)
	}
	if b, _ := os.ReadFile(current.path); !bytes.Equal(b, torn) {
		t.Error("the torn tail was changed")
	}
}

// "reports unsupported root-level logs and does not traverse directory
// links", without a layout flag.
func TestReferenceFlatFileAndLink(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	original := refSession(t, outside, "outside", 3, false, nil)
	if err := os.WriteFile(filepath.Join(root, "legacy.jsonl"), original.bytes, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "linked-project")); err != nil {
		t.Fatal(err)
	}
	res := refRun(t, root, Options{})
	if res.sum.Totals != (Counts{Failed: 2}) || !strings.Contains(res.stdout, "unsupported flat-file layout") ||
		!strings.Contains(res.stdout, "project symbolic links are not traversed") {
		t.Fatalf("%+v\n%s", res.sum.Totals, res.stdout)
	}
	if _, err := os.Stat(filepath.Join(original.dir, "session.v4.jsonl")); !os.IsNotExist(err) {
		t.Error("converted a session through the link")
	}
}

// "logs a missing root failure": one failure of unknown version, naming
// the root (its sourceVersion null where the runtime writes "unknown":
// docs/CLI.md's table).
func TestReferenceMissingRoot(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	r, _ := dshroot.Open(missing)
	var out bytes.Buffer
	sum, err := RunSessions(context.Background(), r, Options{ReportDir: t.TempDir(), OnEvent: lines(&out)})
	if err != nil {
		t.Fatal(err)
	}
	g := sum.FailureGroups
	if !strings.Contains(out.String(), "converted=0, already-V4=0, failed=1, skipped=0") || sum.InputCount != 0 ||
		sum.BySourceVersion["unknown"] != (Counts{Failed: 1}) || len(g) != 1 || g[0].SourceVersion != nil || g[0].Count != 1 ||
		g[0].Items[0].InputPath != missing || g[0].Reason != "other" {
		t.Fatalf("%+v\n%s", g, out.String())
	}
}

// A successor's envelope: convkit writes every line in its writer's order
// (type, seq, time, data, then the optional members), whatever the
// source row's order (the spec writes type, data, seq, time), and copies
// the data of events no rule changes byte for byte (docs/UPGRADE.md).
func TestReferenceEnvelopeOrder(t *testing.T) {
	root := t.TempDir()
	source := refSession(t, root, "s", 3, false, refToolTurn)
	refRun(t, root, Options{})
	got := strings.Split(strings.TrimSpace(plainOf(t, filepath.Join(source.dir, "session.v4.jsonl"))), "\n")[1:]
	if len(got) != len(refToolTurn) {
		t.Fatalf("%d events", len(got))
	}
	for seq, line := range got {
		var src, dst map[string]json.RawMessage
		json.Unmarshal([]byte(refToolTurn[seq]), &src)
		if err := json.Unmarshal([]byte(line), &dst); err != nil {
			t.Fatal(err)
		}
		prefix := fmt.Sprintf(`{"type":%s,"seq":%d,"time":%d,"data":`, src["type"], seq, seq+2)
		if !strings.HasPrefix(line, prefix) {
			t.Errorf("line %d: %s\nwant it to begin %s", seq+2, line, prefix)
		}
		if string(src["type"]) != `"tool/result"` && !bytes.Equal(src["data"], dst["data"]) {
			t.Errorf("line %d: data %s, source %s", seq+2, dst["data"], src["data"])
		}
		if op := src["surfaceOp"]; op != nil && !strings.HasSuffix(line, `,"surfaceOp":`+string(op)+"}") {
			t.Errorf("line %d: %s", seq+2, line)
		}
	}
}
