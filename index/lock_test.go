package index

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
)

// TestLockedIndex: an index another connection holds in an exclusive
// transaction is reported as locked by another process, naming the file,
// not as a file that is not an index. In exclusive locking mode the
// holder shuts readers out, and Open and OpenRead are refused; in WAL's
// usual mode it shuts out only writers, and a write is refused.
func TestLockedIndex(t *testing.T) {
	ctx := context.Background()
	hold := func(t *testing.T, p string, exclusive bool) {
		t.Helper()
		pragmas := []string{"busy_timeout(0)"}
		if exclusive {
			pragmas = append(pragmas, "locking_mode(EXCLUSIVE)")
		}
		other, err := sql.Open("sqlite", dsn(p, pragmas...))
		if err != nil {
			t.Fatal(err)
		}
		other.SetMaxOpenConns(1)
		tx, err := other.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		// BEGIN EXCLUSIVE, as database/sql cannot say it: a write takes
		// the write lock, and in exclusive locking mode keeps every lock.
		if _, err := tx.Exec("UPDATE conversations SET title = title"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tx.Rollback(); other.Close() })
	}
	locked := func(t *testing.T, what, p string, err error) {
		t.Helper()
		if !errors.Is(err, ErrLocked) || !IsLocked(err) || errors.Is(err, ErrSchema) || !strings.HasPrefix(err.Error(), p+": locked by another process (") {
			t.Errorf("%s: %v, want %s: locked by another process", what, err, p)
		}
	}
	t.Run("exclusive locking mode", func(t *testing.T) {
		t.Parallel()
		p := goodIndex(t)
		hold(t, p, true)
		// Both at once: each waits out the busy timeout (5 s).
		done := make(chan error)
		go func() {
			_, err := Open(p)
			done <- err
		}()
		_, err := OpenRead(ctx, p, ReadOptions{})
		locked(t, "OpenRead", p, err)
		locked(t, "Open", p, <-done)
	})
	t.Run("WAL mode", func(t *testing.T) {
		t.Parallel()
		p := goodIndex(t)
		hold(t, p, false)
		db, err := OpenRead(ctx, p, ReadOptions{})
		if err != nil {
			t.Fatalf("a reader beside a writer: %v", err)
		}
		db.Close()
		db, err = Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		w, err := db.Begin(ctx)
		if err == nil {
			err = w.Remove(ctx, "a")
			w.Rollback()
		}
		if !IsLocked(err) {
			t.Errorf("a write beside another's transaction: %v, want SQLITE_BUSY", err)
		}
	})
	if IsLocked(errors.New("database is locked")) || IsLocked(nil) || !IsLocked(ErrLocked) {
		t.Error("IsLocked goes by the error, not its words")
	}
	if UpdateAdvice(ErrLocked) == UpdateAdvice(ErrSchema) {
		t.Error("a locked index gets the advice of a broken one")
	}
}
