package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/convkit/convkit/fixtures"
)

// TestValidateRefusesATurnRecordedTwice: a conversation log recording the
// end of a turn that has ended again, each line well formed, is invalid to
// inspect --validate, at its line, with the message export (the store's
// replay) refuses it with.
func TestValidateRefusesATurnRecordedTwice(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	rep, err := fixtures.Generate(dir, fixtures.Options{Seed: 3, Conversations: fixtures.SpecialCases})
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Find(fixtures.CaseBasic)
	var path string
	for _, l := range c.Logs {
		if l.SessionID == "" && !l.Compressed {
			path = l.Path
		}
	}
	if path == "" {
		t.Fatalf("no plain conversation log in %+v", c.Logs)
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append([]string{"convkit", "--data-dir", dir}, args...), nil, &out, &errb,
			func(string) string { return "" })
		return code, out.String(), errb.String()
	}
	if code, out, errb := run("inspect", "--validate", path); code != exitOK || !strings.HasSuffix(out, ": valid, format v4, "+fmt.Sprint(strings.Count(mustReadFile(t, path), "\n")-1)+" events\n") {
		t.Fatalf("before: exit %d, stdout %q, stderr %q", code, out, errb)
	}
	// The last turn/ended again, as the next event.
	b := mustReadFile(t, path)
	lines := strings.Count(b, "\n")
	ends := regexp.MustCompile(`(?m)^\{"type":"turn/ended","seq":\d+,(.*)$`).FindAllStringSubmatch(b, -1)
	if len(ends) == 0 {
		t.Fatalf("%s records no turn/ended:\n%s", path, b)
	}
	seq := lines - 1
	dup := fmt.Sprintf(`{"type":"turn/ended","seq":%d,%s`+"\n", seq, ends[len(ends)-1][1])
	if err := os.WriteFile(path, []byte(b+dup), 0o600); err != nil {
		t.Fatal(err)
	}
	turn := regexp.MustCompile(`"sessionId":("[^"]*"),"turn":(\d+)`).FindStringSubmatch(dup)
	msg := fmt.Sprintf(`turn/ended at seq %d: turn %s of session %s is recorded already`, seq, turn[2], turn[1])
	want := fmt.Sprintf("%s: line %d, byte %d: corrupt (rule relationship): %s\n", path, lines+1, len(b), msg)
	if code, out, errb := run("inspect", "--validate", path); code != exitFailure || out != want || !strings.Contains(errb, "1 problem(s) found") {
		t.Fatalf("after: exit %d, stdout %q, stderr %q\nwant stdout %q", code, out, errb, want)
	}
	to := filepath.Join(t.TempDir(), "c.tar")
	if code, out, errb := run("export", c.ID, "--to", to); code == exitOK || !strings.Contains(errb, path+": "+msg) {
		t.Fatalf("export: exit %d, stdout %q, stderr %q\nwant %s", code, out, errb, msg)
	}
}

func mustReadFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
