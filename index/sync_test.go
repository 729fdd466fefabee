package index

import (
	"context"
	"database/sql"
	"testing"
)

// TestWriterSkipsHeaderSyncOnlyOnEmptyLog: a transaction starting an empty
// write-ahead log runs unsynced, holding the write lock from Begin so that
// no other writer adds frames once the log was found empty; one starting a
// log with frames keeps SQLite's syncs; either way, once it ends, the
// connection syncs and checkpoints again and what was written reads back.
func TestWriterSkipsHeaderSyncOnlyOnEmptyLog(t *testing.T) {
	ctx := context.Background()
	db, p := newIndex(t)
	db.db.SetMaxOpenConns(1) // the pragmas read below are the writer's connection's
	other, err := sql.Open("sqlite", dsn(p, "busy_timeout(0)"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	pragmas := func(when string, wantSync, wantCkpt int) {
		t.Helper()
		var sync, ckpt int
		if err := db.db.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if err := db.db.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&ckpt); err != nil {
			t.Fatal(err)
		}
		if sync != wantSync || ckpt != wantCkpt {
			t.Errorf("%s: synchronous=%d, wal_autocheckpoint=%d; want %d and %d", when, sync, ckpt, wantSync, wantCkpt)
		}
	}
	pragmas("opened", 1, 1000)

	put := func(id string, wantUnsynced bool) {
		t.Helper()
		w, err := db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if w.unsynced != wantUnsynced {
			t.Errorf("%s: unsynced %v, want %v", id, w.unsynced, wantUnsynced)
		}
		if _, err := other.ExecContext(ctx, "DELETE FROM skipped"); wantUnsynced && !IsLocked(err) {
			t.Errorf("%s: another connection wrote while the writer was open (%v), want it locked out", id, err)
		}
		if err := w.Put(ctx, conv(id, 100, false), []Message{{SessionID: "root", Seq: 1, Role: "user", Text: "about " + id}}); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
		pragmas("after "+id, 1, 1000)
	}
	// The index was just opened: its log is empty.
	put("a", true)
	// The log now holds a's frames, not yet checkpointed.
	put("b", false)
	// Checkpointed and truncated, it is empty again.
	if _, err := db.db.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		t.Fatal(err)
	}
	put("c", true)

	// A rolled-back transaction restores the connection too.
	w, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Rollback(); err != nil {
		t.Fatal(err)
	}
	pragmas("after a rollback", 1, 1000)

	all, err := db.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 3 || all["a"] == nil || all["b"] == nil || all["c"] == nil {
		t.Errorf("the index holds %d conversations, want a, b and c", len(all))
	}
	hits, err := db.Search(ctx, "about", 10)
	if err != nil || len(hits) != 3 {
		t.Errorf("search found %d messages (%v), want 3", len(hits), err)
	}
}
