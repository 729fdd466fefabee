package store

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/convkit/convkit/convlog"
)

// journals lists the delete journals in dir.
func journals(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, journalPrefix+"*"+journalSuffix))
	mustNil(t, err)
	return m
}

// TestDeleteAllRerun: a delete of several conversations killed part-way
// leaves its journal; the same command run again finishes it, reporting
// the conversations already removed as such, finishing a recorded
// deletion, removing the empty directory a kill left, deleting the rest,
// and removing the journal.
func TestDeleteAllRerun(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	ids := []string{"a", "b", "c", "d", "e"}
	for _, id := range append(ids, "keep") {
		mustNil(t, s.CreateConversation(id, "/p", nil, nil))
	}
	// The state a kill of "delete a b c d e" can leave: its journal; a
	// removed; b's tombstone recorded; c's files removed, its directory
	// left; d and e untouched.
	_, err := s.writeDeleteJournal(ctx, ids)
	mustNil(t, err)
	mustNil(t, s.DeleteUnguarded("a"))
	mustNil(t, s.MarkDeleting("b"))
	cdir, _ := ConversationPath(dir, "c")
	ents, _ := os.ReadDir(cdir)
	for _, e := range ents {
		mustNil(t, os.Remove(filepath.Join(cdir, e.Name())))
	}
	mustNil(t, s.Close())

	s = openTestStore(t, dir, convlog.Plain)
	type done struct {
		id      string
		already bool
	}
	var got []done
	mustNil(t, s.DeleteAll(ctx, append(ids, "c"), DeleteOptions{Done: func(id string, already bool) error {
		got = append(got, done{id, already})
		return nil
	}}))
	want := []done{{"a", true}, {"b", false}, {"c", false}, {"d", false}, {"e", false}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("done %v, want %v", got, want)
	}
	tree, err := at(dir).Walk()
	mustNil(t, err)
	if len(tree.Conversations) != 1 || tree.Conversations[0].ID != "keep" {
		t.Fatalf("left: %+v", tree.Conversations)
	}
	if j := journals(t, dir); len(j) != 0 {
		t.Fatalf("journals remain: %v", j)
	}
	// With its journal gone, an id that is not there is unknown again.
	err = s.DeleteAll(ctx, []string{"a"}, DeleteOptions{})
	if !errors.Is(err, ErrNoConversation) || !strings.Contains(err.Error(), `conversation "a": no such conversation`) {
		t.Fatalf("delete of a gone id without a journal: %v", err)
	}
}

// TestDeleteAllChecksFirst: an unknown id, a running turn or a fork left
// behind refuses the whole command before anything is deleted, and no
// journal is written.
func TestDeleteAllChecksFirst(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	mustNil(t, s.CreateConversation("a", "/p", nil, nil))
	mustNil(t, s.CreateConversation("busy", "/p", nil, nil))
	w, err := s.StartSession("busy", "r", "x", "m", "")
	mustNil(t, err)
	w.Close()
	mustNil(t, s.BeginTurn("busy", "r", 1, "hi"))
	compactedSource(t, s)
	mustNil(t, s.Fork("src", "root", "fork", "froot", -1))

	for _, tc := range []struct {
		ids  []string
		want error
	}{
		{[]string{"a", "typo"}, ErrNoConversation},
		{[]string{"a", "busy"}, ErrTurnRunning},
		{[]string{"a", "src"}, ErrHasDependents},
	} {
		err := s.DeleteAll(ctx, tc.ids, DeleteOptions{})
		if !errors.Is(err, tc.want) {
			t.Fatalf("%v: %v, want %v", tc.ids, err, tc.want)
		}
		if info := readInfo(t, dir, "a"); info.Deleting {
			t.Fatalf("%v: the refused command recorded a tombstone for a", tc.ids)
		}
		if j := journals(t, dir); len(j) != 0 {
			t.Fatalf("%v: a refused command left a journal %v", tc.ids, j)
		}
	}
	mustNil(t, s.DeleteAll(ctx, []string{"src", "fork"}, DeleteOptions{}))
	mustNil(t, s.DeleteAll(ctx, []string{"a"}, DeleteOptions{}))
	if _, err := os.Lstat(filepath.Join(dir, ConversationsDirName, "a")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a remains: %v", err)
	}
}

// TestDeleteAllInterrupted: a cancelled delete stops between two
// conversations and keeps its journal, so its rerun knows what it removed.
func TestDeleteAllInterrupted(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	for _, id := range []string{"a", "b"} {
		mustNil(t, s.CreateConversation(id, "/p", nil, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	err := s.DeleteAll(ctx, []string{"a", "b"}, DeleteOptions{Done: func(string, bool) error { cancel(); return nil }})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	if j := journals(t, dir); len(j) != 1 {
		t.Fatalf("journals %v, want the interrupted run's", j)
	}
	var already []string
	mustNil(t, s.DeleteAll(context.Background(), []string{"a", "b"}, DeleteOptions{Done: func(id string, a bool) error {
		if a {
			already = append(already, id)
		}
		return nil
	}}))
	if !reflect.DeepEqual(already, []string{"a"}) || len(journals(t, dir)) != 0 {
		t.Fatalf("already deleted %v; journals %v", already, journals(t, dir))
	}
}
