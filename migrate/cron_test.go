package migrate

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// --exclude: the inputs matching a pattern, or in a directory matching
// one, are skipped with the reason "excluded" and not worked on; the rest
// run as before, so a root of known-bad entries exits clean.
func TestExclude(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	session(t, root, 3, "good", "", "")
	bad := session(t, root, 3, "a-bad", "", "", `{"type":"unrecognized/required","seq":%d,"time":%d,"data":{}}`)
	session(t, root, 3, "old", "/old", "", `{"type":"unrecognized/required","seq":%d,"time":%d,"data":{}}`)
	put(t, root, "legacy.jsonl", hdr(0, "legacy", "", ""))
	os.Symlink(outside, filepath.Join(root, "linked-project"))

	sum, out := runSessions(t, root, Options{})
	if sum.Totals != (Counts{Converted: 1, Failed: 4}) {
		t.Fatalf("without --exclude: %+v\n%s", sum.Totals, out)
	}
	for _, p := range []string{"_no-cwd/good/session.v4.jsonl", "_no-cwd/good/session.lock", "_no-cwd/a-bad/session.lock", "--old--/old/session.lock"} {
		os.Remove(filepath.Join(root, p))
	}
	sum, out = runSessions(t, root, Options{Exclude: []string{"legacy.jsonl", "linked-project", "_no-cwd/*-bad", "--old--"}})
	if sum.Totals != (Counts{Converted: 1, Skipped: 4}) || len(sum.FailureGroups) != 0 {
		t.Fatalf("%+v\n%s", sum.Totals, out)
	}
	for _, rel := range []string{"legacy.jsonl", "linked-project", "_no-cwd/a-bad", "--old--/old"} {
		if !strings.Contains(out, `"`+rel+`" SKIPPED: excluded; completed=`) {
			t.Errorf("%s not skipped as excluded:\n%s", rel, out)
		}
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(bad), "session.lock")); !os.IsNotExist(err) {
		t.Error("an excluded session was locked")
	}
	js, _ := os.ReadFile(sum.SummaryPath)
	if !strings.Contains(string(js), `"exclude": [`) {
		t.Errorf("summary.json:\n%s", js)
	}
	if err := CheckExclude([]string{"ok/*", "[a-"}); err == nil || !strings.Contains(err.Error(), `--exclude "[a-": syntax error in pattern`) {
		t.Errorf("a malformed pattern: %v", err)
	}
	for rel, want := range map[string]bool{"a/b/c": true, "a/x": false, "ab": false, "x/b": false} {
		if got := excluded([]string{"a/b", "x/?/c"}, rel); got != want {
			t.Errorf("excluded(%s) = %v", rel, got)
		}
	}
}

// --report-dir: the report folder is made there (the directory too, when
// missing); report folders of earlier runs there older than reportMaxAge
// are removed, and nothing else.
func TestReportDir(t *testing.T) {
	root := t.TempDir()
	session(t, root, 4, "s", "", "")
	dir := filepath.Join(t.TempDir(), "reports", "migrate")
	sum, _ := runSessions(t, root, Options{ReportDir: dir})
	if filepath.Dir(filepath.Dir(sum.TextLogPath)) != dir || !strings.HasPrefix(filepath.Base(filepath.Dir(sum.TextLogPath)), reportPrefix) {
		t.Fatalf("report at %s, want it in %s", sum.TextLogPath, dir)
	}
	first := filepath.Dir(sum.TextLogPath)
	old := time.Now().Add(-reportMaxAge - time.Hour)
	age := func(p string) {
		filepath.Walk(p, func(q string, _ os.FileInfo, _ error) error { return os.Chtimes(q, old, old) })
		os.Chtimes(p, old, old)
	}
	age(first)
	// Old folders that are not a run's own, as it left them, stay.
	extra := filepath.Join(dir, reportPrefix+"extra")
	put(t, extra, "migration.log", "x")
	put(t, extra, "notes.txt", "x")
	os.Chmod(extra, 0o700)
	age(extra)
	open := filepath.Join(dir, reportPrefix+"open")
	put(t, open, "migration.log", "x")
	os.Chmod(open, 0o755)
	age(open)
	link := filepath.Join(dir, reportPrefix+"link")
	os.Symlink(first, link)
	young := filepath.Join(dir, reportPrefix+"young")
	put(t, young, "migration.log", "x")
	os.Chmod(young, 0o700)
	other := filepath.Join(dir, "other-old")
	put(t, other, "migration.log", "x")
	age(other)

	sum, out := runSessions(t, root, Options{ReportDir: dir})
	if !strings.Contains(out, "\nRemoved 1 report folder(s) older than 7 days from \""+dir+"\"\n") {
		t.Fatalf("output:\n%s", out)
	}
	if _, err := os.Lstat(first); !os.IsNotExist(err) {
		t.Errorf("the old report folder stays: %v", err)
	}
	for _, p := range []string{extra, open, link, young, other, filepath.Dir(sum.TextLogPath)} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
}
