package index

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// sqlite3 runs the sqlite3 command-line tool on db with the statements.
func sqlite3(t *testing.T, db, statements string) {
	t.Helper()
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Skip("sqlite3 is not installed (.ci/run installs it)")
	}
	cmd := exec.Command("sqlite3", "-bail", db)
	cmd.Stdin = strings.NewReader(statements)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sqlite3 %s: %v\n%s\n%s", db, err, statements, out)
	}
}

// goodIndex writes an index with one conversation through this package.
func goodIndex(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "metadata.db")
	db, err := Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := db.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Put(context.Background(), conv("a", 100, false), []Message{{SessionID: "root", Seq: 1, Role: "user", Text: "about otters"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.Finish(); err != nil {
		t.Fatal(err)
	}
	return p
}

// endless is a query with no end: a recursive CTE counting for ever.
const endless = `WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM r) `

// conversationsView replaces conversations by a view over an endless
// query, with the table's columns.
const conversationsView = `DROP TABLE conversations;
CREATE VIEW conversations AS ` + endless + `SELECT 'x'||n AS id, '' AS dir, '' AS title, 0 AS title_is_auto, '' AS cwd,
  0 AS created_at, n AS updated_at, 0 AS archived, '' AS forked_from, 0 AS after_compaction, '[]' AS agents,
  '[]' AS models, 0 AS running_turn, 0 AS session_count, 0 AS turn_count, '' AS fingerprint FROM r;`

// hostileSchemas are databases built with the sqlite3 tool from a good
// index, each with one thing a reader must not trust, and what the
// refusal says.
var hostileSchemas = []struct{ name, sql, want string }{
	{"conversations is a view over an endless query", conversationsView, `view "conversations" is not part of the schema`},
	{"a trigger on sessions", `CREATE TRIGGER t AFTER INSERT ON sessions BEGIN SELECT count(*) FROM (` + endless + `SELECT n FROM r); END;`, `trigger "t" is not part of the schema`},
	{"an extra view", `CREATE VIEW everything AS ` + endless + `SELECT n FROM r;`, `view "everything" is not part of the schema`},
	{"an extra table", `CREATE TABLE notes (x);`, `table "notes" is not part of the schema`},
	{"conversations is an FTS5 table", `DROP TABLE conversations; CREATE VIRTUAL TABLE conversations USING fts5(id, dir, title, title_is_auto, cwd,
  created_at, updated_at, archived, forked_from, after_compaction, agents, models, running_turn, session_count, turn_count, fingerprint);`,
		`"conversations" is a virtual table, not a table`},
	{"messages is a plain table", `DROP TABLE messages; CREATE TABLE messages (conversation_id, session_id, seq, role, text);`,
		`"messages" is a table, not an FTS5 table`},
	{"an FTS5 shadow table is a view", `PRAGMA writable_schema=ON; UPDATE sqlite_master SET type='view', rootpage=0, sql='CREATE VIEW messages_content AS ` +
		strings.ReplaceAll(endless, "'", "''") + `SELECT n AS id FROM r' WHERE name='messages_content';`, `view "messages_content" is not part of the schema`},
	{"a column missing", `ALTER TABLE sessions DROP COLUMN file;`, `table "sessions" has the columns [`},
	{"a column of another type", `DROP TABLE skipped; CREATE TABLE skipped (id TEXT PRIMARY KEY, dir BLOB NOT NULL, fingerprint TEXT NOT NULL, reason TEXT NOT NULL) WITHOUT ROWID;`,
		`table "skipped" has the columns [`},
	{"the index on another table", `DROP INDEX conversations_by_updated; CREATE INDEX conversations_by_updated ON sessions(conversation_id);`,
		`index "conversations_by_updated" belongs to "sessions", not "conversations"`},
	{"a table missing", `DROP TABLE turns;`, `table "turns" is missing`},
	{"another user_version", `PRAGMA user_version = 99;`, fmt.Sprintf(`found schema version 99, want %d`, SchemaVersion)},
	{"an older user_version", `PRAGMA user_version = 1;`, fmt.Sprintf(`found schema version 1, want %d`, SchemaVersion)},
}

// TestSchemaCheckRefusesHostileDatabases: every hostile schema is refused
// by Open and OpenRead before any query touches it, within a deadline
// that only catches a hang, and the refusal wraps ErrSchema.
func TestSchemaCheckRefusesHostileDatabases(t *testing.T) {
	for _, c := range hostileSchemas {
		t.Run(c.name, func(t *testing.T) {
			p := goodIndex(t)
			sqlite3(t, p, c.sql)
			for _, open := range []struct {
				name string
				fn   func() (*DB, error)
			}{
				{"Open", func() (*DB, error) { return Open(p) }},
				{"OpenRead", func() (*DB, error) { return OpenRead(context.Background(), p, ReadOptions{}) }},
			} {
				done := make(chan error, 1)
				go func() {
					db, err := open.fn()
					if err == nil {
						db.Close()
					}
					done <- err
				}()
				select {
				case err := <-done:
					if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), c.want) {
						t.Errorf("%s: %v, want ErrSchema saying %q", open.name, err, c.want)
					}
				case <-time.After(30 * time.Second):
					t.Fatalf("%s hangs", open.name)
				}
			}
		})
	}
}

