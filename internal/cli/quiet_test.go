package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/store"
)

// runIn runs convkit with --data-dir dir in-process, TMPDIR as the test's.
func runIn(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), append([]string{"convkit", "--data-dir", dir}, args...), strings.NewReader(""), &out, &errb,
		func(string) string { return "" })
	return code, out.String(), errb.String()
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// TestQuiet: with -q every command prints only its problems and its final
// summary; without it, the lines of what went well too. Two stores from
// one seed get the same jobs, one quiet. A conversation that will not open
// here (none does: their working directories are not on this machine) is
// a line without -q and the summary's count with it.
func TestQuiet(t *testing.T) {
	root := t.TempDir()
	t.Setenv("TMPDIR", t.TempDir())
	stores := [2]string{filepath.Join(root, "loud"), filepath.Join(root, "quiet")}
	var rep *fixtures.Report
	for _, d := range stores {
		r, err := fixtures.Generate(d, fixtures.Options{Seed: 7, Conversations: 30})
		if err != nil {
			t.Fatal(err)
		}
		rep = r
	}
	basic := rep.Find(fixtures.CaseBasic).ID
	plain := rep.Find(fixtures.CaseRewind)
	if plain == nil {
		t.Fatal("no plain fork in the store")
	}
	problem := regexp.MustCompile(`^(\[\d+/\d+\] ".*" (FAILED|SKIPPED)|ERROR |SKIPPED |IGNORED |INVALID |UNREADABLE |WARNING |CONFLICT |SKIP |REPLACE |MOVED ASIDE |Index: metadata.db does not exist|Index: metadata.db was not)`)
	summary := regexp.MustCompile(`^(Summary: |Failures |- "|Full log: |JSON summary: |Plan: |Archive: |Restored: |Moved aside: |Dry run: |Verify: |Check: |convkit: (error|hint|warning): )`)

	jobs := []struct {
		name string
		args []string
		code int
		// loud: a line the run without -q prints and the quiet one does not.
		loud string
	}{
		{"migrate", []string{"migrate", "--jobs", "2"}, 1, "V3 -> V4: "},
		{"reindex", []string{"reindex"}, 3, "DELETED "},
		{"backup", []string{"backup", "--to", "BK"}, 0, ""},
		{"backup --keep", []string{"backup", "--to", "BK", "--keep", "1"}, 0, "DELETED "},
		{"backup verify", []string{"backup", "verify", "BK/latest"}, 3, ""},
		{"restore", []string{"restore", "BK/latest", "--to", "RESTORED"}, 3, "WILL NOT OPEN "},
		{"export", []string{"export", basic, "--to", "ONE"}, 0, "EXPORTED "},
		{"import", []string{"--data-dir", "OTHER", "import", "ONE"}, 3, "IMPORT "},
		{"reindex --check", []string{"reindex", "--check"}, 3, ""},
		{"repair", []string{"repair"}, 0, "CLOSED "},
		{"delete", []string{"delete", plain.ID}, 0, "deleted "},
	}
	for _, job := range jobs {
		var outs [2][]string
		for i, dir := range stores {
			args := make([]string, len(job.args))
			for j, a := range job.args {
				a = strings.ReplaceAll(a, "BK", filepath.Join(dir+"-backups"))
				a = strings.ReplaceAll(a, "ONE", filepath.Join(dir+"-one.tar.zst"))
				a = strings.ReplaceAll(a, "OTHER", filepath.Join(dir+"-other"))
				a = strings.ReplaceAll(a, "RESTORED", filepath.Join(dir+"-restored"))
				args[j] = a
			}
			if i == 1 {
				args = append([]string{"-q"}, args...)
			}
			code, stdout, stderr := runIn(t, dir, args...)
			if code != job.code {
				t.Fatalf("%s %q: exit %d, want %d\n%s%s", job.name, args, code, job.code, stdout, stderr)
			}
			outs[i] = append(lines(stdout), lines(stderr)...)
		}
		loud, quiet := outs[0], outs[1]
		for _, l := range quiet {
			if !problem.MatchString(l) && !summary.MatchString(l) {
				t.Errorf("%s -q printed %q, which is neither a problem nor the summary", job.name, l)
			}
		}
		// Quiet keeps every problem and summary line of the loud run.
		var want []string
		summarized := false
		for _, l := range loud {
			summarized = summarized || strings.HasPrefix(l, "Summary: ") || strings.HasPrefix(l, "Plan: ")
			if strings.HasPrefix(l, "Full log: ") && !summarized {
				continue // migrate's preamble names its log too
			}
			if problem.MatchString(l) || summary.MatchString(l) {
				want = append(want, l)
			}
		}
		if len(want) != len(quiet) {
			t.Errorf("%s: -q printed %d lines, the run without it %d problem and summary lines:\n%s\n---\n%s",
				job.name, len(quiet), len(want), strings.Join(quiet, "\n"), strings.Join(want, "\n"))
		}
		if job.loud != "" {
			found := false
			for _, l := range loud {
				found = found || strings.Contains(l, job.loud)
			}
			if !found {
				t.Errorf("%s: the run without -q printed no %q line:\n%s", job.name, job.loud, strings.Join(loud, "\n"))
			}
		}
		for _, l := range quiet {
			if strings.HasPrefix(l, "WILL NOT OPEN ") {
				t.Errorf("%s -q printed %q: the summary counts them", job.name, l)
			}
		}
		if job.name == "migrate" && len(quiet) > 12 {
			t.Errorf("migrate -q printed %d lines for %d conversations:\n%s", len(quiet), len(rep.Conversations), strings.Join(quiet, "\n"))
		}
	}

	// --json is the same with and without -q.
	for _, args := range [][]string{{"list", "--all"}, {"reindex", "--check"}, {"inspect", "--stats", basic}} {
		_, a, _ := runIn(t, stores[0], append([]string{"--json"}, args...)...)
		_, b, _ := runIn(t, stores[0], append([]string{"--json", "-q"}, args...)...)
		if a != b || a == "" {
			t.Errorf("--json %q differs with -q:\n%s\n%s", args, a, b)
		}
	}
}

