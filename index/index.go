// Package index is metadata.db: the SQLite index of conversations, sessions,
// turns and message text that speeds up listing and searching. It is derived
// data: reindex rebuilds every row from the logs, and the runtime keeps it
// current through the store's IndexKeeper (reindex.Keeper).
//
// A database is used only after its schema is checked to be exactly this
// package's, else it is ErrSchema, as if absent. Writers open it with Open;
// readers with OpenRead, which writes nothing and works on a read-only file
// system too. Every query takes a context whose cancellation interrupts
// SQLite.
//
// Create makes a new database for one bulk load, made durable by Finish.
// DB.Begin returns a Writer whose Put, Remove and Skip change rows in one
// transaction until Commit; List, Search, One and Totals read.
package index

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"

	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/termtext"
)

// SchemaVersion is PRAGMA user_version; another gives a *VersionError.
const SchemaVersion = 4

// ErrSchema is wrapped when a file is not an index of this schema version.
var ErrSchema = errors.New("not a convkit index of this schema version")

// ErrNotIndexed is wrapped when a conversation has no row in the index.
var ErrNotIndexed = errors.New("not in the index")

// ErrLocked is wrapped when another process holds the index locked past the
// busy timeout; the index is not damaged, so nothing is rebuilt.
var ErrLocked = errors.New("locked by another process")

// IsLocked reports SQLite's answer to another process's lock, or ErrLocked.
func IsLocked(err error) bool {
	c := sqliteCode(err)
	return errors.Is(err, ErrLocked) || c == 5 || c == 6 // SQLITE_BUSY, SQLITE_LOCKED
}

// sqliteCode is the primary result code of SQLite's error in err, else -1.
func sqliteCode(err error) int {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return -1
	}
	return se.Code() & 0xff
}

// UpdateAdvice says how to update an index that err kept from being updated.
func UpdateAdvice(err error) string {
	if IsLocked(err) {
		return "convkit reindex --incremental once the other process is done"
	}
	return "convkit reindex"
}

// VersionError is another schema version (an older one is stale, not damaged).
type VersionError struct {
	Found, Want int
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("%v: found schema version %d, want %d", ErrSchema, e.Found, e.Want)
}

func (e *VersionError) Unwrap() error { return ErrSchema }

// Older reports an index written by an older convkit.
func (e *VersionError) Older() bool { return e.Found < e.Want }

const schema = `
CREATE TABLE conversations (
	id TEXT PRIMARY KEY,
	dir TEXT NOT NULL,
	title TEXT NOT NULL,
	title_is_auto INTEGER NOT NULL,
	cwd TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	archived INTEGER NOT NULL,
	forked_from TEXT NOT NULL,
	after_compaction INTEGER NOT NULL,
	agents TEXT NOT NULL,
	models TEXT NOT NULL,
	running_turn INTEGER NOT NULL,
	session_count INTEGER NOT NULL,
	turn_count INTEGER NOT NULL,
	fingerprint TEXT NOT NULL,
	will_not_open TEXT NOT NULL,
	fork_sources TEXT NOT NULL,
	log_identity TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX conversations_by_updated ON conversations(archived, updated_at DESC, id);
CREATE TABLE sessions (
	conversation_id TEXT NOT NULL,
	id TEXT NOT NULL,
	parent_session TEXT NOT NULL,
	agent TEXT NOT NULL,
	model TEXT NOT NULL,
	format_version INTEGER NOT NULL,
	event_count INTEGER NOT NULL,
	bytes INTEGER NOT NULL,
	file TEXT NOT NULL,
	PRIMARY KEY (conversation_id, id)
) WITHOUT ROWID;
CREATE TABLE turns (
	conversation_id TEXT NOT NULL,
	session_id TEXT NOT NULL,
	turn INTEGER NOT NULL,
	started_at INTEGER NOT NULL,
	ended_at INTEGER NOT NULL,
	outcome TEXT NOT NULL,
	PRIMARY KEY (conversation_id, session_id, turn)
) WITHOUT ROWID;
CREATE TABLE skipped (
	id TEXT PRIMARY KEY,
	dir TEXT NOT NULL,
	fingerprint TEXT NOT NULL,
	reason TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE message_rows (
	conversation_id TEXT NOT NULL,
	fts_rowid INTEGER NOT NULL,
	PRIMARY KEY (conversation_id, fts_rowid)
) WITHOUT ROWID;
CREATE VIRTUAL TABLE messages USING fts5(
	conversation_id UNINDEXED, session_id UNINDEXED, seq UNINDEXED, role UNINDEXED, text,
	tokenize = 'unicode61'
);
`

// Conversation is one conversation's rows.
type Conversation struct {
	ID              string   `json:"id"`
	Dir             string   `json:"dir"`
	Title           string   `json:"title"`
	TitleIsAuto     bool     `json:"titleIsAuto"`
	Cwd             string   `json:"cwd"`
	CreatedAt       int64    `json:"createdAt"` // Unix ms
	UpdatedAt       int64    `json:"updatedAt"` // Unix ms
	Archived        bool     `json:"archived"`
	ForkedFrom      string   `json:"forkedFrom"`
	AfterCompaction bool     `json:"afterCompaction"`
	Agents          []string `json:"agents"`
	Models          []string `json:"models"`
	RunningTurn     bool     `json:"runningTurn"`
	Fingerprint     string   `json:"fingerprint"`
	WillNotOpen     []string `json:"willNotOpen"` // as checked when written
	ForkSources     []string `json:"forkSources"` // store.Dependencies, sorted
	// LogIdentity is the conversation log's part of Fingerprint (listing).
	LogIdentity string    `json:"logIdentity"`
	Sessions    []Session `json:"sessions"`
	Turns       []Turn    `json:"turns"`
}