// TestSchemaOfTheSqliteTool: an index whose schema the sqlite3 tool made
// from the same statements (another SQLite version, its own FTS5) passes
// the check: it compares what the schema means, not one library's bytes.
func TestSchemaOfTheSqliteTool(t *testing.T) {
	p := filepath.Join(t.TempDir(), "metadata.db")
	sqlite3(t, p, schema+fmt.Sprintf("PRAGMA user_version = %d; PRAGMA journal_mode = WAL;", SchemaVersion))
	db, err := OpenRead(context.Background(), p, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if rows, err := db.List(context.Background(), ListOptions{All: true}); err != nil || len(rows) != 0 {
		t.Fatalf("%v %v", rows, err)
	}
}

// TestQueriesStopAtTheDeadline: a statement that never ends is stopped by
// its context, both when the first row never comes (the interrupt reaches
// SQLite inside the statement) and when rows never stop coming.
func TestQueriesStopAtTheDeadline(t *testing.T) {
	db, err := OpenRead(context.Background(), goodIndex(t), ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		endless + "SELECT n FROM r ORDER BY n DESC LIMIT 1", // no first row
		endless + "SELECT n FROM r",                         // no last row
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		done := make(chan error, 1)
		go func() {
			rows, err := db.db.QueryContext(ctx, q)
			if err == nil {
				for rows.Next() {
				}
				err = rows.Err()
				rows.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) && (err == nil || !strings.Contains(err.Error(), "interrupt")) {
				t.Errorf("%s: %v, want the deadline", q, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: not interrupted", q)
		}
		cancel()
	}
	// And every query method takes the context.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := db.List(ctx, ListOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("List: %v", err)
	}
	if _, err := db.Search(ctx, "otters", 5); !errors.Is(err, context.Canceled) {
		t.Errorf("Search: %v", err)
	}
	if _, err := db.All(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("All: %v", err)
	}
	if _, err := db.Stored(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Fingerprints: %v", err)
	}
	if _, err := db.Skipped(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Skipped: %v", err)
	}
	if _, err := OpenRead(ctx, goodIndex(t), ReadOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("OpenRead: %v", err)
	}
}

// TestOpenRefusesLinks: metadata.db, its -wal or its -shm as a symbolic
// link or a FIFO is refused, and nothing is read through it.
func TestOpenRefusesLinks(t *testing.T) {
	good := goodIndex(t)
	for _, suffix := range []string{"", "-wal", "-shm"} {
		dir := t.TempDir()
		p := filepath.Join(dir, "metadata.db")
		if suffix != "" {
			data, _ := os.ReadFile(good)
			os.WriteFile(p, data, 0o600)
		}
		if err := os.Symlink(good+suffix, p+suffix); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(p); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("Open with %s a link: %v", "metadata.db"+suffix, err)
		}
		if _, err := OpenRead(context.Background(), p, ReadOptions{}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Errorf("OpenRead with %s a link: %v", "metadata.db"+suffix, err)
		}
	}
}
