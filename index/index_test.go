package index

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func conv(id string, updated int64, archived bool) *Conversation {
	return &Conversation{ID: id, Dir: id, Title: "title " + id, Cwd: "/w", CreatedAt: 1, UpdatedAt: updated,
		Archived: archived, Agents: []string{"coder"}, Models: []string{"m"},
		Sessions: []Session{{ID: "root", Agent: "coder", Model: "m", FormatVersion: 4, Events: 10, Bytes: 100, File: "root.v4.jsonl"}},
		Turns:    []Turn{{SessionID: "root", Turn: 1, StartedAt: 1, EndedAt: 2, Outcome: "completed"}}}
}

func newIndex(t *testing.T) (*DB, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "metadata.db")
	db, err := Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Finish(); err != nil {
		t.Fatal(err)
	}
	db, err = Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, p
}

func TestUpsertListSearch(t *testing.T) {
	ctx := context.Background()
	db, _ := newIndex(t)
	for i, id := range []string{"a", "b", "c", "d"} {
		msgs := []Message{{SessionID: "root", Seq: 1, Role: "user", Text: fmt.Sprintf("message %s about otters", id)}}
		if err := db.Upsert(ctx, conv(id, int64(100+i), id == "c"), msgs); err != nil {
			t.Fatal(err)
		}
	}
	// Upsert replaces, it does not duplicate.
	if err := db.Upsert(ctx, conv("a", 200, false), []Message{{SessionID: "root", Seq: 1, Role: "user", Text: "now about badgers"}}); err != nil {
		t.Fatal(err)
	}
	rows, err := db.List(ctx, ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	if fmt.Sprint(ids) != "[a d b]" || rows[0].Sessions != 1 || rows[0].Turns != 1 {
		t.Fatalf("list = %v (%+v)", ids, rows)
	}
	arch, _ := db.List(ctx, ListOptions{Archived: true})
	if len(arch) != 1 || arch[0].ID != "c" {
		t.Fatalf("archived = %+v", arch)
	}
	page, _ := db.List(ctx, ListOptions{Limit: 2})
	if len(page) != 2 || page[1].ID != "d" {
		t.Fatalf("first page = %+v", page)
	}
	hits, err := db.Search(ctx, "otters", 10)
	if err != nil || len(hits) != 3 {
		t.Fatalf("otters = %+v, %v", hits, err)
	}
	hits, _ = db.Search(ctx, "badgers", 10)
	if len(hits) != 1 || hits[0].ConversationID != "a" || hits[0].Title != "title a" {
		t.Fatalf("badgers = %+v", hits)
	}
	if err := db.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if hits, _ = db.Search(ctx, "badgers", 10); len(hits) != 0 {
		t.Fatalf("deleted conversation still found: %+v", hits)
	}
	all, err := db.All(ctx)
	if err != nil || len(all) != 3 || len(all["b"].Sessions) != 1 || len(all["b"].Turns) != 1 {
		t.Fatalf("all = %+v, %v", all, err)
	}
}

func TestOpenRefusesForeignFiles(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte("definitely not SQLite"), 0o600)
	if _, err := Open(garbage); !errors.Is(err, ErrSchema) {
		t.Fatalf("garbage: err = %v, want ErrSchema", err)
	}
	_, p := newIndex(t)
	other := filepath.Join(dir, "other.db")
	data, _ := os.ReadFile(p)
	os.WriteFile(other, data, 0o600)
	db, err := Open(other)
	if err != nil {
		t.Fatal(err)
	}
	db.db.Exec("PRAGMA user_version = 99")
	db.Close()
	if _, err := Open(other); !errors.Is(err, ErrSchema) {
		t.Fatalf("schema 99: err = %v, want ErrSchema", err)
	}
	if _, err := Open(filepath.Join(dir, "missing.db")); !os.IsNotExist(err) {
		t.Fatalf("missing: err = %v", err)
	}
	if _, err := Create(other); err == nil {
		t.Fatal("Create overwrote an existing file")
	}
}