// Session is one session log.
type Session struct {
	ID            string `json:"id"`
	ParentSession string `json:"parentSession"`
	Agent         string `json:"agent"`
	Model         string `json:"model"`
	FormatVersion int    `json:"formatVersion"`
	Events        int64  `json:"events"`
	Bytes         int64  `json:"bytes"`
	File          string `json:"file"`
}

// Turn is one turn; EndedAt is 0 and Outcome "" while it runs.
type Turn struct {
	SessionID string `json:"sessionId"`
	Turn      int64  `json:"turn"`
	StartedAt int64  `json:"startedAt"`
	EndedAt   int64  `json:"endedAt"`
	Outcome   string `json:"outcome"`
}

// Message is the searchable text of one message.
type Message struct {
	SessionID string
	Seq       int64
	Role      string
	Text      string
}

// DB is an open index.
type DB struct {
	db      *sql.DB
	path    string
	fresh   bool   // created by Create and not yet written: bulk load
	mode    string // how OpenRead read it (test only)
	wb      *writeback
	cleanup func() // removes a private snapshot
}

// dsn puts the pragmas in the connection string, for every pooled connection.
func dsn(path string, pragmas ...string) string {
	q := url.Values{}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

var runtimePragmas = []string{"busy_timeout(5000)", "trusted_schema(0)", "journal_mode(WAL)", "synchronous(NORMAL)"}

// Open opens an existing index for reading and writing: a missing file gives
// fs.ErrNotExist, anything but a regular file is refused, and a file not of
// exactly this schema gives ErrSchema before any statement touches it.
func Open(path string) (*DB, error) {
	if err := checkFiles(path); err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn(path, runtimePragmas...))
	if err != nil {
		return nil, err
	}
	ctx := context.Background() // the check reads the schema only: a bounded read
	if err := checkSchema(ctx, db); err != nil {
		db.Close()
		return nil, schemaError(ctx, path, err)
	}
	return &DB{db: db, path: path}, nil
}

// Create makes a new index at path for one bulk load (no journal or syncs until Finish).
func Create(path string) (*DB, error) {
	f, err := durable.CreateExcl(path)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open("sqlite", dsn(path, "journal_mode(OFF)", "synchronous(OFF)"))
	if err != nil {
		f.Close()
		return nil, err
	}
	db.SetMaxOpenConns(1) // the bulk load is one transaction anyway
	if _, err := db.Exec(schema + fmt.Sprintf("PRAGMA user_version = %d;", SchemaVersion) + bulkHashSize); err != nil {
		db.Close()
		f.Close()
		return nil, fmt.Errorf("%s: creating the schema: %w", path, err)
	}
	return &DB{db: db, path: path, fresh: true, wb: startWritingBack(f)}, nil
}

// bulkHashSize raises the text FTS5 holds before writing a segment from
// 1 MiB to 16 MiB for a bulk load, since each segment is merged again later
// (a rebuild ran about 10% faster); Finish removes it.
const bulkHashSize = "INSERT INTO messages(messages, rank) VALUES('hashsize', 16777216);"

// writeback starts the kernel writing a bulk load's pages every
// writebackEvery: with synchronous(OFF) the final fsync would wait for all.
type writeback struct {
	f    *os.File
	stop chan struct{}
	done chan struct{}
}

const writebackEvery = 100 * time.Millisecond

func startWritingBack(f *os.File) *writeback {
	wb := &writeback{f: f, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(wb.done)
		t := time.NewTicker(writebackEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				durable.StartWriteback(f, 0, 0)
			case <-wb.stop:
				return
			}
		}
	}()
	return wb
}

// end stops the writeback and closes its descriptor; nil does nothing.
func (wb *writeback) end() {
	if wb == nil {
		return
	}
	close(wb.stop)
	<-wb.done
	wb.f.Close()
}

// Finish makes a bulk-loaded index durable and closes it.
func (d *DB) Finish() error {
	d.wb.end()
	d.wb = nil
	fail := func(step string, err error) error {
		return fmt.Errorf("%s: finishing the bulk load: %s: %w", d.path, step, err)
	}
	if _, err := d.db.Exec("DELETE FROM messages_config WHERE k = 'hashsize'"); err != nil {
		return fail("removing FTS5's hashsize setting", err)
	}
	if _, err := d.db.Exec("PRAGMA journal_mode=WAL"); err != nil {
		return fail("switching to the WAL journal", err)
	}
	if _, err := d.db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		return fail("checkpointing", err)
	}
	if err := d.db.Close(); err != nil {
		return fail("closing", err)
	}
	f, err := durable.OpenRegular(d.path, os.O_RDONLY)
	if err != nil {
		return err // names the file
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fail("fsync", err)
	}
	return nil
}

// Close closes the index (and removes a private snapshot).
func (d *DB) Close() error {
	d.wb.end()
	d.wb = nil
	err := d.db.Close()
	if d.cleanup != nil {
		d.cleanup()
		d.cleanup = nil
	}
	return err
}

// Path is the database file.
func (d *DB) Path() string { return d.path }

// Writer writes in one transaction with prepared statements: one transaction
// per row runs fifty times slower. It writes through the driver's statements
// on conn (exec): database/sql's conversion of the arguments took an eighth
// of the writer's CPU and a tenth of a rebuild's allocations.
type Writer struct {
	conn    *sql.Conn
	tx      *sql.Tx
	queries map[string]*sql.Stmt   // reads, prepared at their first use (query)
	stmts   map[string]driver.Stmt // writes, prepared at their first use (exec)
	// sessions, turns and msgRows insert several rows per statement.
	sessions, turns, msgRows multiInsert
	args                     []any // reused for each statement, as nv
	nv                       []driver.NamedValue
	// fresh: created empty, nothing to remove. lastRow is the last message
	// rowid (-1: not read yet), given explicitly to write message_rows along.
	fresh   bool
	lastRow int64
}