// columns counts terminal columns by hand for the scripts of
// TestListAlignsWideTitles: CJK and full-width forms take two, combining
// marks none, the rest one.
func columns(s string) int {
	n := 0
	for _, r := range s {
		switch {
		case r >= 0x0300 && r <= 0x036f:
		case r >= 0x3000 && r <= 0x9fff, r >= 0xff01 && r <= 0xff60:
			n += 2
		default:
			n++
		}
	}
	return n
}

// TestListAlignsWideTitles: list's columns line up on a terminal when a
// title is in a wide script: every row's UPDATED column starts at the same
// display column.
func TestListAlignsWideTitles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	rep, err := fixtures.Generate(dir, fixtures.Options{Seed: 4, Conversations: fixtures.SpecialCases})
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(context.Background(), dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	for i, title := range []string{"修复登录页面的重定向问题并补充测试", "ログインのリダイレクトを直す", "Ｆｕｌｌ－ｗｉｄｔｈ ｔｉｔｌｅ", "café crème, e\u0301"} {
		if err := s.Rename(rep.Conversations[i].ID, title); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	code, stdout, stderr := runIn(t, dir, "list", "--all")
	if code != 0 {
		t.Fatalf("list: exit %d, %s", code, stderr)
	}
	col := -1
	date := regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d`)
	for _, l := range lines(stdout) {
		i := date.FindStringIndex(l)
		if strings.HasPrefix(l, "ID ") {
			i = []int{strings.Index(l, "UPDATED")}
		}
		if i == nil {
			t.Fatalf("no time in %q", l)
		}
		c := columns(l[:i[0]])
		if col >= 0 && c != col {
			t.Errorf("UPDATED starts at column %d in %q, at %d above:\n%s", c, l, col, stdout)
		}
		col = c
	}
	if !strings.Contains(stdout, "修复登录页面的重定向问题并补充测试") {
		t.Errorf("the wide title is not listed:\n%s", stdout)
	}
}

// TestQuietEmptySessionsRoot: an empty sessions root is said to be empty,
// -q or not: it is never a silent success.
func TestQuietEmptySessionsRoot(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	root := t.TempDir()
	for _, q := range [][]string{nil, {"-q"}} {
		var out, errb bytes.Buffer
		args := append(append([]string{"convkit"}, q...), "migrate", "--sessions-dir", root)
		code := Main(context.Background(), args, strings.NewReader(""), &out, &errb, func(string) string { return "" })
		if code != 0 || !strings.Contains(out.String(), "The sessions root is empty: there is nothing to migrate.\nSummary: converted=0, already-V4=0, failed=0, skipped=0\n") {
			t.Fatalf("%v: exit %d\n%s%s", q, code, out.String(), errb.String())
		}
		if quiet := len(q) > 0; quiet == strings.Contains(out.String(), "Layout: dsh") {
			t.Errorf("%v: the preamble is printed %v:\n%s", q, !quiet, out.String())
		}
	}
}