// BenchmarkListNewest50 measures the newest-50 listing over 100,000
// conversations.
func BenchmarkListNewest50(b *testing.B) {
	ctx := context.Background()
	p := filepath.Join(b.TempDir(), "metadata.db")
	db, err := Create(p)
	if err != nil {
		b.Fatal(err)
	}
	w, _ := db.Begin(ctx)
	for i := 0; i < 100000; i++ {
		c := conv(fmt.Sprintf("c%06d", i), int64(i*7%100000), i%10 == 0)
		if err := w.Put(ctx, c, nil); err != nil {
			b.Fatal(err)
		}
	}
	w.Commit()
	db.Finish()
	db, _ = Open(p)
	defer db.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rows, err := db.List(ctx, ListOptions{Limit: 50})
		if err != nil || len(rows) != 50 {
			b.Fatal(err, len(rows))
		}
	}
}

// BenchmarkBulkInsert measures rows per second of a reindex-style load.
func BenchmarkBulkInsert(b *testing.B) {
	// Cancelable, as the command's context.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		p := filepath.Join(b.TempDir(), fmt.Sprintf("m%d.db", i))
		db, _ := Create(p)
		w, _ := db.Begin(ctx)
		b.StartTimer()
		for j := 0; j < 10000; j++ {
			w.Put(ctx, conv(fmt.Sprintf("c%d", j), int64(j), false), []Message{{SessionID: "root", Seq: 1, Role: "user", Text: "some words to index for search"}})
		}
		w.Commit()
		db.Finish()
	}
}

