package transfer

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestImportIndexOfLogsTheZstdToolWrote: session logs recompressed by the
// zstd tool (one frame holding the header and every line, not the
// writer's frame per append) are indexed from the extraction's reads as
// well, and the index is a rebuild's.
func TestImportIndexOfLogsTheZstdToolWrote(t *testing.T) {
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Skip("the zstd tool is not installed")
	}
	a, rep := fixtureStore(t, 9)
	tree, err := reader(t, a).Walk()
	if err != nil {
		t.Fatal(err)
	}
	recompressed := 0
	for _, c := range tree.Conversations {
		for _, l := range c.Logs {
			if l.IsConversationLog || !strings.HasSuffix(l.Path, ".zst") {
				continue
			}
			plain, err := exec.Command("zstd", "-q", "-d", "-c", l.Path).Output()
			if err != nil {
				continue // a torn or corrupt log of the fixtures: left as it is
			}
			enc := exec.Command("zstd", "-q", "-3", "-c")
			enc.Stdin = bytes.NewReader(plain)
			out, err := enc.Output()
			if err != nil {
				t.Fatal(err)
			}
			tmp := l.Path + ".new"
			if err := os.WriteFile(tmp, out, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, l.Path); err != nil {
				t.Fatal(err)
			}
			recompressed++
		}
	}
	if recompressed == 0 {
		t.Fatal("no compressed session log to recompress")
	}
	_, cfg, b, ir := importAllIntoEmpty(t, a, rep)
	btree, err := reader(t, b).Walk()
	if err != nil {
		t.Fatal(err)
	}
	sessions, oneFrame := 0, 0
	for _, c := range btree.Conversations {
		for _, l := range c.Logs {
			if l.IsConversationLog {
				continue
			}
			sessions++
			if data, err := os.ReadFile(l.Path); err == nil && bytes.Count(data, []byte{0x28, 0xb5, 0x2f, 0xfd}) == 1 {
				oneFrame++
			}
		}
	}
	if oneFrame == 0 {
		t.Fatal("no imported log holds the zstd tool's single frame")
	}
	if ir.IndexFromReads != sessions {
		t.Fatalf("%d of %d session logs indexed from the extraction's reads", ir.IndexFromReads, sessions)
	}
	sameAsRebuild(t, b, cfg)
}
