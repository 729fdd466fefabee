package hostile

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/store"
)

// garbageIndex writes a metadata.db of garbage: with sqlite, the SQLite
// magic followed by junk, which gets past a check of the first bytes.
func (f *fx) garbageIndex(sqlite bool) string {
	junk := bytes.Repeat([]byte("this is not a database\x00\xff"), 400)
	if sqlite {
		junk = append([]byte("SQLite format 3\x00"), junk...)
	}
	p := f.write(filepath.Join(f.data, store.IndexFileName), junk)
	f.vars["db"] = p
	return p
}

// sqliteIndex builds metadata.db with reindex, then has the sqlite3 tool
// run statements on it: a real index made hostile by another program.
func (f *fx) sqliteIndex(statements string) string {
	f.t.Helper()
	if _, err := exec.LookPath("sqlite3"); err != nil {
		f.t.Skip("sqlite3 is not installed (.ci/run installs it)")
	}
	f.mustRun(0, "reindex")
	p := filepath.Join(f.data, store.IndexFileName)
	cmd := exec.Command("sqlite3", "-bail", p)
	cmd.Stdin = strings.NewReader(statements)
	if out, err := cmd.CombinedOutput(); err != nil {
		f.t.Fatalf("sqlite3: %v\n%s", err, out)
	}
	f.vars["db"] = p
	return p
}

// endlessView replaces conversations by a view with its columns over a
// recursive query that never ends: a reader that queries it hangs.
const endlessView = `DROP TABLE conversations;
CREATE VIEW conversations AS WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r)
SELECT 'x'||n AS id, '' AS dir, '' AS title, 0 AS title_is_auto, '' AS cwd, 0 AS created_at, n AS updated_at,
  0 AS archived, '' AS forked_from, 0 AS after_compaction, '[]' AS agents, '[]' AS models, 0 AS running_turn,
  0 AS session_count, 0 AS turn_count, '' AS fingerprint FROM r;`

// endlessTrigger makes every delete from the index run an endless query.
const endlessTrigger = `CREATE TRIGGER forever BEFORE DELETE ON conversations BEGIN
SELECT count(*) FROM (WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) SELECT n FROM r); END;`