// bulkLoaded creates the index p and bulk-loads what load puts into it,
// committed but not finished.
func bulkLoaded(t *testing.T, p string, load func(put func(*Conversation, []Message))) *DB {
	t.Helper()
	ctx := context.Background()
	db, err := Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	load(func(c *Conversation, msgs []Message) {
		if err := w.Put(ctx, c, msgs); err != nil {
			t.Fatal(err)
		}
	})
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestBulkLoadMapsMessages: a bulk load maps each message to its
// conversation at the end, as an incremental write does row by row, so
// later deletes and replacements find them.
func TestBulkLoadMapsMessages(t *testing.T) {
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "metadata.db")
	db := bulkLoaded(t, p, func(put func(*Conversation, []Message)) {
		for i, id := range []string{"a", "b", "c"} {
			var msgs []Message
			for j := range i + 2 {
				msgs = append(msgs, Message{SessionID: "root", Seq: int64(j), Role: "user", Text: fmt.Sprintf("%s talks about walruses %d", id, j)})
			}
			put(conv(id, int64(100+i), false), msgs)
		}
		put(conv("quiet", 50, false), nil)
	})
	// The load ran with FTS5's larger pending-text threshold; the index
	// handed over keeps the default (no configuration row).
	hashSize := func() (n int64) {
		t.Helper()
		err := db.db.QueryRow(`SELECT coalesce((SELECT v FROM messages_config WHERE k = 'hashsize'), 0)`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := hashSize(); n != 16<<20 {
		t.Fatalf("hashsize during the bulk load = %d, want %d", n, 16<<20)
	}
	if err := db.Finish(); err != nil {
		t.Fatal(err)
	}
	db, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if n := hashSize(); n != 0 {
		t.Fatalf("hashsize after Finish = %d, want no row", n)
	}
	var bad, rows int
	db.db.QueryRow(`SELECT count(*) FROM message_rows r LEFT JOIN messages m ON m.rowid = r.fts_rowid
		WHERE m.conversation_id IS NOT r.conversation_id`).Scan(&bad)
	db.db.QueryRow(`SELECT count(*) FROM message_rows`).Scan(&rows)
	if bad != 0 || rows != 2+3+4 {
		t.Fatalf("message_rows: %d rows, %d not matching their message", rows, bad)
	}
	if err := db.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := db.Upsert(ctx, conv("c", 300, false), []Message{{SessionID: "root", Seq: 1, Role: "user", Text: "now about seals"}}); err != nil {
		t.Fatal(err)
	}
	hits, err := db.Search(ctx, "walruses", 50)
	if err != nil || len(hits) != 2 || hits[0].ConversationID != "a" || hits[1].ConversationID != "a" {
		t.Fatalf("walruses = %+v, %v", hits, err)
	}
	if hits, _ := db.Search(ctx, "seals", 50); len(hits) != 1 || hits[0].ConversationID != "c" {
		t.Fatalf("seals = %+v", hits)
	}
}

// TestBulkLoadReadBySqlite3: an index loaded with more text than FTS5's
// default pending threshold (bulkHashSize) is read by the sqlite3 tool as
// any other: FTS5's integrity check passes, a search finds every message,
// and no configuration row is left.
func TestBulkLoadReadBySqlite3(t *testing.T) {
	if _, err := exec.LookPath("sqlite3"); err != nil {
		t.Skip("sqlite3 is not installed (.ci/run installs it)")
	}
	p := filepath.Join(t.TempDir(), "metadata.db")
	// 3 MiB of text: past the default's 1 MiB, within the bulk load's.
	filler := strings.Repeat("lorem ipsum dolor ", 1<<10)
	const convs, perConv = 64, 3
	db := bulkLoaded(t, p, func(put func(*Conversation, []Message)) {
		for i := range convs {
			var msgs []Message
			for j := range perConv {
				msgs = append(msgs, Message{SessionID: "root", Seq: int64(j), Role: "user", Text: fmt.Sprintf("walrus%d %s", i, filler)})
			}
			put(conv(fmt.Sprintf("c%02d", i), int64(i), false), msgs)
		}
	})
	if err := db.Finish(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sqlite3", "-bail", p)
	cmd.Stdin = strings.NewReader(`INSERT INTO messages(messages) VALUES('integrity-check');
SELECT count(*) FROM messages_config WHERE k = 'hashsize';
SELECT count(*) FROM messages WHERE messages MATCH 'ipsum';
SELECT count(*) FROM messages WHERE messages MATCH 'walrus7';
`)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sqlite3 %s: %v\n%s", p, err, out)
	}
	if got, want := strings.Fields(string(out)), []string{"0", fmt.Sprint(convs * perConv), fmt.Sprint(perConv)}; !slices.Equal(got, want) {
		t.Fatalf("sqlite3 read %q, want %q (hashsize rows, matches of a common word, of one conversation's)", got, want)
	}
}

func TestJSONListIsMarshal(t *testing.T) {
	for _, v := range [][]string{nil, {}, {"coder"}, {"a", "b c"}, {`q"uote`}, {`back\slash`}, {"<html>&"}, {"é"}, {"\u2028"}, {"tab\t"}, {""}, {"~!@#$%^*()_+{}|:?-=[];',./`"}} {
		want := "[]"
		if v != nil {
			b, _ := json.Marshal(v)
			want = string(b)
		}
		if got := jsonList(v); got != want {
			t.Errorf("jsonList(%q) = %s, want %s", v, got, want)
		}
	}
}

// TestWillNotOpen: the reasons a conversation will not open are stored
// with its row, listed, filtered on, and read back one conversation at a
// time (the runtime's read).
func TestWillNotOpen(t *testing.T) {
	ctx := context.Background()
	db, _ := newIndex(t)
	bad := conv("bad", 300, false)
	bad.WillNotOpen = []string{"working directory /nowhere does not exist here", `model "m" is not configured in /etc/c.toml`}
	for _, c := range []*Conversation{conv("good", 200, false), bad, conv("quiet", 100, true)} {
		if err := db.Upsert(ctx, c, nil); err != nil {
			t.Fatal(err)
		}
	}
	got, err := db.One(ctx, "bad")
	if err != nil || fmt.Sprint(got.WillNotOpen) != fmt.Sprint(bad.WillNotOpen) {
		t.Fatalf("One(bad) = %+v, %v", got, err)
	}
	if got, err := db.One(ctx, "good"); err != nil || got.WillNotOpen == nil || len(got.WillNotOpen) != 0 {
		t.Fatalf("One(good) = %+v, %v; want an empty list", got, err)
	}
	if got, err := db.One(ctx, "gone"); got != nil || err != nil {
		t.Fatalf("One(gone) = %+v, %v, want no row", got, err)
	}
	rows, err := db.List(ctx, ListOptions{All: true, WillNotOpen: true})
	if err != nil || len(rows) != 1 || rows[0].ID != "bad" || len(rows[0].WillNotOpen) != 2 {
		t.Fatalf("List(WillNotOpen) = %+v, %v", rows, err)
	}
	rows, _ = db.List(ctx, ListOptions{All: true})
	if len(rows) != 3 || rows[1].ID != "good" || rows[1].WillNotOpen == nil || len(rows[1].WillNotOpen) != 0 {
		t.Fatalf("List = %+v", rows)
	}
	all, err := db.All(ctx)
	if err != nil || fmt.Sprint(all["bad"].WillNotOpen) != fmt.Sprint(bad.WillNotOpen) {
		t.Fatalf("All: %+v, %v", all["bad"], err)
	}
}

// TestOlderSchema: an index of an older schema version is told apart from
// a damaged one, so that readers can call it stale.
func TestOlderSchema(t *testing.T) {
	_, p := newIndex(t)
	db, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	db.db.Exec(fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion-1))
	db.Close()
	_, err = Open(p)
	var ve *VersionError
	if !errors.As(err, &ve) || !ve.Older() || !errors.Is(err, ErrSchema) {
		t.Fatalf("Open of an older schema: %v", err)
	}
}

// TestBulkLoadEqualsUpserts writes conversations with more sessions, turns
// and messages than one statement of a bulk load carries, once as a bulk
// load and once conversation by conversation, and compares every row.
func TestBulkLoadEqualsUpserts(t *testing.T) {
	ctx := context.Background()
	var convs []*Conversation
	var msgs [][]Message
	for i, n := range []int{0, 1, maxRows, maxRows + 1, 2*maxRows + 5} {
		c := conv(fmt.Sprintf("c%d", i), int64(100+i), false)
		c.Sessions, c.Turns = nil, nil
		var ms []Message
		for k := range n {
			sid := fmt.Sprintf("s%03d", k)
			c.Sessions = append(c.Sessions, Session{ID: sid, ParentSession: "root", Agent: "coder", Model: "m",
				FormatVersion: 4, Events: int64(k), Bytes: int64(10 * k), File: sid + ".v4.jsonl"})
			c.Turns = append(c.Turns, Turn{SessionID: "root", Turn: int64(k + 1), StartedAt: int64(k), EndedAt: int64(k + 1), Outcome: "completed"})
			ms = append(ms, Message{SessionID: sid, Seq: int64(k), Role: "assistant", Text: fmt.Sprintf("narwhal %d of %s", k, c.ID)})
		}
		convs, msgs = append(convs, c), append(msgs, ms)
	}
	bulk := filepath.Join(t.TempDir(), "metadata.db")
	db, err := Create(bulk)
	if err != nil {
		t.Fatal(err)
	}
	w, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range convs {
		if err := w.Put(ctx, c, msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.Finish(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(bulk); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	one, _ := newIndex(t)
	for i, c := range convs {
		if err := one.Upsert(ctx, c, msgs[i]); err != nil {
			t.Fatal(err)
		}
	}
	rows := func(d *DB, q string) []string {
		r, err := d.db.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		cols, _ := r.Columns()
		var out []string
		for r.Next() {
			v := make([]any, len(cols))
			p := make([]any, len(cols))
			for i := range v {
				p[i] = &v[i]
			}
			if err := r.Scan(p...); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprint(v...))
		}
		return out
	}
	for _, q := range []string{
		"SELECT * FROM conversations ORDER BY id",
		"SELECT * FROM sessions ORDER BY conversation_id, id",
		"SELECT * FROM turns ORDER BY conversation_id, session_id, turn",
		"SELECT * FROM message_rows ORDER BY conversation_id, fts_rowid",
		"SELECT rowid, * FROM messages ORDER BY rowid",
	} {
		got, want := rows(db, q), rows(one, q)
		if len(got) != len(want) || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: bulk load %d rows, upserts %d rows:\n%q\n%q", q, len(got), len(want), got, want)
		}
	}
	var n int
	db.db.QueryRow("SELECT count(*) FROM turns").Scan(&n)
	if want := 0 + 1 + maxRows + maxRows + 1 + 2*maxRows + 5; n != want {
		t.Errorf("%d turns, want %d", n, want)
	}
	hits, err := db.Search(ctx, "narwhal", 1000)
	if err != nil || len(hits) != n {
		t.Errorf("search: %d hits, want %d (%v)", len(hits), n, err)
	}
}

// TestPutNamesTheDuplicateRow: a conversation whose sessions or turns
// repeat a primary key fails its Put with an error that names the row,
// not only the conversation, on a new index (rows written several a
// statement) and on an existing one.
func TestPutNamesTheDuplicateRow(t *testing.T) {
	ctx := context.Background()
	dupSession := func() *Conversation {
		c := conv("c", 5, false)
		s := c.Sessions[0]
		s.File = "other.v4.jsonl"
		c.Sessions = append(c.Sessions, Session{ID: "kid", File: "kid.v4.jsonl"}, s)
		return c
	}
	dupTurn := func() *Conversation {
		c := conv("c", 5, false)
		c.Turns = append(c.Turns, Turn{SessionID: "root", Turn: 2, StartedAt: 3}, Turn{SessionID: "root", Turn: 1, StartedAt: 4})
		return c
	}
	for _, fresh := range []bool{true, false} {
		for _, tc := range []struct {
			name string
			c    *Conversation
			want string
		}{
			{"session", dupSession(), `index session "root" of "c": the conversation has it twice (its sessions 1 and 3): `},
			{"turn", dupTurn(), `index turn 1 of session "root" of "c": the conversation records it twice (its turns 1 and 3): `},
		} {
			db, p := newIndex(t)
			if !fresh {
				db.Close()
				var err error
				if db, err = Open(p); err != nil {
					t.Fatal(err)
				}
			}
			w, err := db.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			err = w.Put(ctx, tc.c, nil)
			w.Rollback()
			db.Close()
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "UNIQUE") {
				t.Errorf("fresh %v, %s: %v", fresh, tc.name, err)
			}
		}
	}
}

// TestPutKeepsUnchangedMessages: a Put on an existing index keeps, of
// each session, the rows of the leading messages that are unchanged (the
// same rowids: the full-text index is not written for them) and writes the
// rest again; the rows, the search and FTS5's own integrity check then
// agree with the messages given, each session's messages keep their
// order, and the other conversations are untouched.
func TestPutKeepsUnchangedMessages(t *testing.T) {
	ctx := context.Background()
	base := []Message{
		{SessionID: "s1", Seq: 1, Role: "user", Text: "alpha otter"},
		{SessionID: "s1", Seq: 2, Role: "assistant", Text: "beta heron"},
		{SessionID: "s2", Seq: 1, Role: "user", Text: "gamma lynx"},
	}
	with := func(f func(m []Message) []Message) []Message { return f(slices.Clone(base)) }
	for _, tc := range []struct {
		name    string
		msgs    []Message
		kept    []int  // the messages of msgs whose rows stay
		gone    string // a word of base no longer indexed for "a"
		present string // a word that must be found in "a"
		// damage, when set, runs on the index before the update.
		damage string
	}{
		{"the same messages", base, []int{0, 1, 2}, "", "heron", ""},
		{"one appended", with(func(m []Message) []Message {
			return append(m, Message{SessionID: "s2", Seq: 2, Role: "assistant", Text: "delta walrus"})
		}), []int{0, 1, 2}, "", "walrus", ""},
		{"one appended to the first of two sessions", with(func(m []Message) []Message {
			return slices.Insert(m, 2, Message{SessionID: "s1", Seq: 3, Role: "user", Text: "epsilon"})
		}), []int{0, 1, 3}, "", "epsilon", ""},
		{"a text changed", with(func(m []Message) []Message { m[1].Text = "kappa heron"; return m }), []int{0, 2}, "beta", "kappa", ""},
		{"the last one gone", base[:2], []int{0, 1}, "gamma", "beta", ""},
		{"all gone", nil, nil, "alpha", "", ""},
		{"the first role changed", with(func(m []Message) []Message { m[0].Role = "assistant"; return m }), []int{2}, "", "alpha", ""},
		{"a seq changed", with(func(m []Message) []Message { m[2].Seq = 7; return m }), []int{0, 1}, "", "gamma", ""},
		{"a message moved to another session", with(func(m []Message) []Message { m[1].SessionID = "s3"; return m }), []int{0, 2}, "", "beta", ""},
		{"the first two swapped", with(func(m []Message) []Message { m[0], m[1] = m[1], m[0]; return m }), []int{2}, "", "alpha", ""},
		{"the second message's row lost from the search table", base, []int{0}, "", "beta",
			"DELETE FROM messages WHERE rowid = (SELECT fts_rowid FROM message_rows WHERE conversation_id = 'a' ORDER BY fts_rowid LIMIT 1 OFFSET 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, _ := newIndex(t)
			if err := db.Upsert(ctx, conv("a", 100, false), base); err != nil {
				t.Fatal(err)
			}
			other := []Message{{SessionID: "root", Seq: 1, Role: "user", Text: "alpha beta gamma in b"}}
			if err := db.Upsert(ctx, conv("b", 90, false), other); err != nil {
				t.Fatal(err)
			}
			type row struct {
				rowid int64
				m     Message
			}
			read := func(id string) []row {
				rs, err := db.db.Query(`SELECT m.rowid, m.session_id, m.seq, m.role, m.text FROM message_rows r
					JOIN messages m ON m.rowid = r.fts_rowid AND m.conversation_id = r.conversation_id
					WHERE r.conversation_id = ? ORDER BY r.fts_rowid`, id)
				if err != nil {
					t.Fatal(err)
				}
				defer rs.Close()
				var out []row
				for rs.Next() {
					var r row
					if err := rs.Scan(&r.rowid, &r.m.SessionID, &r.m.Seq, &r.m.Role, &r.m.Text); err != nil {
						t.Fatal(err)
					}
					out = append(out, r)
				}
				return out
			}
			if tc.damage != "" {
				if _, err := db.db.Exec(tc.damage); err != nil {
					t.Fatal(err)
				}
			}
			before, otherBefore := read("a"), read("b")
			c := conv("a", 200, false)
			c.Title = "renamed"
			if err := db.Upsert(ctx, c, tc.msgs); err != nil {
				t.Fatal(err)
			}
			after := read("a")
			if len(after) != len(tc.msgs) {
				t.Fatalf("%d message rows for a, want %d: %+v", len(after), len(tc.msgs), after)
			}
			// Each message has its own row; a session's rows follow the
			// order of its messages; the rows kept are those of tc.kept.
			rowOf := map[Message]row{}
			for _, r := range after {
				rowOf[r.m] = r
			}
			wasThere := map[row]bool{}
			for _, r := range before {
				wasThere[r] = true
			}
			last := map[string]int64{}
			var kept []int
			for i, m := range tc.msgs {
				r, ok := rowOf[m]
				if !ok {
					t.Fatalf("message %d (%+v) has no row: %+v", i, m, after)
				}
				if r.rowid <= last[m.SessionID] {
					t.Errorf("message %d: rowid %d after %d in session %s: the order is not kept", i, r.rowid, last[m.SessionID], m.SessionID)
				}
				last[m.SessionID] = r.rowid
				if wasThere[r] {
					kept = append(kept, i)
				}
			}
			if fmt.Sprint(kept) != fmt.Sprint(tc.kept) {
				t.Errorf("rows kept for messages %v, want %v (before %v, after %v)", kept, tc.kept, before, after)
			}
			var rowsTotal, messagesTotal int
			db.db.QueryRow("SELECT count(*) FROM message_rows").Scan(&rowsTotal)
			db.db.QueryRow("SELECT count(*) FROM messages").Scan(&messagesTotal)
			if want := len(tc.msgs) + len(other); rowsTotal != want || messagesTotal != want {
				t.Errorf("%d message_rows and %d messages, want %d", rowsTotal, messagesTotal, want)
			}
			if fmt.Sprint(read("b")) != fmt.Sprint(otherBefore) {
				t.Errorf("b changed: %v, was %v", read("b"), otherBefore)
			}
			if _, err := db.db.Exec("INSERT INTO messages(messages) VALUES('integrity-check')"); err != nil {
				t.Errorf("FTS5 integrity check: %v", err)
			}
			in := func(word string) bool {
				hits, err := db.Search(ctx, word, 10)
				if err != nil {
					t.Fatal(err)
				}
				return slices.ContainsFunc(hits, func(h Hit) bool { return h.ConversationID == "a" })
			}
			if tc.gone != "" && in(tc.gone) {
				t.Errorf("%q still finds a", tc.gone)
			}
			if tc.present != "" && !in(tc.present) {
				t.Errorf("%q does not find a", tc.present)
			}
			all, err := db.All(ctx)
			if err != nil || all["a"] == nil || all["a"].Title != "renamed" {
				t.Errorf("conversation a = %+v, %v", all["a"], err)
			}
		})
	}
}

