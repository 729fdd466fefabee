package transfer

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/internal/indexdump"
	"github.com/convkit/convkit/machine"
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
	if !ir.IndexStaged {
		t.Fatal("the index of an empty store was not built while the archive was extracted")
	}
	sameAsRebuildInOrder(t, b, cfg)

	// The same with the message text spooled to a file almost whole.
	b2 := filepath.Join(t.TempDir(), "B2")
	ir2, err := importFile(t, arch, b2, ImportOptions{ConfigPath: cfg, spoolMemory: 2 << 10})
	if err != nil || ir2.Index != "built" {
		t.Fatalf("import with the text spooled: %v", err)
	}
	if got := ir2.IndexFromReads; got != sessions || !ir2.IndexStaged {
		t.Fatalf("%d of %d session logs indexed from the extraction's reads, text spooled (staged: %v)", got, sessions, ir2.IndexStaged)
	}
	sameAsRebuildInOrder(t, b2, cfg)

	// Into an empty store with a working directory mapped: the mapping
	// appends to a conversation log once placed, so the index built
	// during the extraction is not used; the one built after is the
	// same.
	b4 := filepath.Join(t.TempDir(), "B4")
	cwd0 := ir.Conversations[0].Cwd
	ir4, err := importFile(t, arch, b4, ImportOptions{ConfigPath: cfg, MapCwd: []CwdMapping{{From: cwd0, To: "/srv/elsewhere"}}})
	if err != nil || ir4.Index != "built" || ir4.IndexStaged || ir4.Counts.CwdMapped == 0 {
		t.Fatalf("import with a mapping: %v, index %q, staged %v, counts %+v", err, ir4.Index, ir4.IndexStaged, ir4.Counts)
	}
	if entries, err := os.ReadDir(b4); err != nil || len(entries) != 3 {
		t.Fatalf("the data directory after the import: %v %v", entries, err) // conversations, metadata.db, runtime.lock
	}
	sameAsRebuildInOrder(t, b4, cfg)

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

// sameAsRebuildInOrder is sameAsRebuild for an index built whole: the
// search table's rows are also numbered as the rebuild numbers them.
func sameAsRebuildInOrder(t *testing.T, dir, cfg string) {
	t.Helper()
	got := messageOrder(t, store.IndexPath(dir))
	sameAsRebuild(t, dir, cfg)
	if want := messageOrder(t, store.IndexPath(dir)); !slices.Equal(got, want) {
		t.Fatalf("the search rows are numbered otherwise than by a rebuild (%d and %d rows)", len(got), len(want))
	}
}

// messageOrder lists the search table's rows and message_rows by row
// number.
func messageOrder(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []string
	for _, q := range []string{"SELECT rowid, conversation_id || ' ' || session_id || ' ' || seq FROM messages ORDER BY rowid",
		"SELECT fts_rowid, conversation_id FROM message_rows ORDER BY fts_rowid"} {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var n int64
			var v string
			if err := rows.Scan(&n, &v); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(n, " ", v))
		}
		rows.Close()
	}
	if len(out) == 0 {
		t.Fatal("no search rows")
	}
	return out
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
	got := indexdump.Rows(t, store.IndexPath(dir))
	rebuild(t, dir, cfg)
	want := indexdump.Rows(t, store.IndexPath(dir))
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

func loadMachine(t *testing.T, cfg string) *machine.Machine {
	t.Helper()
	m, _, err := machine.Load(cfg, true)
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

// TestImportIndexStagedFallsBack: an archive whose conversations come out
// of the store's order, or whose entries of one conversation come apart,
// is imported with the index built after the placement (the same index);
// one that fails verification leaves no index, staged or published.
func TestImportIndexStagedFallsBack(t *testing.T) {
	a, rep := fixtureStore(t, 9)
	arch, cfg, _, _ := importAllIntoEmpty(t, a, rep)
	ents := readArchive(t, arch)
	manifest := ents[len(ents)-1]
	files := ents[:len(ents)-1]

	// Conversations in reverse order, each one's entries kept together.
	var groups [][]entry
	for _, e := range files {
		dir := path.Dir(e.hdr.Name)
		if n := len(groups); n > 0 && path.Dir(groups[n-1][0].hdr.Name) == dir {
			groups[n-1] = append(groups[n-1], e)
			continue
		}
		groups = append(groups, []entry{e})
	}
	if len(groups) <= stagedReorder+1 {
		t.Fatalf("%d conversations: too few to come out of order", len(groups))
	}
	var reversed []entry
	for i := len(groups) - 1; i >= 0; i-- {
		reversed = append(reversed, groups[i]...)
	}
	// The first conversation with two logs, its second log last.
	var apart []entry
	moved := -1
	for i, e := range files {
		if moved < 0 && i > 0 && path.Dir(files[i-1].hdr.Name) == path.Dir(e.hdr.Name) {
			moved = i
			continue
		}
		apart = append(apart, e)
	}
	if moved < 0 {
		t.Fatal("no conversation with two logs")
	}
	apart = append(apart, files[moved])

	for name, order := range map[string][]entry{"reversed": reversed, "apart": apart} {
		b := filepath.Join(t.TempDir(), "B")
		ir, err := importBytes(t, makeArchive(t, append(order, manifest), 0), b, ImportOptions{ConfigPath: cfg})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if ir.Index != "built" || ir.IndexStaged {
			t.Fatalf("%s: index %q, staged %v", name, ir.Index, ir.IndexStaged)
		}
		sameAsRebuildInOrder(t, b, cfg)
	}

	// A log's bytes changed (the manifest's checksum no longer agrees).
	bad := append([]entry(nil), files...)
	last := bad[len(bad)-1]
	last.body = append(append([]byte(nil), last.body...), '\n')
	last.hdr.Size++
	bad[len(bad)-1] = last
	b := filepath.Join(t.TempDir(), "B")
	if _, err := importBytes(t, makeArchive(t, append(bad, manifest), 0), b, ImportOptions{ConfigPath: cfg}); err == nil {
		t.Fatal("an archive with a changed log was imported")
	}
	if _, err := os.Lstat(b); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(b)
		t.Fatalf("the refused import left %v", entries)
	}
}
