package index

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/termtext"
)

// Anyone who can write the data directory can replace metadata.db, and SQLite
// runs what its schema says (a view's query, a trigger), so before any query
// the schema must be exactly this package's, with nothing else but SQLite's own.

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

// expected is the schema as SQLite records it, from an in-memory database.
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

// readObjects reads sqlite_master, which runs nothing of the schema.
func readObjects(ctx context.Context, db *sql.DB) (map[string]object, error) {
	objs := map[string]object{}
	err := eachRow(ctx, db, "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master LIMIT ?", []any{maxObjects + 1}, func(rows *sql.Rows) error {
		var o object
		if err := rows.Scan(&o.typ, &o.name, &o.table, &o.sql); err != nil {
			return err
		}
		o.virtual = strings.HasPrefix(strings.ToUpper(o.sql), "CREATE VIRTUAL TABLE")
		if len(objs) == maxObjects {
			return fmt.Errorf("more than %d schema objects", maxObjects)
		}
		objs[o.name] = o
		return nil
	})
	if err != nil {
		return nil, err
	}
	return objs, nil
}

// sqliteInternal reports SQLite's own objects (statistics, automatic indexes).
func sqliteInternal(o object) bool {
	return strings.HasPrefix(o.name, "sqlite_") && (o.typ == "table" || o.typ == "index") && !o.virtual
}

// readColumns fills in the columns of the tables and indexes compared.
func readColumns(ctx context.Context, db *sql.DB, objs map[string]object) error {
	for name, o := range objs {
		var q string
		switch {
		// FTS5's own tables of messages belong to SQLite's FTS5 version: only
		// their being plain tables is checked.
		case o.typ == "table" && !strings.HasPrefix(name, "messages_") && !sqliteInternal(o):
			q = `SELECT name || ' ' || type || ' ' || "notnull" || ' ' || pk || ' ' || hidden FROM pragma_table_xinfo(?)`
		case o.typ == "index" && !sqliteInternal(o):
			q = `SELECT seqno || ' ' || cid || ' ' || coalesce(name, '') || ' ' || "desc" || ' ' || coll || ' ' || "key" FROM pragma_index_xinfo(?)`
		default:
			continue
		}
		err := eachRow(ctx, db, q, []any{name}, func(rows *sql.Rows) error {
			var c string
			err := rows.Scan(&c)
			o.columns = append(o.columns, c)
			return err
		})
		if err != nil {
			return fmt.Errorf("the columns of %s: %w", name, err)
		}
		objs[name] = o
	}
	return nil
}

// checkSchema says what is wrong with db's schema and user_version.
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
	names := slices.Sorted(maps.Keys(got))
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

// OpenRead must read metadata.db, a WAL database, without writing, but a WAL
// reader needs the -shm file, which a read-only file system cannot hold. So
// it reads in place with query_only, as every WAL reader (blocking no
// writer); else, on a read-only file system with no write-ahead log pending,
// in place with immutable=1; else a private snapshot, removed on Close.
const (
	modeInPlace   = "read-only"
	modeImmutable = "immutable"
	modeSnapshot  = "snapshot"
)

// ReadOptions configure OpenRead.
type ReadOptions struct {
	TempDir string // where a snapshot is made (default os.TempDir())
}

// OpenRead opens an index read-only, on a read-only file system too, checked
// as Open does; ctx bounds the check and a snapshot's copy.
func OpenRead(ctx context.Context, path string, o ReadOptions) (*DB, error) {
	db, mode, cleanup, err := openReadOnly(ctx, path, o, readPragmas)
	if err != nil {
		return nil, err
	}
	d := &DB{db: db, path: path, mode: mode, cleanup: cleanup}
	if err := checkSchema(ctx, db); err != nil {
		d.Close()
		return nil, schemaError(ctx, path, err)
	}
	return d, nil
}

// schemaError wraps a failed check in ErrSchema, unless canceled or locked.
func schemaError(ctx context.Context, path string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if IsLocked(err) {
		return fmt.Errorf("%s: %w (%v)", path, ErrLocked, err)
	}
	var ve *VersionError
	if errors.As(err, &ve) {
		return fmt.Errorf("%s: %w", path, ve)
	}
	return fmt.Errorf("%s: %w: %v", path, ErrSchema, err)
}

// VacuumInto writes a consistent copy of the database at src, read as
// OpenRead does, into dst, an empty file the caller has just created; VACUUM
// INTO runs none of the schema. SQLite opens dst by name, so it is checked
// before and after.
func VacuumInto(ctx context.Context, src, dst string, o ReadOptions) error {
	pin, err := durable.OpenRegular(dst, os.O_RDONLY)
	if err != nil {
		return err
	}
	defer pin.Close()
	if fi, err := pin.Stat(); err != nil || fi.Size() != 0 {
		return fmt.Errorf("%s: not the empty file VACUUM INTO needs", dst)
	}
	db, _, cleanup, err := openReadOnly(ctx, src, o, vacuumPragmas)
	if err != nil {
		return err
	}
	defer cleanup()
	defer db.Close()
	if _, err = db.ExecContext(ctx, "VACUUM INTO ?", dst); err != nil {
		return err
	}
	return samePinned(pin, dst)
}

