package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/store"
)

// TestIDPrefixes: every command that takes conversation ids takes an
// unambiguous prefix of at least four characters; an ambiguous one is a
// usage error (exit 2) listing the candidates, and changes nothing.
func TestIDPrefixes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	rep, err := fixtures.Generate(dir, fixtures.Options{Seed: 3, Conversations: fixtures.SpecialCases})
	if err != nil {
		t.Fatal(err)
	}
	id := rep.Find(fixtures.CaseBasic).ID
	other := rep.Find(fixtures.CaseCompaction).ID
	prefix := id[:8]
	var session string
	for _, l := range rep.Find(fixtures.CaseCompaction).Logs {
		if l.SessionID != "" {
			session = l.SessionID
		}
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append([]string{"convkit", "--data-dir", dir}, args...), strings.NewReader(""), &out, &errb,
			func(string) string { return "" })
		return code, out.String(), errb.String()
	}
	for _, tc := range []struct {
		args []string
		want string // on stdout
	}{
		{[]string{"rename", prefix, "By prefix"}, "renamed " + id + `: "By prefix"`},
		{[]string{"archive", prefix, other[:4]}, "archived " + id + "\narchived " + other + "\n"},
		{[]string{"unarchive", other[:6], prefix}, "unarchived " + other + "\nunarchived " + id + "\n"},
		{[]string{"inspect", "--stats", prefix}, `conversation log "` + id + `"`},
		{[]string{"inspect", "--stats", other[:8], session[:8]}, `session log "` + session + `"`},
		{[]string{"export", prefix, "--to", filepath.Join(t.TempDir(), "one.tar.zst")}, "EXPORTED " + id},
	} {
		code, stdout, stderr := run(tc.args...)
		if code != 0 || !strings.Contains(stdout, tc.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", tc.args, code, stdout, stderr, tc.want)
		}
	}

	// A second conversation directory whose id starts the same.
	twin := prefix + "-twin"
	p, err := reader(t, dir).ConversationPath(twin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(p, 0o700); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, dir)
	for _, args := range [][]string{
		{"rename", prefix, "Ambiguous"}, {"archive", other, prefix}, {"unarchive", prefix}, {"delete", prefix},
		{"inspect", prefix}, {"export", prefix, "--to", filepath.Join(t.TempDir(), "two.tar.zst")},
	} {
		code, stdout, stderr := run(args...)
		want := `convkit: error: conversation id "` + prefix + `" names more than one conversation: "` + id + `", "` + twin + `"` + "\n"
		if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "hint: give more of the id") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2 and\n%s", args, code, stdout, stderr, want)
		}
	}
	if after := snapshot(t, dir); after != before {
		t.Errorf("an ambiguous prefix changed the store:\n%s\n---\n%s", before, after)
	}
	// Longer, it is unambiguous again; the whole id of the twin names it.
	if code, stdout, _ := run("delete", "--force", twin); code != 0 || stdout != "deleted "+twin+"\n" {
		t.Errorf("delete of the twin by its whole id: exit %d, %q", code, stdout)
	}
	// Shorter than four characters: no prefix.
	if code, _, stderr := run("rename", id[:3], "x"); code != 1 || !strings.Contains(stderr, "no such conversation") {
		t.Errorf("a three-character prefix: exit %d, %q", code, stderr)
	}
}

// snapshot lists every file under dir but runtime.lock (whose holder
// record a writing command rewrites) with its size and modification time.
func snapshot(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.IsDir() && fi.Name() != store.LockFileName {
			fmt.Fprintf(&b, "%s %d %s\n", p, fi.Size(), fi.ModTime())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestRestorePrefixAmbiguous: restore --conversation resolves its prefix
// among the archive's conversations; one two of them start with is a
// usage error naming both, as for every other command, and the target is
// not made.
func TestRestorePrefixAmbiguous(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s, err := store.Open(context.Background(), dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "test"},
		Create: store.CreateAlways})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"abcd-1111", "abcd-2222"} {
		se, err := s.NewConversation(store.NewConversation{ID: id, Cwd: "/", SessionID: "root", Agent: "coder", Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		m, err := convlog.NewUserMessage("u-"+id, convlog.TextBlock("hello"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := se.BeginTurn(m); err != nil {
			t.Fatal(err)
		}
		if err := se.EndTurn(store.OutcomeCompleted, nil); err != nil {
			t.Fatal(err)
		}
		if err := se.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append([]string{"convkit", "--data-dir", dir}, args...), strings.NewReader(""), &out, &errb,
			func(string) string { return "" })
		return code, out.String(), errb.String()
	}
	backups := t.TempDir()
	if code, _, stderr := run("-q", "backup", "--to", backups); code != 0 {
		t.Fatalf("backup: exit %d: %s", code, stderr)
	}
	archives, _ := filepath.Glob(filepath.Join(backups, "*.tar.zst"))
	if len(archives) != 1 {
		t.Fatalf("archives %q", archives)
	}
	archive := archives[0]
	target := filepath.Join(t.TempDir(), "r")
	code, stdout, stderr := run("restore", archive, "--to", target, "--conversation", "abcd")
	want := `convkit: error: conversation id "abcd" names more than one conversation: "abcd-1111", "abcd-2222"`
	if code != exitUsage || stdout != "" || !strings.HasPrefix(stderr, want) || !strings.Contains(stderr, "hint: give more of the id") {
		t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and\n%s", code, stdout, stderr, want)
	}
	if _, err := os.Lstat(target); err == nil {
		t.Error("an ambiguous prefix made the target")
	}
	if code, stdout, stderr := run("restore", archive, "--to", target, "--conversation", "abcd-2"); code != 0 || !strings.Contains(stdout, "(1 conversations)") {
		t.Errorf("a longer prefix: exit %d, %q, %q", code, stdout, stderr)
	}
}
