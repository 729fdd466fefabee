package migrate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// hashTree maps every file under dir (relative path) to its SHA-256.
func hashTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.Type()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			out[rel] = "link to " + target
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	return out
}

func generate(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := fixtures.Generate(dir, fixtures.Options{Seed: 5, Conversations: 20}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// lines writes each event's line to out, as convkit migrate prints them.
func lines(out *bytes.Buffer) func(Event) {
	return func(ev Event) { out.WriteString(ev.Line() + "\n") }
}

// openRoot opens the store whose conversations directory is root as the
// migrate command does: exclusively, or read-only for a dry run.
func openRoot(root string, dryRun bool) (*store.Store, error) {
	mode := store.LockExclusive
	if dryRun {
		mode = store.LockNone
	}
	return store.Open(context.Background(), filepath.Dir(root), store.OpenOptions{Lock: store.LockOptions{Mode: mode, Command: "convkit migrate"}})
}

// run migrates the sessions root root, the conversations directory of a
// store.
func run(t *testing.T, root string, opts Options) (*Summary, string) {
	t.Helper()
	var out bytes.Buffer
	opts.OnEvent = lines(&out)
	if opts.ReportDir == "" {
		opts.ReportDir = t.TempDir()
	}
	s, err := openRoot(root, opts.DryRun)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	sum, err := Run(context.Background(), s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return sum, out.String()
}

func TestMigrateStore(t *testing.T) {
	dir := generate(t)
	root := store.ConversationsDir(dir)
	before := hashTree(t, root)
	sum, out := run(t, root, Options{Jobs: 2})
	if sum.Totals.Converted == 0 || sum.Totals.Failed != 1 {
		t.Fatalf("totals = %+v\n%s", sum.Totals, out)
	}
	// The one failure is the corrupt v4 log, grouped with its reason.
	if len(sum.FailureGroups) != 1 || sum.FailureGroups[0].Reason != "corrupt_log" || sum.FailureGroups[0].SourceVersion == nil || *sum.FailureGroups[0].SourceVersion != 4 {
		t.Fatalf("failure groups = %+v", sum.FailureGroups)
	}
	// The fixtures' interrupted delete: its logs are skipped, found by the
	// tombstone in its conversation log.
	if sum.Totals.Skipped == 0 || !strings.Contains(out, "SKIPPED: the conversation is being deleted (a tombstone is recorded)") {
		t.Fatalf("the conversation being deleted was not skipped: totals = %+v\n%s", sum.Totals, out)
	}
	if !strings.Contains(out, "Summary: converted=") || !strings.Contains(out, "\nFull log: "+sum.TextLogPath+"\nJSON summary: "+sum.SummaryPath+"\n") {
		t.Fatalf("output lacks the summary lines:\n%s", out)
	}
	after := hashTree(t, root)
	for p, h := range before {
		if after[p] != h {
			t.Errorf("original %s changed", p)
		}
	}
	var successors []string
	for p := range after {
		if _, ok := before[p]; !ok {
			successors = append(successors, p)
			if !strings.Contains(p, ".v4.jsonl") {
				t.Errorf("unexpected new file %s", p)
			}
			fi, _ := os.Stat(filepath.Join(root, p))
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s mode %v", p, fi.Mode().Perm())
			}
		}
	}
	if len(successors) != sum.Totals.Converted {
		t.Fatalf("%d new files for %d conversions", len(successors), sum.Totals.Converted)
	}
	// Every successor reads as a strict v4 log.
	for _, p := range successors {
		r, err := convlog.Open(filepath.Join(root, p), convlog.ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range r.Events() {
			if err != nil {
				t.Errorf("%s: %v", p, err)
			}
		}
		if r.Header().Version != 4 || r.Stats().TornTail {
			t.Errorf("%s: version %d torn %v", p, r.Header().Version, r.Stats().TornTail)
		}
		r.Close()
	}
	// The report folder is private.
	for _, p := range []string{filepath.Dir(sum.TextLogPath), sum.TextLogPath, sum.SummaryPath} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
	var fromFile Summary
	b, _ := os.ReadFile(sum.SummaryPath)
	if err := json.Unmarshal(b, &fromFile); err != nil || fromFile.Totals != sum.Totals || fromFile.TargetVersion != 4 {
		t.Fatalf("summary.json = %s (%v)", b, err)
	}

	// A second run converts nothing and changes no byte.
	sum2, out2 := run(t, root, Options{Jobs: 2})
	if sum2.Totals.Converted != 0 || sum2.Totals.AlreadyV4 != sum.Totals.AlreadyV4+sum.Totals.Converted {
		t.Fatalf("second run totals = %+v\n%s", sum2.Totals, out2)
	}
	again := hashTree(t, root)
	if len(again) != len(after) {
		t.Fatalf("second run changed the file set")
	}
	for p, h := range after {
		if again[p] != h {
			t.Errorf("second run changed %s", p)
		}
	}
}

func TestJobsGiveIdenticalSuccessors(t *testing.T) {
	a, b := generate(t), generate(t)
	run(t, store.ConversationsDir(a), Options{Jobs: 1})
	run(t, store.ConversationsDir(b), Options{Jobs: 4})
	ha, hb := hashTree(t, store.ConversationsDir(a)), hashTree(t, store.ConversationsDir(b))
	if len(ha) != len(hb) {
		t.Fatalf("%d files vs %d", len(ha), len(hb))
	}
	for p, h := range ha {
		if strings.Contains(p, ".v4.") && hb[p] != h {
			t.Errorf("%s differs between 1 and 4 jobs", p)
		}
	}
}

func TestChangedSourceIsDeferredThenRetried(t *testing.T) {
	dir := generate(t)
	root := store.ConversationsDir(dir)
	var mu sync.Mutex
	touched := map[string]int{}
	var target string
	hook := func(src string) {
		mu.Lock()
		defer mu.Unlock()
		if target == "" && strings.HasSuffix(src, ".v3.jsonl") {
			target = src
		}
		if src == target {
			touched[src]++
			if touched[src] == 1 {
				// A concurrent writer appends to the source mid-run.
				f, _ := os.OpenFile(src, os.O_APPEND|os.O_WRONLY, 0)
				f.Write([]byte(""))
				f.Close()
				now := fixtures.DefaultNow
				os.Chtimes(src, now, now)
			}
		}
	}
	sum, out := run(t, root, Options{Jobs: 1, BeforePublish: hook})
	if target == "" {
		t.Skip("no plain v3 log in the generated store")
	}
	if !strings.Contains(out, "DEFERRED: historical session generation changed during migration") ||
		!strings.Contains(out, "RETRY "+filepath.Base(target)) {
		t.Fatalf("no deferral and retry in:\n%s", out)
	}
	if touched[target] != 2 {
		t.Fatalf("hook ran %d times for the changed log", touched[target])
	}
	// The retry converted it; the only failure is the corrupt log.
	if sum.Totals.Failed != 1 {
		t.Fatalf("totals = %+v", sum.Totals)
	}
	// DEFERRED comes before every RETRY, which come after the last job.
	if strings.Index(out, "RETRY") < strings.LastIndex(out, "START") {
		t.Errorf("retry ran before the first pass drained:\n%s", out)
	}
}

func TestLayoutProblemsAndSkips(t *testing.T) {
	root := filepath.Join(t.TempDir(), "conversations")
	os.MkdirAll(filepath.Join(root, "empty"), 0o700)
	os.WriteFile(filepath.Join(root, "flat.v3.jsonl"), []byte("{}\n"), 0o600)
	os.Symlink("/etc", filepath.Join(root, "linked"))
	os.WriteFile(filepath.Join(root, "README.txt"), []byte("notes"), 0o600)
	sum, out := run(t, root, Options{})
	if sum.Totals.Failed != 2 || sum.Totals.Skipped != 1 {
		t.Fatalf("totals = %+v\n%s", sum.Totals, out)
	}
	for _, want := range []string{"SKIPPED: no log in this conversation directory", "symbolic links are not traversed", "unsupported flat-file layout"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if sum.BySourceVersion["unknown"].Failed != 2 {
		t.Errorf("by version = %+v", sum.BySourceVersion)
	}
}

func TestRefusals(t *testing.T) {
	s, err := store.Open(context.Background(), t.TempDir(), store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive},
		Create: store.CreateAlways})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Run(context.Background(), s, Options{WriterVersion: 3, ReportDir: t.TempDir()}); !errors.Is(err, errWriterVersion) ||
		err.Error() != "this command requires a V4 session writer" {
		t.Fatalf("writer v3: err = %v", err)
	}
	// A missing root (a store without conversations yet) is one failed
	// input, not a crash.
	var buf bytes.Buffer
	sum, err := Run(context.Background(), s, Options{OnEvent: lines(&buf), ReportDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if sum.Totals.Failed != 1 || sum.InputCount != 0 || !strings.Contains(out, "Summary: converted=0, already-V4=0, failed=1, skipped=0") {
		t.Fatalf("missing root: %+v\n%s", sum.Totals, out)
	}
}

func TestDryRunWritesNoLog(t *testing.T) {
	dir := generate(t)
	root := store.ConversationsDir(dir)
	before := hashTree(t, root)
	sum, out := run(t, root, Options{DryRun: true})
	if sum.Totals.Planned == 0 || sum.Totals.Converted != 0 || sum.PlannedBytes <= 0 {
		t.Fatalf("dry run totals = %+v, %d bytes\n%s", sum.Totals, sum.PlannedBytes, out)
	}
	after := hashTree(t, root)
	var keys []string
	for k := range after {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(after) != len(before) {
		t.Fatalf("dry run wrote files: %v", keys)
	}
	if !strings.Contains(out, "would write") || !strings.Contains(out, "Plan: ") {
		t.Errorf("dry run output:\n%s", out)
	}
}

// parentWithChildren finds, in the store under root, a session log older
// than v4 whose direct subagent children are older than v4 too: the
// parent's conversion reads them.
func parentWithChildren(t *testing.T, root string) (parent string, children []string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(root, "*", "*.jsonl*"))
	headers := map[string]*convlog.Header{}
	for _, p := range logs {
		r, err := convlog.Open(p, convlog.ReaderOptions{})
		if err != nil {
			continue
		}
		headers[p] = r.Header()
		r.Close()
	}
	for p, h := range headers {
		if h.Type != convlog.SessionLog || h.Version >= convlog.CurrentVersion {
			continue
		}
		var kids []string
		for q, k := range headers {
			if filepath.Dir(q) == filepath.Dir(p) && k.Type == convlog.SessionLog && k.Origin == "subagent" &&
				k.ParentSession == h.ID && k.Version < convlog.CurrentVersion {
				kids = append(kids, q)
			}
		}
		if len(kids) > 0 {
			sort.Strings(kids)
			return p, kids
		}
	}
	t.Skip("no older parent log with older children in the generated store")
	return "", nil
}

// TestOwnPublicationsAreNotChanges: with two jobs, the successors of a
// parent's subagents are published by the other job while the parent is
// converted. That is this run's own work, not a change of the children:
// the parent is converted in the first pass, not deferred. A child
// successor that changes after its publication still defers the parent.
func TestOwnPublicationsAreNotChanges(t *testing.T) {
	for _, changed := range []bool{false, true} {
		dir := generate(t)
		root := store.ConversationsDir(dir)
		parent, children := parentWithChildren(t, root)
		successor := func(p string) string {
			n, _ := convlog.ParseName(filepath.Base(p))
			return filepath.Join(filepath.Dir(p), convlog.FileName(n.Base, convlog.CurrentVersion, n.Compression))
		}
		var once sync.Once
		hook := func(src string) {
			if src != parent {
				return
			}
			once.Do(func() {
				// Hold the parent between its two looks at the children
				// until the other job has published their successors.
				for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
					all := true
					for _, c := range children {
						if _, err := os.Stat(successor(c)); err != nil {
							all = false
						}
					}
					if all {
						break
					}
				}
				if changed {
					later := time.Now().Add(time.Hour)
					os.Chtimes(successor(children[0]), later, later)
				}
			})
		}
		_, out := run(t, root, Options{Jobs: 2, BeforePublish: hook})
		rel, _ := filepath.Rel(root, parent)
		deferred := strings.Contains(out, fmt.Sprintf("%q DEFERRED: ", rel))
		for _, c := range children {
			if _, err := os.Stat(successor(c)); err != nil {
				t.Fatalf("child %s was not converted: %v\n%s", c, err, out)
			}
		}
		switch {
		case !changed && deferred:
			t.Fatalf("the parent was deferred for its children's successors, published by this run:\n%s", out)
		case changed && !deferred:
			t.Fatalf("a child's successor changed after its publication, and the parent was not deferred:\n%s", out)
		}
		if _, err := os.Stat(successor(parent)); err != nil {
			t.Fatalf("the parent was not converted (changed=%v): %v\n%s", changed, err, out)
		}
	}
}

// TestMigrateKeepsIndexCurrent: successors change the conversations'
// fingerprints; after a migration the store's index agrees with its logs
// without a reindex of the user's.
func TestMigrateKeepsIndexCurrent(t *testing.T) {
	dir := generate(t)
	s, err := store.Open(context.Background(), dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reindex.Run(context.Background(), s, reindex.Options{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if sum, out := run(t, store.ConversationsDir(dir), Options{Jobs: 2}); sum.Totals.Converted == 0 {
		t.Fatalf("nothing converted: %+v\n%s", sum.Totals, out)
	}
	s, err = store.Open(context.Background(), dir, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := reindex.Check(context.Background(), s, reindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Differences) != 0 || res.IndexProblem != "" {
		t.Fatalf("the index after the migration: problem %q, differences %+v", res.IndexProblem, res.Differences)
	}
}
