package reindex

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/internal/indexdump"
	"github.com/convkit/convkit/store"
)

// stageCopy copies the conversations of the store gen into a staging tree
// under base and returns its walk.
func stageCopy(t *testing.T, gen, base string) *store.Tree {
	t.Helper()
	tree := filepath.Join(base, "tree")
	copyDir(t, store.ConversationsDir(gen), filepath.Join(tree, filepath.Base(store.ConversationsDir(gen))))
	staged, err := reader(t, tree).Walk()
	if err != nil || len(staged.Problems) > 0 || len(staged.Temps) > 0 {
		t.Fatalf("the staged tree: %v %v", err, staged.Problems)
	}
	return staged
}

// place renames the staged conversation directories into the store s.
func place(t *testing.T, staged *store.Tree, s *store.Store) {
	t.Helper()
	if err := os.MkdirAll(s.ConversationsDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range staged.Conversations {
		if err := os.Rename(c.Path, filepath.Join(s.ConversationsDir(), c.Name)); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStagedIsRun: an index staged while the conversations were elsewhere
// on the file system, published once they are placed, holds Run's rows
// with the search rows numbered as Run numbers them; one added out of
// order, or a store changed once placed, publishes nothing.
func TestStagedIsRun(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	gen := filepath.Join(base, "gen")
	if _, err := fixtures.Generate(gen, fixtures.Options{Seed: 5, Conversations: 30, OrdinaryOnly: true}); err != nil {
		t.Fatal(err)
	}

	staged := stageCopy(t, gen, filepath.Join(base, "stage1"))
	ix, err := NewStaged(ctx, filepath.Join(base, "stage1", "index.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range staged.Conversations {
		if err := ix.Add(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	s := openStore(t, filepath.Join(base, "data"))
	place(t, staged, s)
	res, err := ix.Publish(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if res.Indexed != len(staged.Conversations) || res.Messages == 0 {
		t.Fatalf("published %+v", res)
	}
	got, gotOrder := indexdump.Rows(t, s.IndexPath()), searchOrder(t, s.IndexPath())
	if _, err := Run(ctx, s, Options{}); err != nil {
		t.Fatal(err)
	}
	if want := indexdump.Rows(t, s.IndexPath()); !slices.Equal(got, want) {
		t.Fatalf("the staged index has %d rows, a rebuild %d, or they differ", len(got), len(want))
	}
	if want := searchOrder(t, s.IndexPath()); !slices.Equal(gotOrder, want) {
		t.Fatal("the staged index numbers its search rows otherwise than a rebuild")
	}
	s.Close()

	// Out of order.
	staged = stageCopy(t, gen, filepath.Join(base, "stage2"))
	db := filepath.Join(base, "stage2", "index.db")
	ix, err = NewStaged(ctx, db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ix.Add(ctx, staged.Conversations[1]); err != nil {
		t.Fatal(err)
	}
	if err := ix.Add(ctx, staged.Conversations[0]); !errors.Is(err, ErrNotStaged) {
		t.Fatalf("added out of order: %v", err)
	}
	ix.Abandon()
	if _, err := os.Lstat(db); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the abandoned database is still there: %v", err)
	}

	// A conversation log appended to once placed.
	staged = stageCopy(t, gen, filepath.Join(base, "stage3"))
	ix, err = NewStaged(ctx, filepath.Join(base, "stage3", "index.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range staged.Conversations {
		if err := ix.Add(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	s = openStore(t, filepath.Join(base, "data3"))
	defer s.Close()
	place(t, staged, s)
	if err := s.Rename(staged.Conversations[3].ID, "renamed once placed"); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Publish(ctx, s); !errors.Is(err, ErrNotStaged) {
		t.Fatalf("published over a changed store: %v", err)
	}
	ix.Abandon()
	if _, err := os.Lstat(s.IndexPath()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("metadata.db after a refused publish: %v", err)
	}
}

// searchOrder lists the search rows by row number.
func searchOrder(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT rowid, conversation_id, session_id, seq FROM messages ORDER BY rowid")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n, seq int64
		var c, s string
		if err := rows.Scan(&n, &c, &s, &seq); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(n, c, s, seq))
	}
	if len(out) == 0 {
		t.Fatal("no search rows")
	}
	return out
}
