package transfer

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// TestImportUpdatesDependents: importing a conversation that a fork of the
// store reads older history from updates the fork's row (its fork source
// is no longer missing), whether the fork's row is in the index or not
// (a row the index lacks is found from the fork's conversation log).
func TestImportUpdatesDependents(t *testing.T) {
	for _, withRow := range []bool{true, false} {
		name := "the fork indexed"
		if !withRow {
			name = "the fork not indexed"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			// The fork alone, exported from a store without its source.
			a1, rep := fixtureStore(t, 7)
			fork := rep.Find(fixtures.CaseForkAfterCompaction)
			source := fork.DependsOn[0]
			dir, _ := reader(t, a1).ConversationPath(source)
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			archFork, _ := exportTo(t, a1, fork.ID)
			a2, _ := fixtureStore(t, 7)
			archSource, res := exportTo(t, a2, source)
			if slices.ContainsFunc(res.Manifest.Conversations, func(c Conversation) bool { return c.ID == fork.ID }) {
				t.Fatal("the source's archive holds the fork")
			}

			b := filepath.Join(t.TempDir(), "B")
			if _, err := importFile(t, archFork, b, ImportOptions{}); err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(willNotOpen(t, b, fork.ID), isForkSource) {
				t.Fatalf("before: the fork's row does not say its source is missing: %q", willNotOpen(t, b, fork.ID))
			}
			if !withRow {
				removeRow(t, b, fork.ID)
			}
			ir, err := importFile(t, archSource, b, ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if ir.Index != "updated" {
				t.Fatalf("index %q", ir.Index)
			}
			if got := willNotOpen(t, b, fork.ID); slices.ContainsFunc(got, isForkSource) {
				t.Fatalf("after: the fork's row still says its source is missing: %q", got)
			}
			cr, err := reindex.Check(ctx, reader(t, b), reindex.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if cr.Drift() {
				t.Fatalf("index drift after the import: %+v", cr.Differences)
			}
		})
	}
}

func isForkSource(reason string) bool { return strings.Contains(reason, "fork source") }

// willNotOpen is what metadata.db of dataDir records of why id will not
// open; it fails the test when id has no row.
func willNotOpen(t *testing.T, dataDir, id string) []string {
	t.Helper()
	row, ok := storeRows(t, dataDir)[id]
	if !ok {
		t.Fatalf("%s has no row", id)
	}
	return row.WillNotOpen
}

// removeRow deletes id's rows from metadata.db of dataDir, as a runtime
// that wrote the conversation but died before updating the index leaves
// them.
func removeRow(t *testing.T, dataDir, id string) {
	t.Helper()
	ctx := context.Background()
	db, err := index.Open(filepath.Join(dataDir, store.IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
}