// samePinned checks that path is still the regular file pin was opened on.
func samePinned(pin *os.File, path string) error {
	a, err := pin.Stat()
	if err != nil {
		return err
	}
	b, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !b.Mode().IsRegular() || !os.SameFile(a, b) {
		return fmt.Errorf("%s was replaced while SQLite wrote it", path)
	}
	return nil
}

// readPragmas: readers wait for a checkpoint, trust no schema, write nothing;
// VACUUM INTO writes its target, which query_only refuses.
var (
	readPragmas   = []string{"busy_timeout(5000)", "trusted_schema(0)", "query_only(1)"}
	vacuumPragmas = []string{"busy_timeout(10000)", "trusted_schema(0)"}
)

// openReadOnly opens path by the first of the three ways that works.
func openReadOnly(ctx context.Context, path string, o ReadOptions, pragmas []string) (*sql.DB, string, func(), error) {
	nop := func() {}
	if err := checkFiles(path); err != nil {
		return nil, "", nop, err
	}
	db, err := openProbe(ctx, path, "", pragmas)
	if err == nil {
		return db, modeInPlace, nop, nil
	}
	// SQLITE_CANTOPEN, SQLITE_READONLY (_CANTINIT, _DIRECTORY, ...): what a WAL
	// reader meets where it cannot make the -shm.
	if c := sqliteCode(err); c != 14 && c != 8 {
		return nil, "", nop, schemaError(ctx, path, err)
	}
	// A write-ahead log that holds something, or cannot be read, is pending.
	wal, werr := os.Lstat(path + "-wal")
	if ReadOnlyFS(filepath.Dir(path)) && (errors.Is(werr, os.ErrNotExist) || werr == nil && wal.Size() == 0) {
		db, err2 := openProbe(ctx, path, "mode=ro&immutable=1", pragmas)
		if err2 == nil {
			return db, modeImmutable, nop, nil
		}
		return nil, "", nop, schemaError(ctx, path, err2)
	}
	dir, copyPath, err2 := snapshot(ctx, path, o.TempDir)
	if err2 != nil {
		return nil, "", nop, fmt.Errorf("%s cannot be read in place (%v), and a private copy failed: %w", path, err, err2)
	}
	cleanup := func() { os.RemoveAll(dir) }
	db, err2 = openProbe(ctx, copyPath, "", pragmas)
	if err2 != nil {
		cleanup()
		return nil, "", nop, schemaError(ctx, path, err2)
	}
	return db, modeSnapshot, cleanup, nil
}

// openProbe opens path with params and runs a statement, failing here if it cannot.
func openProbe(ctx context.Context, path, params string, pragmas []string) (*sql.DB, error) {
	q := dsn(path, pragmas...)
	if params != "" {
		q += "&" + params
	}
	db, err := sql.Open("sqlite", q)
	if err != nil {
		return nil, err
	}
	var n int
	if err := db.QueryRowContext(ctx, "PRAGMA schema_version").Scan(&n); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// checkFiles refuses a database, write-ahead log or WAL index that is not a
// regular file, since SQLite would follow a link or block on a FIFO (a race
// to swap one in needs a writer of the 0700 data directory already).
func checkFiles(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w (%s)", path, durable.ErrNotRegular, modeName(fi.Mode()))
	}
	for _, p := range []string{path + "-wal", path + "-shm", path + "-journal"} {
		fi, err := os.Lstat(p)
		if err == nil && !fi.Mode().IsRegular() {
			return fmt.Errorf("%s: %w (%s)", p, durable.ErrNotRegular, modeName(fi.Mode()))
		}
	}
	return nil
}

func modeName(m os.FileMode) string {
	if m&os.ModeSymlink != 0 {
		return "a symbolic link; links are never followed"
	}
	return durable.Kind(m)
}

// snapshot copies the database and its WAL into a new private dir under tmpDir.
func snapshot(ctx context.Context, path, tmpDir string) (string, string, error) {
	if tmpDir == "" {
		tmpDir = os.TempDir()
	}
	dir, err := os.MkdirTemp(tmpDir, "convkit-index-")
	if err != nil {
		return "", "", err
	}
	if err := durable.PrivateDir(dir); err != nil {
		os.RemoveAll(dir)
		return "", "", err
	}
	dst := filepath.Join(dir, filepath.Base(path))
	for _, suffix := range []string{"", "-wal"} {
		err := copyFile(ctx, path+suffix, dst+suffix)
		if suffix != "" && errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			os.RemoveAll(dir)
			return "", "", err
		}
	}
	return dir, dst, nil
}

func copyFile(ctx context.Context, src, dst string) error {
	in, err := durable.OpenRegular(src, os.O_RDONLY)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := durable.CreateExcl(dst)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, ctxReader{ctx, in})
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