// The columns of the tables Put writes, in the schema's order.
const (
	conversationColumns = `id, dir, title, title_is_auto, cwd, created_at, updated_at, archived, forked_from,
		after_compaction, agents, models, running_turn, session_count, turn_count, fingerprint, will_not_open,
		fork_sources, log_identity`
	sessionColumns = "conversation_id, id, parent_session, agent, model, format_version, event_count, bytes, file"
	turnColumns    = "conversation_id, session_id, turn, started_at, ended_at, outcome"
)

// Begin starts a write transaction.
func (d *DB) Begin(ctx context.Context) (*Writer, error) {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	w := &Writer{conn: conn, tx: tx, queries: map[string]*sql.Stmt{}, stmts: map[string]driver.Stmt{}, fresh: d.fresh, lastRow: -1,
		sessions: multiInsert{cols: 9, head: "INSERT OR FAIL INTO sessions (" + sessionColumns + ") VALUES "},
		turns:    multiInsert{cols: 6, head: "INSERT OR FAIL INTO turns (" + turnColumns + ") VALUES "},
		msgRows:  multiInsert{cols: 2, head: "INSERT OR FAIL INTO message_rows (conversation_id, fts_rowid) VALUES "}}
	if d.fresh {
		w.lastRow = 0
	}
	d.fresh = false
	return w, nil
}

// query is q prepared in the transaction, once.
func (w *Writer) query(ctx context.Context, q string) (*sql.Stmt, error) {
	if s := w.queries[q]; s != nil {
		return s, nil
	}
	s, err := w.tx.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	w.queries[q] = s
	return s, nil
}

// exec runs q, prepared once, with args.
func (w *Writer) exec(ctx context.Context, q string, args ...any) (driver.Result, error) {
	res, _, err := w.execEach(ctx, q, 1, func(a []any, _ int) []any { return append(a, args...) })
	return res, err
}

// execEach runs q, prepared once on the driver's connection, n times; row
// appends the i-th run's arguments (int, int64, bool or string) to args.
// After an error, at is that i.
func (w *Writer) execEach(ctx context.Context, q string, n int, row func(args []any, i int) []any) (res driver.Result, at int, err error) {
	err = w.conn.Raw(func(dc any) error {
		s := w.stmts[q]
		if s == nil {
			var err error
			if s, err = dc.(driver.ConnPrepareContext).PrepareContext(ctx, q); err != nil {
				return err
			}
			w.stmts[q] = s
		}
		ex := s.(driver.StmtExecContext)
		for at = range n {
			args := row(w.args[:0], at)
			nv := w.nv[:0]
			for k, a := range args {
				if v, ok := a.(int); ok {
					a = int64(v)
				}
				nv = append(nv, driver.NamedValue{Ordinal: k + 1, Value: a})
			}
			res, err = ex.ExecContext(ctx, nv)
			clear(args) // the strings are not kept past the conversation
			clear(nv)
			w.args, w.nv = args[:0], nv[:0]
			if err != nil {
				return err
			}
		}
		return nil
	})
	return res, at, err
}

// maxRows is the most rows one statement of a multiInsert carries.
const maxRows = 32

// multiInsert inserts up to maxRows rows per statement, because the driver
// costs as much per statement as SQLite's insert of a row. OR FAIL avoids
// the statement journal that made FTS5 flush at every savepoint; the rows a
// failed statement leaves go with the rollback.
type multiInsert struct {
	head string // "INSERT ... VALUES "
	cols int
	qs   [maxRows + 1]string // the statement of k rows
}

