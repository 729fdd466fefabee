package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/convkit/convkit/fixtures"
)

// TestDeleteRefusesForkSource: deleting the conversation a fork made after
// a compaction reads older history from is refused, unless the fork goes
// too or --force is given.
func TestDeleteRefusesForkSource(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	rep, err := fixtures.Generate(dir, fixtures.Options{Seed: 2, Conversations: 20})
	if err != nil {
		t.Fatal(err)
	}
	fork := rep.Find(fixtures.CaseForkAfterCompaction)
	if fork == nil || len(fork.DependsOn) == 0 {
		t.Fatal("the generated store has no fork after compaction")
	}
	src := fork.DependsOn[0]
	run := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append([]string{"convkit", "--data-dir", dir}, args...), nil, &out, &errb,
			func(string) string { return "" })
		return code, out.String(), errb.String()
	}
	code, _, stderr := run("delete", src)
	if code != 1 || !strings.Contains(stderr, "is the fork source of") || !strings.Contains(stderr, fork.ID) {
		t.Fatalf("delete of a fork source: exit %d, stderr %q", code, stderr)
	}
	if _, err := reader(t, dir).ReadConversation(src); err != nil {
		t.Fatalf("the refused delete touched the source: %v", err)
	}
	code, stdout, stderr := run("delete", src, fork.ID)
	if code != 0 || strings.Count(stdout, "deleted ") != 2 {
		t.Fatalf("delete of source and fork together: exit %d, %q %q", code, stdout, stderr)
	}
}

// TestDeleteDryRun: --dry-run says what delete would delete, with the
// same checks, and changes nothing; --json gives the plan exactly.
func TestDeleteDryRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	rep, err := fixtures.Generate(dir, fixtures.Options{Seed: 2, Conversations: 20})
	if err != nil {
		t.Fatal(err)
	}
	fork := rep.Find(fixtures.CaseForkAfterCompaction)
	src := fork.DependsOn[0]
	interrupted := rep.Find(fixtures.CaseInterruptedDelete)
	before := snapshot(t, dir)
	code, stdout, stderr := runIn(t, dir, "delete", "--dry-run", src[:8], fork.ID, interrupted.ID)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if code != 0 || stderr != "" || len(lines) != 4 ||
		!regexp.MustCompile(`^would delete `+regexp.QuoteMeta(src)+` ".*": \d+ files?, [0-9.]+ (bytes|KiB)$`).MatchString(lines[0]) ||
		!strings.HasPrefix(lines[1], "would delete "+fork.ID+" ") ||
		!regexp.MustCompile(`^would delete `+regexp.QuoteMeta(interrupted.ID)+`: \d+ files?, .* \(its deletion was recorded; finishing it\)$`).MatchString(lines[2]) ||
		!regexp.MustCompile(`^Dry run: 3 conversation\(s\), \d+ files, [0-9.]+ KiB would be deleted; nothing was changed$`).MatchString(lines[3]) {
		t.Errorf("delete --dry-run: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	// The same refusal as delete.
	code, stdout, stderr = runIn(t, dir, "delete", "--dry-run", src)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "is the fork source of") || !strings.Contains(stderr, "hint: delete those too") {
		t.Errorf("dry run of a fork source: exit %d, %q, %q", code, stdout, stderr)
	}
	code, stdout, _ = runIn(t, dir, "--json", "delete", "--dry-run", "--force", src)
	var plan struct {
		DryRun        bool `json:"dryRun"`
		Conversations []struct {
			ID     string `json:"id"`
			Action string `json:"action"`
			Bytes  int64  `json:"bytes"`
		} `json:"conversations"`
		Bytes int64 `json:"bytes"`
	}
	if err := json.Unmarshal([]byte(stdout), &plan); code != 0 || err != nil || !plan.DryRun || len(plan.Conversations) != 1 ||
		plan.Conversations[0].ID != src || plan.Conversations[0].Action != "delete" || plan.Bytes == 0 || plan.Bytes != plan.Conversations[0].Bytes {
		t.Errorf("--json delete --dry-run --force: exit %d, %v, %s", code, err, stdout)
	}
	if after := snapshot(t, dir); after != before {
		t.Errorf("a dry run changed the store")
	}
	// What does not apply is left out: an empty directory has no title or files.
	const empty = "0b5d3f7e-1c2a-4e8b-9f60-7d4c3b2a1e09"
	emptyDir := filepath.Join(dir, "conversations", empty)
	if err := os.Mkdir(emptyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = runIn(t, dir, "--json", "delete", "--dry-run", empty)
	if want := fmt.Sprintf(`{"schemaVersion":2,"dryRun":true,"conversations":[{"id":%q,"action":"remove-empty","path":%q}],"files":0,"bytes":0}`+"\n", empty, emptyDir); code != 0 || stdout != want {
		t.Errorf("--json delete --dry-run of an empty directory: exit %d\n got %s want %s", code, stdout, want)
	}
	if code, _, stderr := runIn(t, dir, "delete", "--dry-run", "--yes", src); code != exitUsage {
		t.Errorf("--dry-run --yes: exit %d, %q", code, stderr)
	}
}
