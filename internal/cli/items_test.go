package cli

import (
	"testing"

	"github.com/convkit/convkit/store"
)

// TestItemLine: every kind of item the libraries report, as docs/CLI.md
// spells its line.
func TestItemLine(t *testing.T) {
	for _, c := range []struct {
		it     store.Item
		warned string
		want   string
	}{
		{store.Item{Kind: store.ItemSkipped, ID: "c1", Path: "/d/c1", Reason: "no conversation log"}, "", "SKIPPED /d/c1: no conversation log"},
		{store.Item{Kind: store.ItemIgnored, Path: "/d/x", Reason: "unexpected file"}, "", "IGNORED /d/x: unexpected file"},
		{store.Item{Kind: store.ItemTempRemoved, Path: "/d/.t.tmp", Reason: "left by an interrupted write"}, "", "REMOVED /d/.t.tmp: left by an interrupted write"},
		{store.Item{Kind: store.ItemDeletionFinished, Path: "/d/c2", Reason: "finished an interrupted deletion"}, "", "DELETED /d/c2: finished an interrupted deletion"},
		{store.Item{Kind: store.ItemWillNotOpen, ID: "c3", Path: "/d/c3", Reason: "a; b"}, "", "WILL NOT OPEN c3: a; b"},
		{store.Item{Kind: store.ItemNotLocked, Path: "/d/runtime.lock", Reason: "read-only file system"}, "", "WARNING runtime.lock could not be taken (read-only file system): backing up online"},
		{store.Item{Kind: store.ItemUnreadable, Path: "/d/f", Reason: "permission denied"}, "", "UNREADABLE /d/f: permission denied"},
		{store.Item{Kind: store.ItemInvalid, Path: "/d/f", Reason: "line 2: bad"}, "", "INVALID /d/f: archived whole: line 2: bad"},
		{store.Item{Kind: store.ItemWarning, Path: "/d/f", Reason: "two spellings"}, "archived", "WARNING /d/f: two spellings (archived)"},
		{store.Item{Kind: store.ItemWarning, Path: "/d/l", Reason: "symbolic links are not followed"}, "not exported", "WARNING /d/l: symbolic links are not followed (not exported)"},
		{store.Item{Kind: store.ItemTempKept, Path: "/x.tmp", Reason: "left by an interrupted export, not removed: busy"}, "not exported", "WARNING /x.tmp: left by an interrupted export, not removed: busy"},
		{store.Item{Kind: store.ItemMismatch, Path: "conversations/c/m.jsonl", Reason: "size 3, the manifest says 4"}, "", "MISMATCH conversations/c/m.jsonl: size 3, the manifest says 4"},
	} {
		if got := itemLine(c.it, c.warned); got != c.want {
			t.Errorf("%s: %q, want %q", c.it.Kind, got, c.want)
		}
	}
}
