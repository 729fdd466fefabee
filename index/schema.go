package index

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/convkit/convkit/internal/termtext"
)

// Anyone who can write the data directory can replace metadata.db, and SQLite
// runs what its schema says (a view's query, a trigger), so the schema is
// checked before any query: exactly the objects created above with the same
// types and columns, nothing else but SQLite's own, and user_version
// SchemaVersion; a file that fails is ErrSchema, as if absent.

// object is one row of sqlite_master, with what the check compares.
type object struct {
	typ, name, table string
	virtual          bool
	sql              string
	columns          []string // tables: name type notnull pk hidden; indexes: the index_xinfo rows
}

// maxObjects bounds the rows of sqlite_master read: the schema has a dozen.
const maxObjects = 200

var (
	wantOnce    sync.Once
	wantObjects map[string]object
	wantErr     error
)

// expected is the schema as SQLite records it, read from an in-memory
// database made with the schema: the check follows the schema text.
func expected() (map[string]object, error) {
	wantOnce.Do(func() {
		db, err := sql.Open("sqlite", "file::memory:")
		if err != nil {
			wantErr = err
			return
		}
		defer db.Close()
		db.SetMaxOpenConns(1)
		ctx := context.Background()
		if _, err := db.ExecContext(ctx, schema); err != nil {
			wantErr = err
			return
		}
		objs, err := readObjects(ctx, db)
		if err == nil {
			err = readColumns(ctx, db, objs)
		}
		wantObjects, wantErr = objs, err
	})
	return wantObjects, wantErr
}

// readObjects reads sqlite_master. Reading it runs nothing: a view's
// query runs only when the view is queried.
func readObjects(ctx context.Context, db *sql.DB) (map[string]object, error) {
	rows, err := db.QueryContext(ctx, "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master LIMIT ?", maxObjects+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	objs := map[string]object{}
	for rows.Next() {
		var o object
		if err := rows.Scan(&o.typ, &o.name, &o.table, &o.sql); err != nil {
			return nil, err
		}
		o.virtual = strings.HasPrefix(strings.ToUpper(o.sql), "CREATE VIRTUAL TABLE")
		if len(objs) == maxObjects {
			return nil, fmt.Errorf("more than %d schema objects", maxObjects)
		}
		objs[o.name] = o
	}
	return objs, rows.Err()
}

// ftsShadow reports whether name is one of the tables FTS5 keeps for the
// search table: their layout belongs to SQLite's FTS5 version, so only
// their being plain tables is checked.
func ftsShadow(name string) bool {
	return strings.HasPrefix(name, "messages_")
}

// sqliteInternal reports whether an object is SQLite's own: statistics
// tables, automatic indexes.
func sqliteInternal(o object) bool {
	return strings.HasPrefix(o.name, "sqlite_") && (o.typ == "table" || o.typ == "index") && !o.virtual
}

// readColumns fills in the columns of the tables and indexes that are
// compared column by column.
func readColumns(ctx context.Context, db *sql.DB, objs map[string]object) error {
	for name, o := range objs {
		var q string
		switch {
		case o.typ == "table" && !ftsShadow(name) && !sqliteInternal(o):
			q = `SELECT name || ' ' || type || ' ' || "notnull" || ' ' || pk || ' ' || hidden FROM pragma_table_xinfo(?)`
		case o.typ == "index" && !sqliteInternal(o):
			q = `SELECT seqno || ' ' || cid || ' ' || coalesce(name, '') || ' ' || "desc" || ' ' || coll || ' ' || "key" FROM pragma_index_xinfo(?)`
		default:
			continue
		}
		rows, err := db.QueryContext(ctx, q, name)
		if err != nil {
			return fmt.Errorf("the columns of %s: %w", name, err)
		}
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				rows.Close()
				return err
			}
			o.columns = append(o.columns, c)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return fmt.Errorf("the columns of %s: %w", name, err)
		}
		objs[name] = o
	}
	return nil
}

// checkSchema checks db's schema and user_version against this package's.
// The error says what is wrong; the caller wraps it in ErrSchema.
func checkSchema(ctx context.Context, db *sql.DB) error {
	want, err := expected()
	if err != nil {
		return fmt.Errorf("the expected schema: %w", err)
	}
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if v != SchemaVersion {
		return &VersionError{Found: v, Want: SchemaVersion}
	}
	got, err := readObjects(ctx, db)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(got))
	for n := range got {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		g := got[n]
		w, ok := want[n]
		switch {
		case g.typ == "view" || g.typ == "trigger":
			return fmt.Errorf("%s %s is not part of the schema (an index holds no views or triggers)", g.typ, termtext.Quote(n))
		case !ok && sqliteInternal(g):
		case !ok:
			return fmt.Errorf("%s %s is not part of the schema", g.typ, termtext.Quote(n))
		case g.typ != w.typ:
			return fmt.Errorf("%s is a %s, not a %s", termtext.Quote(n), g.typ, w.typ)
		case g.virtual != w.virtual:
			return fmt.Errorf("%s is %s", termtext.Quote(n), map[bool]string{true: "a virtual table, not a table", false: "a table, not an FTS5 table"}[g.virtual])
		case g.virtual && !strings.Contains(strings.ToLower(g.sql), "using fts5("):
			return fmt.Errorf("%s is not an FTS5 table", termtext.Quote(n))
		case g.table != w.table:
			return fmt.Errorf("%s %s belongs to %s, not %s", g.typ, termtext.Quote(n), termtext.Quote(g.table), termtext.Quote(w.table))
		}
	}
	for n, w := range want {
		if _, ok := got[n]; !ok {
			return fmt.Errorf("%s %s is missing", w.typ, termtext.Quote(n))
		}
	}
	// Only now, with every object of the right kind, are the columns read
	// (pragma_table_xinfo connects the FTS5 table).
	if err := readColumns(ctx, db, got); err != nil {
		return err
	}
	for _, n := range names {
		g, w := got[n], want[n]
		if !slices.Equal(g.columns, w.columns) {
			return fmt.Errorf("%s %s has the columns [%s], want [%s]", g.typ, termtext.Quote(n), strings.Join(g.columns, ", "), strings.Join(w.columns, ", "))
		}
	}
	return nil
}
