package backup

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/store"
)

// TestExpectationsAreTheRebuilds: what a strict backup's manifest expects
// of each conversation is what reindex does with it, reason included,
// for every way a conversation is skipped or deleted: both decide by
// reindex.Accept.
func TestExpectationsAreTheRebuilds(t *testing.T) {
	dataDir, _ := generate(t, 5, 14, false)
	s, err := store.Open(context.Background(), dataDir, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := s.Walk()
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	// Plain conversations with a session log, to break three ways.
	var plain []store.ConversationDir
	for _, c := range tree.Conversations {
		if len(c.Logs) >= 2 && c.Logs[0].IsConversationLog && c.Logs[0].Current.Version == convlog.CurrentVersion && c.Logs[0].Current.Compression == convlog.Plain && c.Logs[1].Current.Version == 4 {
			plain = append(plain, c)
		}
	}
	if len(plain) < 3 {
		t.Fatalf("%d conversations to break", len(plain))
	}
	// A conversation log that names another conversation.
	named, other := plain[0], plain[1]
	copyFile(t, other.Logs[0].Path, named.Logs[0].Path)
	// A directory without a conversation log.
	if err := os.Remove(plain[1].Logs[0].Path); err != nil {
		t.Fatal(err)
	}
	// A session log that names another session.
	moved := plain[2].Logs[1]
	base, err := store.EncodeBase("another-session")
	if err != nil {
		t.Fatal(err)
	}
	gen := moved.Current
	gen.Base = base
	if err := os.Rename(moved.Path, filepath.Join(filepath.Dir(moved.Path), gen.String())); err != nil {
		t.Fatal(err)
	}

	a, _ := backupFile(t, dataDir, Options{Now: fixedClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)), ToolVersion: "test", Strict: true})
	clone := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.Command("cp", "-a", dataDir, clone).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	rr := reindexStore(t, clone)
	skipped := map[string]string{}
	for _, sk := range rr.Skipped {
		// A skip of a log is recorded with the log's name.
		reason := sk.Reason
		if rel, _ := filepath.Rel(filepath.Join(clone, store.ConversationsDirName), sk.Path); strings.Contains(rel, "/") {
			reason = filepath.Base(sk.Path) + ": " + reason
		}
		skipped[sk.ID] = reason
	}
	deleted := map[string]bool{}
	for _, id := range rr.DeletionsFinished {
		deleted[id] = true
	}
	kinds := map[store.ItemKind]int{}
	for _, c := range extractedManifest(t, a).Conversations {
		kinds[c.Expect]++
		switch c.Expect {
		case store.ItemSkipped:
			if skipped[c.ID] != c.Reason {
				t.Errorf("%s: expected skipped (%s); the rebuild: %q", c.ID, c.Reason, skipped[c.ID])
			}
		case store.ItemDeleted:
			if !deleted[c.ID] {
				t.Errorf("%s: expected deleted; the rebuild did not finish it", c.ID)
			}
		case store.ItemIndexed:
			if _, ok := skipped[c.ID]; ok || deleted[c.ID] {
				t.Errorf("%s: expected indexed; the rebuild skipped (%s) or deleted it", c.ID, skipped[c.ID])
			}
		default:
			t.Errorf("%s: expect %q", c.ID, c.Expect)
		}
	}
	// The three broken here, and any the fixtures hold.
	if kinds[store.ItemSkipped] < 3 || kinds[store.ItemSkipped] != len(rr.Skipped) || kinds[store.ItemDeleted] != len(rr.DeletionsFinished) {
		t.Fatalf("expected %v; the rebuild skipped %d: %+v", kinds, len(rr.Skipped), rr.Skipped)
	}
	if v := verifyFile(t, a); !v.OK {
		t.Fatalf("verify: %+v", v.Mismatches)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
