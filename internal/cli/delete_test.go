package cli

import (
	"bytes"
	"context"
	"path/filepath"
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