// TestPutRepairsRowsTheSqlite3ToolChanged: rows another program changed
// (the sqlite3 tool: a message's text rewritten, another's search row
// deleted, a message_rows row pointing nowhere added) are not kept by a
// Put of the conversation's messages: it leaves exactly those messages,
// searchable, with FTS5's integrity check passing.
func TestPutRepairsRowsTheSqlite3ToolChanged(t *testing.T) {
	ctx := context.Background()
	db, p := newIndex(t)
	msgs := []Message{
		{SessionID: "root", Seq: 1, Role: "user", Text: "alpha otter"},
		{SessionID: "root", Seq: 2, Role: "assistant", Text: "beta heron"},
		{SessionID: "root", Seq: 3, Role: "user", Text: "gamma lynx"},
		{SessionID: "child", Seq: 1, Role: "user", Text: "delta walrus"},
	}
	if err := db.Upsert(ctx, conv("a", 100, false), msgs); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	sqlite3(t, p, `UPDATE messages SET text = 'tampered badger' WHERE rowid = (SELECT fts_rowid FROM message_rows WHERE conversation_id = 'a' ORDER BY fts_rowid LIMIT 1);
DELETE FROM messages WHERE rowid = (SELECT fts_rowid FROM message_rows WHERE conversation_id = 'a' ORDER BY fts_rowid LIMIT 1 OFFSET 3);
INSERT INTO message_rows (conversation_id, fts_rowid) VALUES ('a', 9999);`)
	db, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Upsert(ctx, conv("a", 200, false), msgs); err != nil {
		t.Fatal(err)
	}
	rs, err := db.db.Query(`SELECT m.session_id, m.seq, m.role, m.text FROM message_rows r
		JOIN messages m ON m.rowid = r.fts_rowid WHERE r.conversation_id = 'a' ORDER BY m.session_id, m.seq`)
	if err != nil {
		t.Fatal(err)
	}
	var got []Message
	for rs.Next() {
		var m Message
		if err := rs.Scan(&m.SessionID, &m.Seq, &m.Role, &m.Text); err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
	rs.Close()
	want := []Message{msgs[3], msgs[0], msgs[1], msgs[2]} // by session, then seq
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("messages of a = %+v, want %+v", got, want)
	}
	var rows, messages int
	db.db.QueryRow("SELECT count(*) FROM message_rows").Scan(&rows)
	db.db.QueryRow("SELECT count(*) FROM messages").Scan(&messages)
	if rows != len(msgs) || messages != len(msgs) {
		t.Errorf("%d message_rows and %d messages, want %d", rows, messages, len(msgs))
	}
	if _, err := db.db.Exec("INSERT INTO messages(messages) VALUES('integrity-check')"); err != nil {
		t.Errorf("FTS5 integrity check: %v", err)
	}
	for word, want := range map[string]int{"badger": 0, "alpha": 1, "walrus": 1} {
		if hits, err := db.Search(ctx, word, 10); err != nil || len(hits) != want {
			t.Errorf("%q: %d hits (%v), want %d", word, len(hits), err, want)
		}
	}
}

