package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/convkit/convkit/fixtures"
)

// TestExportDryRun: export --dry-run says what the archive would hold,
// the fork ancestors it adds with whom for, and writes nothing; what the
// export would leave out makes it exit 3, as the export would.
func TestExportDryRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	rep, err := fixtures.Generate(dir, fixtures.Options{Seed: 2, Conversations: 20})
	if err != nil {
		t.Fatal(err)
	}
	fork := rep.Find(fixtures.CaseForkAfterCompaction)
	src := fork.DependsOn[0]
	to := filepath.Join(t.TempDir(), "out.tar.zst")
	before := snapshot(t, dir)
	code, stdout, stderr := runIn(t, dir, "export", "--dry-run", fork.ID[:8], "--to", to)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	if code != 0 || stderr != "" || len(lines) != 3 ||
		!regexp.MustCompile(`^WOULD ADD `+regexp.QuoteMeta(src)+` ".*": fork ancestor of `+regexp.QuoteMeta(fork.ID)+`; \d+ files?, [0-9.]+ KiB$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^WOULD EXPORT `+regexp.QuoteMeta(fork.ID)+` ".*": \d+ files?, [0-9.]+ KiB$`).MatchString(lines[1]) ||
		lines[2] != "Dry run: 2 conversation(s) (1 fork ancestor(s) added), "+regexp.MustCompile(`\d+ files, [0-9.]+ KiB`).FindString(lines[2])+" would be written to "+to+"; nothing was written" {
		t.Errorf("export --dry-run: exit %d, stderr %q, stdout:\n%s", code, stderr, stdout)
	}
	if _, err := os.Lstat(to); err == nil {
		t.Error("the dry run wrote the archive")
	}
	if snapshot(t, dir) != before {
		t.Error("the dry run changed the store")
	}

	// --json: the summary export prints, exact, marked as a dry run.
	code, stdout, _ = runIn(t, dir, "--json", "export", "--dry-run", fork.ID)
	var sum struct {
		DryRun  bool     `json:"dryRun"`
		Added   []string `json:"added"`
		Files   int      `json:"files"`
		Bytes   int64    `json:"bytes"`
		Archive string   `json:"archive"`
	}
	if err := json.Unmarshal([]byte(stdout), &sum); code != 0 || err != nil || !sum.DryRun || len(sum.Added) != 1 || sum.Added[0] != src ||
		sum.Files == 0 || sum.Bytes == 0 || sum.Archive != "" {
		t.Errorf("--json export --dry-run: exit %d, %v, %s", code, err, stdout)
	}

	// What the export would leave out: exit 3, reported.
	corrupt := rep.Find(fixtures.CaseCorrupt)
	code, stdout, stderr = runIn(t, dir, "export", "--dry-run", corrupt.ID)
	if code != exitPartial || !strings.Contains(stderr, "UNREADABLE ") || !strings.Contains(stdout, "Dry run: 0 conversation(s)") {
		t.Errorf("dry run of a corrupt conversation: exit %d, %q, %q", code, stdout, stderr)
	}
	// An existing --to is refused, as the export refuses it.
	if err := os.WriteFile(to, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runIn(t, dir, "export", "--dry-run", fork.ID, "--to", to); code != 1 || !strings.Contains(stderr, "hint: name a new file") {
		t.Errorf("dry run to an existing file: exit %d, %q", code, stderr)
	}
}
