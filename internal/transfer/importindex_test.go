package transfer

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// TestImportIndexIsARebuild: the index an import builds, or updates, from
// the strict reads of the extraction, without reading the logs again, is
// exactly the index a rebuild writes (every row, the search text
// included), with a working directory mapped (a conversation log changed
// after its read) and without; reindex --check finds no difference.
func TestImportIndexIsARebuild(t *testing.T) {
	a, rep := fixtureStore(t, 9)
	sessions := 0

	// Into an empty store: the index is built.
	arch, cfg, b, ir := importAllIntoEmpty(t, a, rep)
	tree, err := reader(t, b).Walk()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range tree.Conversations {
		for _, l := range c.Logs {
			if !l.IsConversationLog {
				sessions++
			}
		}
	}
	if got := ir.IndexFromReads; got != sessions || sessions == 0 {
		t.Fatalf("%d of %d session logs indexed from the extraction's reads", got, sessions)
	}
	sameAsRebuild(t, b, cfg)

	// An archive an earlier build wrote (testdata/v1).
	b3 := filepath.Join(t.TempDir(), "B3")
	if ir, err := importFile(t, filepath.Join("testdata", "v1", "export.tar.zst"), b3, ImportOptions{ConfigPath: cfg}); err != nil || ir.Index != "built" {
		t.Fatalf("import of the earlier build's archive: %v", err)
	}
	sameAsRebuild(t, b3, cfg)

	// Into a store with an index, a working directory mapped: the rows
	// are updated.
	c, _ := fixtureStore(t, 13)
	rebuild(t, c, cfg)
	cwd := ir.Conversations[0].Cwd
	ir, err = importFile(t, arch, c, ImportOptions{ConfigPath: cfg, OnConflict: ConflictReplace, MapCwd: []CwdMapping{{From: cwd, To: "/srv/elsewhere"}}})
	if err != nil {
		t.Fatal(err)
	}
	if ir.Index != "updated" || ir.Counts.CwdMapped == 0 {
		t.Fatalf("index %q, counts %+v", ir.Index, ir.Counts)
	}
	if ir.IndexFromReads == 0 {
		t.Fatal("the update read every log again")
	}
	sameAsRebuild(t, c, cfg)
}

// sameAsRebuild checks that the index of the store in dir is what a
// rebuild writes, and that reindex --check agrees.
func sameAsRebuild(t *testing.T, dir, cfg string) {
	t.Helper()
	m := loadMachine(t, cfg)
	cr, err := reindex.Check(context.Background(), reader(t, dir), reindex.Options{Machine: m})
	if err != nil {
		t.Fatal(err)
	}
	if cr.Drift() {
		t.Fatalf("check after the import: %s %+v", cr.IndexProblem, cr.Differences)
	}
	got, err := fixtures.IndexRows(filepath.Join(dir, store.IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	rebuild(t, dir, cfg)
	want, err := fixtures.IndexRows(filepath.Join(dir, store.IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		for i := range max(len(got), len(want)) {
			g, w := "", ""
			if i < len(got) {
				g = got[i]
			}
			if i < len(want) {
				w = want[i]
			}
			if g != w {
				t.Fatalf("the imported index differs from the rebuild at row %d of %d/%d:\nimport  %.300s\nrebuild %.300s", i, len(got), len(want), g, w)
			}
		}
	}
}

func rebuild(t *testing.T, dir, cfg string) {
	t.Helper()
	s, err := store.Open(context.Background(), dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := reindex.Run(context.Background(), s, reindex.Options{Machine: loadMachine(t, cfg)}); err != nil {
		t.Fatal(err)
	}
}

func loadMachine(t *testing.T, cfg string) *store.Machine {
	t.Helper()
	m, _, err := store.LoadMachine(cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// importAllIntoEmpty exports every exportable conversation of the store a
// (rep its fixtures report) and imports the archive into a new store,
// whose index must then be built with every conversation imported. It
// returns the archive, the runtime configuration used, the new store's
// data directory and the import's result.
func importAllIntoEmpty(t *testing.T, a string, rep *fixtures.Report) (arch, cfg, b string, ir *ImportResult) {
	t.Helper()
	var ids []string
	for _, c := range exportable(rep) {
		ids = append(ids, c.ID)
	}
	arch, _ = exportTo(t, a, ids...)
	cfg = writeConfig(t, allAgents, allModels)
	b = filepath.Join(t.TempDir(), "B")
	ir, err := importFile(t, arch, b, ImportOptions{ConfigPath: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if ir.Index != "built" || ir.Counts.Imported != len(ids) {
		t.Fatalf("index %q, counts %+v", ir.Index, ir.Counts)
	}
	return arch, cfg, b, ir
}