// cancelAfter is a context whose Err is nil for its first n calls and
// context.Canceled after: where a Writer looks at its context shows.
type cancelAfter struct {
	context.Context
	n    int
	done chan struct{}
}

func (c *cancelAfter) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

func (c *cancelAfter) Done() <-chan struct{} { return c.done }

// TestWriterStopsWhenCanceled: the statements run without the context's
// cancellation, so the Writer checks the context itself: before a call
// writes anything, and every checkEvery messages of a Put, on a created
// index (numbered messages) and an existing one.
func TestWriterStopsWhenCanceled(t *testing.T) {
	const n = 1000
	var msgs []Message
	for i := range n {
		msgs = append(msgs, Message{SessionID: "root", Seq: int64(i), Role: "user", Text: fmt.Sprintf("word%d", i)})
	}
	count := func(t *testing.T, w *Writer, table string) int {
		t.Helper()
		var k int
		if err := w.tx.QueryRow("SELECT count(*) FROM " + table).Scan(&k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	for _, fresh := range []bool{true, false} {
		t.Run(fmt.Sprintf("fresh=%v", fresh), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "metadata.db")
			db, err := Create(p)
			if err != nil {
				t.Fatal(err)
			}
			if !fresh {
				if err := db.Finish(); err != nil {
					t.Fatal(err)
				}
				if db, err = Open(p); err != nil {
					t.Fatal(err)
				}
			}
			defer db.Close()
			w, err := db.Begin(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer w.Rollback()
			if w.fresh != fresh {
				t.Fatalf("writer fresh=%v", w.fresh)
			}
			// The first check passes and so does the one at message
			// checkEvery; the one at 2*checkEvery stops the Put.
			ctx := &cancelAfter{Context: context.Background(), n: 2, done: make(chan struct{})}
			err = w.Put(ctx, conv("c", 1, false), msgs)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Put: %v, want context.Canceled", err)
			}
			if got, want := count(t, w, "messages"), 2*checkEvery; got != want {
				t.Errorf("%d messages written before the Put stopped, want %d", got, want)
			}
			// Canceled before the call: nothing is written.
			before := count(t, w, "conversations") + count(t, w, "skipped")
			done := &cancelAfter{Context: context.Background(), done: make(chan struct{})}
			if err := w.Put(done, conv("d", 1, false), msgs[:1]); !errors.Is(err, context.Canceled) {
				t.Errorf("Put: %v", err)
			}
			if err := w.Skip(done, "e", "e", "fp", "why"); !errors.Is(err, context.Canceled) {
				t.Errorf("Skip: %v", err)
			}
			if err := w.Remove(done, "c"); !errors.Is(err, context.Canceled) {
				t.Errorf("Remove: %v", err)
			}
			if err := w.SetWillNotOpen(done, "c", []string{"x"}); !errors.Is(err, context.Canceled) {
				t.Errorf("SetWillNotOpen: %v", err)
			}
			if got := count(t, w, "conversations") + count(t, w, "skipped"); got != before {
				t.Errorf("%d conversation and skipped rows after canceled calls, want %d", got, before)
			}
			var wno string
			if err := w.tx.QueryRow("SELECT will_not_open FROM conversations WHERE id = 'c'").Scan(&wno); err != nil || wno != "[]" {
				t.Errorf("will_not_open of c: %q, %v; want [] (kept)", wno, err)
			}
		})
	}
}

// TestFinishErrorNamesIndex: a bulk load that cannot be finished says which
// index file and which step.
func TestFinishErrorNamesIndex(t *testing.T) {
	p := filepath.Join(t.TempDir(), "metadata.db")
	db := bulkLoaded(t, p, func(put func(*Conversation, []Message)) { put(conv("a", 1, false), nil) })
	db.db.Close() // the connection lost under it
	err := db.Finish()
	if err == nil || !strings.HasPrefix(err.Error(), p+": finishing the bulk load: removing FTS5's hashsize setting: ") {
		t.Fatalf("Finish = %v, want an error naming %s and the step", err, p)
	}
}
