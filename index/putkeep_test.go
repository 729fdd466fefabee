package index

import (
	"context"
	"testing"
)

// TestPutKeepsUnchangedSessionsAndTurns: a Put that changes the
// conversation's row alone (a rename) writes that row alone; a changed
// session or turn, or a value of another type than a rebuild writes (as the
// sqlite3 tool may leave), has its table's rows written again.
func TestPutKeepsUnchangedSessionsAndTurns(t *testing.T) {
	ctx := context.Background()
	db, _ := newIndex(t)
	two := func() *Conversation {
		c := conv("a", 100, false)
		c.Sessions = append(c.Sessions, Session{ID: "child", ParentSession: "root", Agent: "coder", Model: "m", FormatVersion: 4, Events: 3, Bytes: 30, File: "child.v4.jsonl"})
		c.Turns = append(c.Turns, Turn{SessionID: "child", Turn: 1, StartedAt: 1, EndedAt: 0, Outcome: ""})
		return c
	}
	if err := db.Upsert(ctx, two(), nil); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(c *Conversation)
		tamper string // run before the Put, beside it
		want   int    // rows changed: the conversation's row is deleted and inserted
	}{
		{"renamed", func(c *Conversation) { c.Title = "renamed" }, "", 2},
		{"the same sessions in another order", func(c *Conversation) {
			c.Sessions[0], c.Sessions[1] = c.Sessions[1], c.Sessions[0]
			c.Turns[0], c.Turns[1] = c.Turns[1], c.Turns[0]
		}, "", 2},
		{"a session grew", func(c *Conversation) { c.Sessions[1].Events++ }, "", 2 + 2 + 2},
		{"a turn ended", func(c *Conversation) { c.Turns[1].EndedAt, c.Turns[1].Outcome = 5, "completed" }, "", 2 + 2 + 2},
		{"a count stored as text", func(*Conversation) {}, "UPDATE sessions SET event_count = 'ten' WHERE id = 'root'", 2 + 2 + 2},
		{"a name stored as a blob", func(*Conversation) {}, "UPDATE sessions SET agent = CAST(agent AS BLOB) WHERE id = 'child'", 2 + 2 + 2},
		{"an id stored as a blob", func(*Conversation) {}, "UPDATE sessions SET id = CAST(id AS BLOB) WHERE id = 'child'", 2 + 2 + 2},
		{"a time stored as a real", func(*Conversation) {}, "UPDATE turns SET started_at = 1.5 WHERE session_id = 'root'", 2 + 2 + 2},
		{"a turn gone", func(c *Conversation) { c.Turns = c.Turns[:1] }, "", 2 + 2 + 1},
	} {
		w, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if tc.tamper != "" {
			if _, err := w.tx.ExecContext(ctx, tc.tamper); err != nil {
				t.Fatal(err)
			}
		}
		changes := func() (n int) {
			if err := w.tx.QueryRowContext(ctx, "SELECT total_changes()").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := changes()
		c := two()
		tc.change(c)
		if err := w.Put(ctx, c, nil); err != nil {
			t.Fatal(err)
		}
		if got := changes() - before; got != tc.want {
			t.Errorf("%s: %d rows changed, want %d", tc.name, got, tc.want)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		got, err := db.One(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if got.Title != c.Title || len(got.Sessions) != len(c.Sessions) || len(got.Turns) != len(c.Turns) {
			t.Errorf("%s: the index holds %+v, want %+v", tc.name, got, c)
		}
		var text int
		db.db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM sessions WHERE typeof(event_count) != 'integer' OR typeof(agent) != 'text' OR typeof(id) != 'text')
			+ (SELECT count(*) FROM turns WHERE typeof(started_at) != 'integer')`).Scan(&text)
		if text != 0 {
			t.Errorf("%s: %d values are not of a rebuild's types", tc.name, text)
		}
		// Back to two's rows for the next case.
		if err := db.Upsert(ctx, two(), nil); err != nil {
			t.Fatal(err)
		}
	}
}