func indexCases() []hcase {
	viewReason := `{db}: not a convkit index of this schema version: view "conversations" is not part of the schema (an index holds no views or triggers)`
	return []hcase{
		{
			name: "metadata.db with conversations a view over an endless query: list falls back to the logs and says why",
			setup: func(f *fx) []string {
				f.sqliteIndex(endlessView)
				return []string{"list", "--all"}
			},
			code:   0,
			stderr: []string{"convkit: listing from the logs: metadata.db is not usable: " + viewReason},
			stdout: []string{"{basic.id}", "{v3.id}", "{zstd.id}"},
		},
		{
			name: "metadata.db with conversations a view over an endless query: search refuses it with a hint",
			setup: func(f *fx) []string {
				f.sqliteIndex(endlessView)
				return []string{"search", "files"}
			},
			code:   1,
			stderr: []string{"convkit: error: " + viewReason, "convkit: hint: run convkit reindex to build metadata.db"},
		},
		{
			name: "metadata.db with conversations a view over an endless query: reindex --check reports it, writes nothing",
			setup: func(f *fx) []string {
				f.sqliteIndex(endlessView)
				return []string{"reindex", "--check"}
			},
			code:   1,
			stdout: []string{"INDEX " + viewReason, "Check: conversations=3, differences=3, skipped=0"},
			stderr: []string{"the index disagrees with the logs (3 difference(s)); the first: INDEX " + viewReason},
		},
		{
			name: "metadata.db with conversations a view over an endless query: reindex rebuilds it",
			setup: func(f *fx) []string {
				f.sqliteIndex(endlessView)
				return []string{"reindex"}
			},
			code:   0,
			stdout: []string{"Summary: indexed=3, skipped=0, deletions-finished=0"},
			allow:  []string{lockRecord},
			want:   []string{"~data/metadata.db"},
			check: func(f *fx, r result) {
				if r2 := f.run("list", "--all"); r2.code != 0 || r2.stderr != "" {
					f.t.Errorf("list after the rebuild: exit %d, stderr %q (want the index, silently)", r2.code, r2.stderr)
				}
			},
		},
		{
			name: "metadata.db with a trigger running an endless query: delete deletes from the logs, leaves the file",
			setup: func(f *fx) []string {
				f.sqliteIndex(endlessTrigger)
				return []string{"delete", f.vars["basic.id"]}
			},
			code:   0,
			stdout: []string{"deleted {basic.id}"},
			stderr: []string{"convkit: warning: metadata.db was not updated ({db}: not a convkit index of this schema version: "},
			allow:  []string{lockRecord},
			want: []string{"-data/conversations/" + filepath.Base(base.basic.Dir), "-data/conversations/" + filepath.Base(base.basic.Dir) + "/*",
				"+data/.delete-*.journal"},
		},
		{
			name: "metadata.db with a trigger running an endless query: list falls back to the logs and says why",
			setup: func(f *fx) []string {
				f.sqliteIndex(endlessTrigger)
				return []string{"list", "--all"}
			},
			code:   0,
			stderr: []string{`convkit: listing from the logs: metadata.db is not usable: {db}: not a convkit index of this schema version: trigger "forever" is not part of the schema`},
			stdout: []string{"{basic.id}", "{v3.id}", "{zstd.id}"},
		},
		{
			name: "metadata.db with the search table a plain table: search refuses it with a hint",
			setup: func(f *fx) []string {
				f.sqliteIndex(`DROP TABLE messages; CREATE TABLE messages (conversation_id, session_id, seq, role, text);`)
				return []string{"search", "files"}
			},
			code:   1,
			stderr: []string{`convkit: error: {db}: not a convkit index of this schema version: "messages" is a table, not an FTS5 table`, "convkit: hint: run convkit reindex"},
		},
		{
			name: "metadata.db of another schema version: list falls back to the logs and says why",
			setup: func(f *fx) []string {
				f.sqliteIndex(`PRAGMA user_version = 7;`)
				return []string{"list", "--all"}
			},
			code:   0,
			stderr: []string{"convkit: listing from the logs: metadata.db is not usable: {db}: not a convkit index of this schema version: found schema version 7, want " + strconv.Itoa(index.SchemaVersion)},
			stdout: []string{"{basic.id}", "{v3.id}", "{zstd.id}"},
		},
		{
			name: "metadata.db of garbage: list falls back to the logs and says why",
			setup: func(f *fx) []string {
				f.garbageIndex(false)
				return []string{"list", "--all"}
			},
			code:   0,
			stderr: []string{"convkit: listing from the logs: metadata.db is not usable: {db}: not a convkit index of this schema version: file is not a database"},
			stdout: []string{"{basic.id}", "{v3.id}", "{zstd.id}"},
		},
		{
			name: "metadata.db of garbage behind a SQLite header: search refuses it with a hint",
			setup: func(f *fx) []string {
				f.garbageIndex(true)
				return []string{"search", "files"}
			},
			code:   1,
			stderr: []string{"convkit: error: {db}: not a convkit index of this schema version: file is not a database", "convkit: hint: run convkit reindex to build metadata.db"},
		},
		{
			name: "metadata.db of garbage: reindex --check reports it and writes nothing",
			setup: func(f *fx) []string {
				f.garbageIndex(true)
				return []string{"reindex", "--check"}
			},
			code:   1,
			stdout: []string{"INDEX {db}: not a convkit index of this schema version", "Check: conversations=3, differences=3, skipped=0"},
			stderr: []string{"the index disagrees with the logs (3 difference(s)); the first: INDEX {db}: not a convkit index of this schema version: file is not a database"},
		},
		{
			name: "metadata.db of garbage: reindex rebuilds it",
			setup: func(f *fx) []string {
				f.garbageIndex(true)
				return []string{"reindex"}
			},
			code:   0,
			stdout: []string{"Summary: indexed=3, skipped=0, deletions-finished=0"},
			allow:  []string{lockRecord},
			want:   []string{"~data/metadata.db"},
			check: func(f *fx, r result) {
				// The rebuilt index is current: list answers from it.
				if r2 := f.run("list", "--all"); r2.code != 0 || r2.stderr != "" {
					f.t.Errorf("list after the rebuild: exit %d, stderr %q (want the index, silently)", r2.code, r2.stderr)
				}
			},
		},
		{
			name: "metadata.db of garbage: delete deletes from the logs, leaves the file",
			setup: func(f *fx) []string {
				f.garbageIndex(false)
				return []string{"delete", f.vars["basic.id"]}
			},
			code:   0,
			stdout: []string{"deleted {basic.id}"},
			stderr: []string{"convkit: warning: metadata.db was not updated ({db}: not a convkit index of this schema version: "},
			allow:  []string{lockRecord},
			want: []string{"-data/conversations/" + filepath.Base(base.basic.Dir), "-data/conversations/" + filepath.Base(base.basic.Dir) + "/*",
				"+data/.delete-*.journal"},
		},
	}
}
