package reindex

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/store"
)

// TestStale: rows whose logs changed, whose directory is gone, or that are
// missing are stale until Update; a conversation being deleted needs no row.
func TestStale(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	s := openStore(t, dir)
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		addConversation(t, s, id, "hello "+id)
	}
	if _, err := Run(ctx, s, Options{}); err != nil {
		t.Fatal(err)
	}
	db, err := index.Open(filepath.Join(dir, store.IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	stale := func(want ...string) {
		t.Helper()
		got, err := Stale(ctx, db, reader(t, dir), []string{"a", "b", "c", "d", "e", "f"})
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("Stale = %v, %v; want %v", got, err, want)
		}
	}
	stale()
	if err := s.Rename("a", "renamed"); err != nil { // its logs changed
		t.Fatal(err)
	}
	p, _ := reader(t, dir).ConversationPath("b")
	if err := os.RemoveAll(p); err != nil { // gone
		t.Fatal(err)
	}
	if err := s.MarkDeleting("d"); err != nil { // being deleted, still indexed
		t.Fatal(err)
	}
	addConversation(t, s, "f", "hello f") // not indexed
	stale("a", "b", "d", "f")
	for _, id := range []string{"a", "b", "d", "f"} {
		if _, err := Update(ctx, db, reader(t, dir), id, UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stale()
	s.Close()
}
