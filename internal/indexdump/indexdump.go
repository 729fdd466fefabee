// Package indexdump reads every row of a metadata.db as sorted lines, so
// tests can compare two indexes whole: the one a job built with the one a
// rebuild writes.
package indexdump

import (
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"

	_ "modernc.org/sqlite"
)

// Rows is every row of every table of the index at path, as sorted lines:
// the search text through message_rows, which must map every message to its
// conversation (an orphan either way is a line of its own). An empty index
// fails the test.
func Rows(t testing.TB, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []string
	for _, q := range []string{
		"SELECT 'conversation', * FROM conversations",
		"SELECT 'session', * FROM sessions",
		"SELECT 'turn', * FROM turns",
		"SELECT 'skipped', * FROM skipped",
		`SELECT 'message', r.conversation_id, m.conversation_id, m.session_id, m.seq, m.role, m.text
			FROM message_rows r JOIN messages m ON m.rowid = r.fts_rowid`,
		"SELECT 'orphan message', rowid FROM messages WHERE rowid NOT IN (SELECT fts_rowid FROM message_rows)",
		"SELECT 'orphan row', * FROM message_rows WHERE fts_rowid NOT IN (SELECT rowid FROM messages)",
	} {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for i, v := range vals {
				if i > 0 {
					b.WriteString(" | ")
				}
				if raw, ok := v.([]byte); ok {
					v = string(raw)
				}
				fmt.Fprint(&b, v)
			}
			out = append(out, b.String())
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
	}
	slices.Sort(out)
	if len(out) == 0 {
		t.Fatalf("%s is empty", path)
	}
	return out
}
