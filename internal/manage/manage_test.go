package manage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

func open(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// fixture is a generated store with an index, and two plain
// conversations of it.
func fixture(t *testing.T) (string, *fixtures.Report, string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	rep, err := fixtures.Generate(dir, fixtures.Options{Seed: 11, Conversations: 20})
	if err != nil {
		t.Fatal(err)
	}
	s := open(t, dir)
	if _, err := reindex.Run(context.Background(), s, reindex.Options{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	return dir, rep, rep.Find(fixtures.CaseBasic).ID, rep.Find(fixtures.CaseRenamed).ID
}

// current fails unless the index agrees with the logs.
func current(t *testing.T, dir string) {
	t.Helper()
	s, err := store.Open(context.Background(), dir, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ck, err := reindex.Check(context.Background(), s, reindex.Options{})
	if err != nil || ck.Drift() {
		t.Fatalf("the index disagrees with the logs: %+v, %v", ck.Differences, err)
	}
}

func row(t *testing.T, dir, id string) *index.Conversation {
	t.Helper()
	db, err := index.Open(filepath.Join(dir, store.IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	all, err := db.All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return all[id]
}

// TestEdits: each edit is appended to the conversation's log and its row
// updated at once; the automatic title never replaces a renamed one; an id
// that does not exist refuses the whole command.
func TestEdits(t *testing.T) {
	ctx := context.Background()
	dir, _, basic, renamed := fixture(t)
	s := open(t, dir)
	var done []store.Outcome
	opts := Options{OnEvent: func(o store.Outcome) { done = append(done, o) }}

	res, err := Rename(ctx, s, basic, "  A title of my own  ", opts)
	if err != nil || res.Index != "updated" || res.Conversations[0].Action != ActionRenamed || res.Conversations[0].Title != "A title of my own" {
		t.Fatalf("rename: %+v, %v", res, err)
	}
	if r := row(t, dir, basic); r.Title != "A title of my own" || r.TitleIsAuto {
		t.Fatalf("row after rename: %q auto=%v", r.Title, r.TitleIsAuto)
	}
	current(t, dir)
	// A new turn's first message does not replace a renamed title.
	if err := fixtures.AppendTurn(s, basic, 1); err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Conversation(basic); info.Title != "A title of my own" || info.TitleIsAuto {
		t.Fatalf("title after a new turn: %q", info.Title)
	}
	if res, err := Rename(ctx, s, basic, "A title of my own", opts); err != nil || res.Conversations[0].Action != ActionUnchanged || res.Index != "unchanged" {
		t.Fatalf("rename to the same title: %+v, %v", res, err)
	}
	if _, err := Rename(ctx, s, basic, "two\nlines", opts); err == nil || !strings.Contains(err.Error(), "one line") {
		t.Fatalf("a title of two lines: %v", err)
	}

	done = nil
	res, err = SetArchived(ctx, s, []string{basic, renamed, basic}, true, opts)
	if err != nil || len(res.Conversations) != 2 || res.Index != "updated" {
		t.Fatalf("archive: %+v, %v", res, err)
	}
	if !row(t, dir, basic).Archived || !row(t, dir, renamed).Archived {
		t.Fatal("the rows are not archived")
	}
	if res, _ := SetArchived(ctx, s, []string{basic}, true, opts); res.Conversations[0].Action != ActionAlreadyArchived {
		t.Fatalf("archive again: %+v", res)
	}
	if _, err := SetArchived(ctx, s, []string{basic, "no-such"}, false, opts); !errors.Is(err, store.ErrNoConversation) {
		t.Fatalf("unarchive with an unknown id: %v", err)
	}
	if !row(t, dir, basic).Archived {
		t.Fatal("a refused unarchive unarchived one")
	}
	res, err = SetArchived(ctx, s, []string{basic}, false, opts)
	if err != nil || res.Conversations[0].Action != ActionUnarchived || row(t, dir, basic).Archived {
		t.Fatalf("unarchive: %+v, %v", res, err)
	}
	if res, _ := SetArchived(ctx, s, []string{basic}, false, opts); res.Conversations[0].Action != ActionNotArchived {
		t.Fatalf("unarchive again: %+v", res)
	}
	current(t, dir)
	if want := []store.Outcome{{ID: basic, Action: ActionArchived}, {ID: renamed, Action: ActionArchived}}; !reflect.DeepEqual(done[:2], want) {
		t.Fatalf("outcomes as they happened: %+v", done)
	}
}

// TestOlderIndexIsLeftForReindex: an index of an older convkit is not
// written; the edit is made, and a warning says the index was not
// updated. Without an index there is nothing to update.
func TestOlderIndexIsLeftForReindex(t *testing.T) {
	ctx := context.Background()
	dir, _, basic, _ := fixture(t)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, store.IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", index.SchemaVersion-1)); err != nil {
		t.Fatal(err)
	}
	db.Close()
	s := open(t, dir)
	res, err := SetArchived(ctx, s, []string{basic}, true, Options{})
	if err != nil || res.Index != "not-updated" || len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], "older convkit") {
		t.Fatalf("archive with an older index: %+v, %v", res, err)
	}
	if info, _ := s.Conversation(basic); !info.Archived {
		t.Fatal("not archived")
	}
	if err := os.Remove(filepath.Join(dir, store.IndexFileName)); err != nil {
		t.Fatal(err)
	}
	res, err = SetArchived(ctx, s, []string{basic}, false, Options{})
	if err != nil || res.Index != "absent" || len(res.Warnings) != 0 {
		t.Fatalf("unarchive without an index: %+v, %v", res, err)
	}
}

// TestDeleteKeepsTheIndex: each deleted conversation leaves the index as
// it goes; a rerun after a kill between a removal and its index update
// removes the row too.
func TestDeleteKeepsTheIndex(t *testing.T) {
	ctx := context.Background()
	dir, _, basic, renamed := fixture(t)
	s := open(t, dir)
	// The kill: basic's directory removed, its row left.
	if err := s.DeleteAll(ctx, []string{basic}, store.DeleteOptions{Done: func(string, bool) error { return errors.New("killed") }}); err == nil {
		t.Fatal("the callback's error was lost")
	}
	if row(t, dir, basic) == nil {
		t.Fatal("the row went with the directory")
	}
	res, err := Delete(ctx, s, []string{basic, renamed}, false, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Outcome{{ID: basic, Action: ActionAlreadyDeleted}, {ID: renamed, Action: ActionDeleted}}
	if !reflect.DeepEqual(res.Conversations, want) || res.Index != "updated" {
		t.Fatalf("delete: %+v", res)
	}
	if row(t, dir, basic) != nil || row(t, dir, renamed) != nil {
		t.Fatal("rows remain")
	}
	current(t, dir)
	// Deleted already, rows and all: nothing changes in the index.
	res, err = Delete(ctx, s, []string{basic}, false, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []store.Outcome{{ID: basic, Action: ActionAlreadyDeleted}}; !reflect.DeepEqual(res.Conversations, want) || res.Index != "unchanged" {
		t.Fatalf("delete again: %+v", res)
	}
	current(t, dir)
}

// errAfter is a canceled context whose Err reports nil for its first k
// calls: the edit's own checks pass (archive checks once per id, delete
// once as it writes its journal and once per id), the index update that
// follows sees the cancellation (through Err or Done).
type errAfter struct {
	context.Context
	k int
}

func (c *errAfter) Err() error {
	if c.k > 0 {
		c.k--
		return nil
	}
	return c.Context.Err()
}

// TestInterruptedIndexUpdate: an edit interrupted while it updates the
// index returns the interruption with its result (the CLI's exit 130),
// the event appended and the warning saying the index was not updated;
// reindex --incremental then brings the index up to date.
func TestInterruptedIndexUpdate(t *testing.T) {
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	dir, rep, basic, renamed := fixture(t)
	forked := rep.Find(fixtures.CaseForkAfterCompaction).ID
	s := open(t, dir)
	cases := []struct {
		name string
		do   func() (*Result, error)
		ok   func() bool
	}{
		{"rename", func() (*Result, error) { return Rename(canceled, s, basic, "a new title", Options{}) },
			func() bool { info, _ := s.Conversation(basic); return info.Title == "a new title" }},
		{"archive", func() (*Result, error) {
			return SetArchived(&errAfter{canceled, 1}, s, []string{renamed}, true, Options{})
		},
			func() bool { info, _ := s.Conversation(renamed); return info.Archived }},
		{"delete", func() (*Result, error) { return Delete(&errAfter{canceled, 2}, s, []string{forked}, false, Options{}) },
			func() bool { _, err := s.Conversation(forked); return errors.Is(err, os.ErrNotExist) }},
	}
	for _, c := range cases {
		res, err := c.do()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: err = %v, want context.Canceled", c.name, err)
		}
		if res == nil || res.Index != "not-updated" || res.IndexError != "interrupted" || len(res.Warnings) != 1 ||
			!strings.Contains(res.Warnings[0], "not updated (interrupted)") || len(res.Conversations) != 1 {
			t.Fatalf("%s: result %+v", c.name, res)
		}
		if !c.ok() {
			t.Fatalf("%s: the edit was not made", c.name)
		}
	}
	if _, err := reindex.Run(context.Background(), s, reindex.Options{Incremental: true}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	current(t, dir)
}