// insert writes n rows into m's table; row appends the values of row i to args.
func (w *Writer) insert(ctx context.Context, m *multiInsert, n int, row func(args []any, i int) []any) error {
	for start := 0; start < n; start += maxRows {
		k := min(maxRows, n-start)
		if m.qs[k] == "" {
			one := "(" + strings.Repeat("?,", m.cols-1) + "?)"
			m.qs[k] = m.head + strings.Repeat(one+",", k-1) + one
		}
		_, _, err := w.execEach(ctx, m.qs[k], 1, func(args []any, _ int) []any {
			for i := start; i < start+k; i++ {
				args = row(args, i)
			}
			return args
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func jsonList(v []string) string {
	if len(v) == 0 {
		return "[]"
	}
	// Printable ASCII names, which json.Marshal writes as they are, skip
	// reflection.
	n := 2
	for _, s := range v {
		for k := 0; k < len(s); k++ {
			if c := s[k]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				b, _ := json.Marshal(v)
				return string(b)
			}
		}
		n += len(s) + 3
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for k, s := range v {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, s...)
		b = append(b, '"')
	}
	return string(append(b, ']'))
}

// A Writer runs its statements without ctx's cancellation and checks ctx
// itself, before each call and every checkEvery messages, because the
// driver's per-statement cancellation goroutine cost a quarter of a
// rebuild's CPU.
const checkEvery = 256

// Put replaces c.ID's rows, keeping each session's leading unchanged
// messages (FTS5 is slow to change); after an error, roll back.
func (w *Writer) Put(ctx context.Context, c *Conversation, msgs []Message) error {
	cancel := ctx
	if err := cancel.Err(); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	var sameSessions, sameTurns bool // the rows held are those c has: kept
	if !w.fresh {
		var err error
		if sameSessions, sameTurns, err = w.sameRows(ctx, c); err != nil {
			return fmt.Errorf("read the rows of %s in the index: %w", termtext.Quote(c.ID), err)
		}
		qs := []string{deletes[0], deletes[3]}
		if !sameSessions {
			qs = append(qs, deletes[1])
		}
		if !sameTurns {
			qs = append(qs, deletes[2])
		}
		if err := w.removeRows(ctx, c.ID, qs); err != nil {
			return err
		}
		if msgs, err = w.keepMessages(ctx, c.ID, msgs); err != nil {
			return fmt.Errorf("update the messages of %s in the index: %w", termtext.Quote(c.ID), err)
		}
	}
	if err := w.putConversation(ctx, c, len(c.Sessions), len(c.Turns)); err != nil {
		return fmt.Errorf("index conversation %s: %w", termtext.Quote(c.ID), err)
	}
	if sameSessions {
		c = &Conversation{ID: c.ID, Turns: c.Turns}
	}
	if sameTurns {
		c = &Conversation{ID: c.ID, Sessions: c.Sessions}
	}
	err := w.insert(ctx, &w.sessions, len(c.Sessions), func(args []any, i int) []any {
		s := &c.Sessions[i]
		return append(args, c.ID, s.ID, s.ParentSession, s.Agent, s.Model, s.FormatVersion, s.Events, s.Bytes, s.File)
	})
	if err != nil {
		if a, b, dup := duplicateAt(len(c.Sessions), func(i int) string { return c.Sessions[i].ID }); dup {
			return fmt.Errorf("index session %s of %s: the conversation has it twice (its sessions %d and %d): %w",
				termtext.Quote(c.Sessions[b].ID), termtext.Quote(c.ID), a+1, b+1, err)
		}
		return fmt.Errorf("index the sessions of %s: %w", termtext.Quote(c.ID), err)
	}
	err = w.insert(ctx, &w.turns, len(c.Turns), func(args []any, i int) []any {
		t := &c.Turns[i]
		return append(args, c.ID, t.SessionID, t.Turn, t.StartedAt, t.EndedAt, t.Outcome)
	})
	if err != nil {
		if a, b, dup := duplicateAt(len(c.Turns), func(i int) string { return fmt.Sprintf("%d %s", c.Turns[i].Turn, c.Turns[i].SessionID) }); dup {
			return fmt.Errorf("index turn %d of session %s of %s: the conversation records it twice (its turns %d and %d): %w",
				c.Turns[b].Turn, termtext.Quote(c.Turns[b].SessionID), termtext.Quote(c.ID), a+1, b+1, err)
		}
		return fmt.Errorf("index the turns of %s: %w", termtext.Quote(c.ID), err)
	}
	return w.addMessages(cancel, ctx, c.ID, msgs)
}

// sameRows reports whether the sessions and the turns the index holds of
// c.ID are exactly c's, each table as a set and with a rebuild's column
// types: a rename or a new title leaves them as they were, and rewriting
// them costs statements and pages.
func (w *Writer) sameRows(ctx context.Context, c *Conversation) (sessions, turns bool, err error) {
	var ss []Session
	// A value of another type reads as 0 (its type differs).
	err = w.each(ctx, `SELECT conversation_id, id, parent_session, agent, model, iif(typeof(format_version) = 'integer', format_version, 0),
		iif(typeof(event_count) = 'integer', event_count, 0), iif(typeof(bytes) = 'integer', bytes, 0), file,
		typeof(id) || typeof(parent_session) || typeof(agent) || typeof(model) || typeof(format_version) ||
		typeof(event_count) || typeof(bytes) || typeof(file) FROM sessions WHERE conversation_id = ?`,
		c.ID, func(rows *sql.Rows) error {
			var s Session
			var cid, types string
			err := rows.Scan(&cid, &s.ID, &s.ParentSession, &s.Agent, &s.Model, &s.FormatVersion, &s.Events, &s.Bytes, &s.File, &types)
			if types != "texttexttexttextintegerintegerintegertext" {
				s.ID = "" // never a session's: differs
			}
			ss = append(ss, s)
			return err
		})
	if err != nil {
		return false, false, err
	}
	var ts []Turn
	err = w.each(ctx, `SELECT conversation_id, session_id, iif(typeof(turn) = 'integer', turn, 0),
		iif(typeof(started_at) = 'integer', started_at, 0), iif(typeof(ended_at) = 'integer', ended_at, 0), outcome,
		typeof(session_id) || typeof(turn) || typeof(started_at) || typeof(ended_at) || typeof(outcome)
		FROM turns WHERE conversation_id = ?`, c.ID, func(rows *sql.Rows) error {
		var t Turn
		var cid, types string
		err := rows.Scan(&cid, &t.SessionID, &t.Turn, &t.StartedAt, &t.EndedAt, &t.Outcome, &types)
		if types != "textintegerintegerintegertext" {
			t.Turn = -1 // never a turn's: differs
		}
		ts = append(ts, t)
		return err
	})
	if err != nil {
		return false, false, err
	}
	sessionKey := func(a, b Session) int { return strings.Compare(a.ID, b.ID) }
	turnKey := func(a, b Turn) int {
		return cmp.Or(strings.Compare(a.SessionID, b.SessionID), cmp.Compare(a.Turn, b.Turn))
	}
	return sameSet(ss, c.Sessions, sessionKey), sameSet(ts, c.Turns, turnKey), nil
}

// sameSet reports whether held, rows read from a table keyed by key, are
// exactly want's rows; held is sorted in place.
func sameSet[T comparable](held, want []T, key func(a, b T) int) bool {
	if len(held) != len(want) {
		return false
	}
	slices.SortFunc(held, key)
	sorted := slices.SortedFunc(slices.Values(want), key)
	return slices.Equal(held, sorted)
}

// each runs query q, prepared once, with arg in the transaction.
func (w *Writer) each(ctx context.Context, q string, arg any, scan func(*sql.Rows) error) error {
	s, err := w.query(ctx, q)
	if err != nil {
		return err
	}
	rows, err := s.QueryContext(ctx, arg)
	if err != nil {
		return err
	}
	for rows.Next() {
		if err := scan(rows); err != nil {
			rows.Close()
			return err
		}
	}
	return errors.Join(rows.Err(), rows.Close())
}

var (
	insertConversation = "INSERT INTO conversations (" + conversationColumns + ") VALUES (" + strings.Repeat("?,", 18) + "?)"
	insertMessage      = "INSERT INTO messages (rowid, conversation_id, session_id, seq, role, text) VALUES (?,?,?,?,?,?)"
)

// putConversation inserts c's row of conversations.
func (w *Writer) putConversation(ctx context.Context, c *Conversation, sessions, turns int) error {
	args := append(make([]any, 0, 19), c.ID, c.Dir, c.Title, c.TitleIsAuto, c.Cwd, c.CreatedAt, c.UpdatedAt, c.Archived, c.ForkedFrom,
		c.AfterCompaction, jsonList(c.Agents), jsonList(c.Models), c.RunningTurn, sessions, turns, c.Fingerprint,
		jsonList(c.WillNotOpen), jsonList(c.ForkSources), c.LogIdentity)
	_, err := w.exec(ctx, insertConversation, args...)
	return err
}

// addMessages indexes msgs of conversation id under the rowids after
// lastRow and maps their rows to id; cancel is checked as Put says.
func (w *Writer) addMessages(cancel, ctx context.Context, id string, msgs []Message) error {
	if len(msgs) == 0 {
		return nil
	}
	if w.lastRow < 0 {
		// FTS5 scans in rowid order, so the last row is the first read.
		err := w.tx.QueryRowContext(ctx, "SELECT coalesce((SELECT rowid FROM messages ORDER BY rowid DESC LIMIT 1), 0)").Scan(&w.lastRow)
		if err != nil {
			return fmt.Errorf("index the messages of %s: %w", termtext.Quote(id), err)
		}
	}
	first := w.lastRow + 1
	for start := 0; start < len(msgs); start += checkEvery {
		if start > 0 { // Put checked before the first
			if err := cancel.Err(); err != nil {
				return err
			}
		}
		part := msgs[start:min(start+checkEvery, len(msgs))]
		_, at, err := w.execEach(ctx, insertMessage, len(part), func(args []any, i int) []any {
			m := &part[i]
			return append(args, w.lastRow+1+int64(i), id, m.SessionID, m.Seq, m.Role, m.Text)
		})
		if err != nil {
			return fmt.Errorf("index message %d of %s: %w", part[at].Seq, termtext.Quote(id), err)
		}
		w.lastRow += int64(len(part))
	}
	err := w.insert(ctx, &w.msgRows, len(msgs), func(args []any, i int) []any {
		return append(args, id, first+int64(i))
	})
	if err != nil {
		return fmt.Errorf("index the messages of %s: %w", termtext.Quote(id), err)
	}
	return nil
}

// keepMessages keeps each session's leading rows that equal its first msgs,
// deletes id's other rows, and returns the msgs left to index.
func (w *Writer) keepMessages(ctx context.Context, id string, msgs []Message) ([]Message, error) {
	type session struct {
		msgs   []int // indexes into msgs
		next   int   // of msgs: the next one a row may be
		broken bool  // a row differed: the session's later rows go
	}
	sessions := map[string]*session{}
	for i := range msgs {
		st := sessions[msgs[i].SessionID]
		if st == nil {
			st = &session{}
			sessions[msgs[i].SessionID] = st
		}
		st.msgs = append(st.msgs, i)
	}
	// LEFT JOIN: a message_rows row whose message is missing is removed too.
	old, err := w.query(ctx, `SELECT r.fts_rowid, m.rowid IS NOT NULL, coalesce(m.session_id, ''), coalesce(m.seq, -1),
		coalesce(m.role, ''), coalesce(m.text, '') FROM message_rows r
		LEFT JOIN messages m ON m.rowid = r.fts_rowid WHERE r.conversation_id = ? ORDER BY r.fts_rowid`)
	if err != nil {
		return nil, err
	}
	rows, err := old.QueryContext(ctx, id)
	if err != nil {
		return nil, err
	}
	kept := make([]bool, len(msgs))
	var (
		drop                  []byte // a JSON array of the rowids to delete
		damaged               bool   // a row's message is missing: the order is not known
		rowid, seq            int64
		present               bool
		sessionID, role, text sql.RawBytes
	)
	for rows.Next() {
		if err := rows.Scan(&rowid, &present, &sessionID, &seq, &role, &text); err != nil {
			rows.Close()
			return nil, err
		}
		damaged = damaged || !present
		if st := sessions[string(sessionID)]; st != nil && !damaged {
			if !st.broken && st.next < len(st.msgs) {
				m := &msgs[st.msgs[st.next]]
				if m.Seq == seq && string(role) == m.Role && string(text) == m.Text {
					kept[st.msgs[st.next]] = true
					st.next++
					continue
				}
			}
			st.broken = true
		}
		if drop == nil {
			drop = append(drop, '[')
		} else {
			drop = append(drop, ',')
		}
		drop = strconv.AppendInt(drop, rowid, 10)
	}
	// The read ends before the deletes write the tables it reads.
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	if drop != nil {
		list := string(append(drop, ']'))
		// One statement each: FTS5 flushes its pending terms at every statement.
		if _, err := w.exec(ctx, "DELETE FROM messages WHERE rowid IN (SELECT value FROM json_each(?))", list); err != nil {
			return nil, err
		}
		q := "DELETE FROM message_rows WHERE conversation_id = ? AND fts_rowid IN (SELECT value FROM json_each(?))"
		if _, err := w.exec(ctx, q, id, list); err != nil {
			return nil, err
		}
	}
	var rest []Message
	for i := range msgs {
		if !kept[i] {
			rest = append(rest, msgs[i])
		}
	}
	return rest, nil
}

// duplicateAt finds the first of n keys that repeats an earlier one, and
// that one: SQLite names the row that broke a primary key by its columns only.
func duplicateAt(n int, key func(i int) string) (first, again int, ok bool) {
	seen := make(map[string]int, n)
	for i := range n {
		k := key(i)
		if j, dup := seen[k]; dup {
			return j, i, true
		}
		seen[k] = i
	}
	return 0, 0, false
}

// Remove deletes every row of a conversation.
func (w *Writer) Remove(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return w.removeRows(context.WithoutCancel(ctx), id, deletes)
}

// deletes remove a conversation's rows, its messages last (Put keeps some);
// FTS5 cannot look up an unindexed column, so message_rows maps a
// conversation to its rows.
var deletes = []string{"DELETE FROM conversations WHERE id = ?", "DELETE FROM sessions WHERE conversation_id = ?",
	"DELETE FROM turns WHERE conversation_id = ?", "DELETE FROM skipped WHERE id = ?",
	"DELETE FROM messages WHERE rowid IN (SELECT fts_rowid FROM message_rows WHERE conversation_id = ?)",
	"DELETE FROM message_rows WHERE conversation_id = ?"}

// removeRows runs each of qs, a delete of a conversation's rows, for id.
func (w *Writer) removeRows(ctx context.Context, id string, qs []string) error {
	for _, q := range qs {
		if _, err := w.exec(ctx, q, id); err != nil {
			return fmt.Errorf("remove %s from the index: %w", termtext.Quote(id), err)
		}
	}
	return nil
}

// SetWillNotOpen replaces why conversation id will not open here.
func (w *Writer) SetWillNotOpen(ctx context.Context, id string, reasons []string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if _, err := w.exec(context.WithoutCancel(ctx), "UPDATE conversations SET will_not_open = ? WHERE id = ?", jsonList(reasons), id); err != nil {
		return fmt.Errorf("index %s: %w", termtext.Quote(id), err)
	}
	return nil
}

// Skip records a conversation that could not be indexed, and why.
func (w *Writer) Skip(ctx context.Context, id, dir, fingerprint, reason string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	if !w.fresh {
		if err := w.Remove(ctx, id); err != nil {
			return err
		}
	}
	if _, err := w.exec(ctx, "INSERT INTO skipped (id, dir, fingerprint, reason) VALUES (?,?,?,?)", id, dir, fingerprint, reason); err != nil {
		return fmt.Errorf("record skipped %s in the index: %w", termtext.Quote(id), err)
	}
	return nil
}

// Commit ends the transaction.
func (w *Writer) Commit() error { return w.end(w.tx.Commit) }

// Rollback abandons the transaction.
func (w *Writer) Rollback() error { return w.end(w.tx.Rollback) }

// end ends the transaction with fn, closing the statements and conn.
func (w *Writer) end(fn func() error) error {
	err := w.conn.Raw(func(any) error {
		var errs []error
		for _, s := range w.stmts {
			errs = append(errs, s.Close())
		}
		return errors.Join(errs...)
	})
	w.stmts = nil
	return errors.Join(err, fn(), w.conn.Close())
}

// Delete removes a conversation's rows in its own transaction.
func (d *DB) Delete(ctx context.Context, id string) error {
	w, err := d.Begin(ctx)
	if err != nil {
		return err
	}
	if err := w.Remove(ctx, id); err != nil {
		w.Rollback()
		return err
	}
	return w.Commit()
}

// ListOptions select conversations for List.
type ListOptions struct {
	Archived    bool // list archived conversations instead of the others
	All         bool // list both
	Limit       int  // 0: no limit
	WillNotOpen bool // only the conversations that will not open here
}

// Summary is one row of List.
type Summary struct {
	ID          string   `json:"id"`
	Title       string   `json:"title"`
	UpdatedAt   int64    `json:"updatedAt"`
	CreatedAt   int64    `json:"createdAt"`
	Archived    bool     `json:"archived"`
	ForkedFrom  string   `json:"forkedFrom"`
	Cwd         string   `json:"cwd"`
	Sessions    int      `json:"sessions"`
	Turns       int      `json:"turns"`
	RunningTurn bool     `json:"runningTurn"`
	WillNotOpen []string `json:"willNotOpen"`
}

// List returns conversations, newest first, through the updated_at index.
func (d *DB) List(ctx context.Context, o ListOptions) ([]Summary, error) {
	var where []string
	var args []any
	if !o.All {
		where = append(where, "c.archived = ?")
		args = append(args, o.Archived)
	}
	if o.WillNotOpen {
		where = append(where, "c.will_not_open != '[]'")
	}
	q := `SELECT c.id, c.title, c.updated_at, c.created_at, c.archived, c.forked_from, c.cwd, c.running_turn,
		c.session_count, c.turn_count, c.will_not_open FROM conversations c`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY c.updated_at DESC, c.id"
	if o.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", o.Limit)
	}
	out := []Summary{}
	err := eachRow(ctx, d.db, q, args, func(rows *sql.Rows) error {
		var s Summary
		var wno string
		err := rows.Scan(&s.ID, &s.Title, &s.UpdatedAt, &s.CreatedAt, &s.Archived, &s.ForkedFrom, &s.Cwd,
			&s.RunningTurn, &s.Sessions, &s.Turns, &wno)
		s.WillNotOpen = stringList(wno)
		out = append(out, s)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachRow runs query q and scans each row; the rows are closed on return.
func eachRow(ctx context.Context, db *sql.DB, q string, args []any, scan func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// All loads every conversation with its sessions and turns.
func (d *DB) All(ctx context.Context) (map[string]*Conversation, error) { return d.all(ctx, "", true) }

// all is the rows of conversation only ("": all), with sessions and turns if rows.
func (d *DB) all(ctx context.Context, only string, rows bool) (map[string]*Conversation, error) {
	where, args := "", []any{}
	if only != "" {
		where, args = " WHERE id = ?", []any{only}
	}
	out := map[string]*Conversation{}
	err := eachRow(ctx, d.db, "SELECT "+conversationColumns+" FROM conversations"+where, args, func(r *sql.Rows) error {
		c := &Conversation{}
		var agents, models, wno, sources string
		var count int
		if err := r.Scan(&c.ID, &c.Dir, &c.Title, &c.TitleIsAuto, &c.Cwd, &c.CreatedAt, &c.UpdatedAt, &c.Archived, &c.ForkedFrom,
			&c.AfterCompaction, &agents, &models, &c.RunningTurn, &count, &count, &c.Fingerprint, &wno, &sources, &c.LogIdentity); err != nil {
			return err
		}
		json.Unmarshal([]byte(agents), &c.Agents)
		json.Unmarshal([]byte(models), &c.Models)
		c.WillNotOpen = stringList(wno)
		if sources != "[]" {
			c.ForkSources = stringList(sources)
		}
		out[c.ID] = c
		return nil
	})
	if err != nil || !rows {
		return out, err
	}
	if only != "" {
		where = " WHERE conversation_id = ?"
	}
	err = eachRow(ctx, d.db, "SELECT "+sessionColumns+" FROM sessions"+where+" ORDER BY conversation_id, id", args, func(r *sql.Rows) error {
		var cid string
		var s Session
		err := r.Scan(&cid, &s.ID, &s.ParentSession, &s.Agent, &s.Model, &s.FormatVersion, &s.Events, &s.Bytes, &s.File)
		if c := out[cid]; c != nil && err == nil {
			c.Sessions = append(c.Sessions, s)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	err = eachRow(ctx, d.db, "SELECT "+turnColumns+" FROM turns"+where+" ORDER BY conversation_id, started_at, session_id, turn", args, func(r *sql.Rows) error {
		var cid string
		var t Turn
		err := r.Scan(&cid, &t.SessionID, &t.Turn, &t.StartedAt, &t.EndedAt, &t.Outcome)
		if c := out[cid]; c != nil && err == nil {
			c.Turns = append(c.Turns, t)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Fingerprints loads of the conversations ids that are indexed with
// sessions only their fingerprints and their sessions' files, format
// versions, event counts and sizes: what vouches for their session logs.
func (d *DB) Fingerprints(ctx context.Context, ids []string) (map[string]*Conversation, error) {
	out := map[string]*Conversation{}
	err := eachRow(ctx, d.db, `SELECT c.id, c.fingerprint, s.file, s.format_version, s.event_count, s.bytes
		FROM conversations c JOIN sessions s ON s.conversation_id = c.id
		WHERE c.id IN (SELECT value FROM json_each(?))`, []any{jsonList(ids)}, func(r *sql.Rows) error {
		var id, fp string
		var s Session
		if err := r.Scan(&id, &fp, &s.File, &s.FormatVersion, &s.Events, &s.Bytes); err != nil {
			return err
		}
		if out[id] == nil {
			out[id] = &Conversation{ID: id, Fingerprint: fp}
		}
		out[id].Sessions = append(out[id].Sessions, s)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Hit is one search result.
type Hit struct {
	ConversationID string  `json:"conversationId"`
	Title          string  `json:"title"`
	SessionID      string  `json:"sessionId"`
	Seq            int64   `json:"seq"`
	Role           string  `json:"role"`
	Snippet        string  `json:"snippet"`
	Rank           float64 `json:"rank"`
}

// Search finds messages matching an FTS5 query, best first.
func (d *DB) Search(ctx context.Context, query string, limit int) ([]Hit, error) {
	if limit <= 0 {
		limit = 50
	}
	out := []Hit{}
	err := eachRow(ctx, d.db, `SELECT m.conversation_id, coalesce(c.title, ''), m.session_id, m.seq, m.role,
		snippet(messages, 4, '[', ']', '…', 12), bm25(messages)
		FROM messages m LEFT JOIN conversations c ON c.id = m.conversation_id
		WHERE messages MATCH ? ORDER BY bm25(messages) LIMIT ?`, []any{query, limit}, func(r *sql.Rows) error {
		var h Hit
		err := r.Scan(&h.ConversationID, &h.Title, &h.SessionID, &h.Seq, &h.Role, &h.Snippet, &h.Rank)
		out = append(out, h)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("search %s: %w", termtext.Quote(query), err)
	}
	return out, nil
}

// Stored is one conversation's row without its sessions and turns.
type Stored struct {
	Conversation
	// Skipped: a row of the skipped table (only ID and Fingerprint are set).
	Skipped bool
}

// Stored maps every indexed or skipped conversation to what the index holds.
func (d *DB) Stored(ctx context.Context) (map[string]*Stored, error) {
	convs, err := d.all(ctx, "", false)
	if err != nil {
		return nil, err
	}
	skipped, err := d.Skipped(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*Stored, len(convs)+len(skipped))
	for id, c := range convs {
		out[id] = &Stored{Conversation: *c}
	}
	for _, r := range skipped {
		out[r.ID] = &Stored{Conversation: Conversation{ID: r.ID, Fingerprint: r.Fingerprint}, Skipped: true}
	}
	return out, nil
}

// Totals counts what the index holds.
type Totals struct {
	Conversations, Sessions, Turns, Messages int
}

// Totals counts the rows of the index.
func (d *DB) Totals(ctx context.Context) (Totals, error) {
	var t Totals
	err := d.db.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(session_count), 0), coalesce(sum(turn_count), 0),
		(SELECT count(*) FROM message_rows) FROM conversations`).Scan(&t.Conversations, &t.Sessions, &t.Turns, &t.Messages)
	return t, err
}

// MessageDigest sums up one conversation's messages in any order.
type MessageDigest struct {
	Count int
	Sum   uint64
}

// Add counts one message.
func (d *MessageDigest) Add(m Message) {
	h := sha256.New()
	var num [8]byte
	binary.LittleEndian.PutUint64(num[:], uint64(m.Seq))
	for _, part := range []string{m.SessionID, string(num[:]), m.Role, m.Text} {
		binary.LittleEndian.PutUint64(num[:], uint64(len(part)))
		h.Write(num[:])
		h.Write([]byte(part))
	}
	var sum [sha256.Size]byte
	d.Count++
	d.Sum += binary.LittleEndian.Uint64(h.Sum(sum[:0]))
}

// MessageDigests sums up the messages of conversation only ("": of every one).
func (d *DB) MessageDigests(ctx context.Context, only string) (map[string]MessageDigest, error) {
	where, args := "", []any{}
	if only != "" {
		where, args = " WHERE r.conversation_id = ?", []any{only}
	}
	out := map[string]MessageDigest{}
	err := eachRow(ctx, d.db, `SELECT r.conversation_id, m.session_id, m.seq, m.role, m.text
		FROM message_rows r JOIN messages m ON m.rowid = r.fts_rowid`+where, args, func(rows *sql.Rows) error {
		var id string
		var m Message
		if err := rows.Scan(&id, &m.SessionID, &m.Seq, &m.Role, &m.Text); err != nil {
			return err
		}
		dg := out[id]
		dg.Add(m)
		out[id] = dg
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// stringList decodes a JSON list of strings; anything else reads as empty.
func stringList(s string) []string {
	out := []string{}
	if s != "[]" {
		json.Unmarshal([]byte(s), &out)
	}
	if out == nil {
		out = []string{}
	}
	return out
}

// SkippedRow is a conversation the last reindex could not index.
type SkippedRow struct {
	ID          string `json:"id"`
	Dir         string `json:"dir"`
	Reason      string `json:"reason"`
	Fingerprint string `json:"-"`
}

// Skipped lists the conversations the last reindex could not index.
func (d *DB) Skipped(ctx context.Context) ([]SkippedRow, error) {
	out := []SkippedRow{}
	err := eachRow(ctx, d.db, "SELECT id, dir, reason, fingerprint FROM skipped ORDER BY id", nil, func(rows *sql.Rows) error {
		var r SkippedRow
		err := rows.Scan(&r.ID, &r.Dir, &r.Reason, &r.Fingerprint)
		out = append(out, r)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Advance writes c's row, the sessions and turns c holds and msgs, the
// messages appended since, in time that does not grow with the conversation;
// without a row, an error wraps ErrNotIndexed.
func (w *Writer) Advance(ctx context.Context, c *Conversation, sessionCount, turnCount int, msgs []Message) error {
	cancel := ctx
	if err := ctx.Err(); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	r, err := w.exec(ctx, "DELETE FROM conversations WHERE id = ?", c.ID)
	var n int64
	if err == nil {
		n, err = r.RowsAffected()
	}
	if err == nil && n != 1 {
		err = ErrNotIndexed
	}
	if err == nil {
		err = w.putConversation(ctx, c, sessionCount, turnCount)
	}
	if err != nil {
		return fmt.Errorf("update conversation %s: %w", termtext.Quote(c.ID), err)
	}
	for _, s := range c.Sessions {
		// A session indexed keeps its parent, agent and model (its log's
		// header and session/started do not change); a new one gets them.
		_, err := w.exec(ctx, "INSERT INTO sessions ("+sessionColumns+`) VALUES (?,?,?,?,?,?,?,?,?)
			ON CONFLICT DO UPDATE SET format_version = excluded.format_version, event_count = excluded.event_count,
			bytes = excluded.bytes, file = excluded.file`,
			c.ID, s.ID, s.ParentSession, s.Agent, s.Model, s.FormatVersion, s.Events, s.Bytes, s.File)
		if err != nil {
			return fmt.Errorf("update session %s of %s: %w", termtext.Quote(s.ID), termtext.Quote(c.ID), err)
		}
	}
	for _, t := range c.Turns {
		_, err := w.exec(ctx, "INSERT OR REPLACE INTO turns ("+turnColumns+") VALUES (?,?,?,?,?,?)",
			c.ID, t.SessionID, t.Turn, t.StartedAt, t.EndedAt, t.Outcome)
		if err != nil {
			return fmt.Errorf("update turn %d of %s: %w", t.Turn, termtext.Quote(c.ID), err)
		}
	}
	return w.addMessages(cancel, ctx, c.ID, msgs)
}

// One reads conversation id's rows; nil when it has none.
func (d *DB) One(ctx context.Context, id string) (*Conversation, error) {
	all, err := d.all(ctx, id, true)
	return all[id], err
}
