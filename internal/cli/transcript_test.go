package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convkit/convkit/fixtures"
)

// TestInspectTranscript: inspect --transcript of a fork made after a
// compaction prints the source's part (read-only) then the fork's, by ids
// and by path, as text and as JSON Lines; --history stays the model's view.
func TestInspectTranscript(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	rep, err := fixtures.Sample(dir)
	if err != nil {
		t.Fatal(err)
	}
	fork := rep.Find(fixtures.CaseForkAfterCompaction)
	src := rep.Find(fixtures.CaseCompaction)
	var session, path string
	for _, l := range fork.Logs {
		if l.SessionID != "" {
			session, path = l.SessionID, l.Path
		}
	}
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append([]string{"convkit", "--data-dir", dir}, args...), nil, &out, &errb,
			func(string) string { return "" })
		return code, out.String(), errb.String()
	}
	code, text, stderr := run("inspect", "--transcript", fork.ID, session)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{`-- from conversation "` + src.ID + `"`, "[summary]", "[interrupted]", "turn 2 ended: error", "-- this session"} {
		if !strings.Contains(text, want) {
			t.Errorf("transcript lacks %q:\n%s", want, text)
		}
	}
	if code, byPath, _ := run("inspect", "--transcript", path); code != 0 || byPath != text {
		t.Errorf("by path: exit %d, differs: %v", code, byPath != text)
	}
	code, jsonl, _ := run("--json", "inspect", "--transcript", fork.ID, session)
	lines := strings.Split(strings.TrimSpace(jsonl), "\n")
	var first, last struct {
		Conversation string `json:"conversation"`
		Inherited    bool   `json:"inherited"`
	}
	if code != 0 || json.Unmarshal([]byte(lines[0]), &first) != nil || json.Unmarshal([]byte(lines[len(lines)-1]), &last) != nil ||
		!first.Inherited || first.Conversation != src.ID || last.Inherited || last.Conversation != fork.ID {
		t.Fatalf("JSON lines: exit %d, first %+v, last %+v", code, first, last)
	}
	_, hist, _ := run("inspect", "--history", fork.ID, session)
	if strings.Count(hist, "\n[") >= strings.Count(text, "\n[") {
		t.Errorf("the history is not shorter than the transcript")
	}
	if code, _, stderr := run("inspect", "--transcript", "--history", path); code != 2 || !strings.Contains(stderr, "exclude each other") {
		t.Errorf("two modes: exit %d %s", code, stderr)
	}
}
