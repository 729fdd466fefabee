package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

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
// deletion, removing the empty directory a kill left, and deleting the
// rest. Run once more, it reports them all as already deleted. Journals
// expire: an id whose journal is gone is unknown again.
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
	mustNil(t, s.deleteOne("a"))
	mustNil(t, s.MarkDeleting("b"))
	cdir, _ := conversationPath(dir, "c")
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
	got = nil
	mustNil(t, s.DeleteAll(ctx, ids, DeleteOptions{Done: func(id string, already bool) error {
		got = append(got, done{id, already})
		return nil
	}}))
	for i, d := range got {
		if d != (done{ids[i], true}) {
			t.Fatalf("the third run: %v, want every one already deleted", got)
		}
	}
	if len(got) != len(ids) {
		t.Fatalf("the third run: %v", got)
	}
	// An unknown id refuses the command, journals or not.
	if err := s.DeleteAll(ctx, []string{"a", "typo"}, DeleteOptions{}); !errors.Is(err, ErrNoConversation) {
		t.Fatalf("an unknown id: %v", err)
	}
	// Journals older than journalAge go with the next delete; then "a" is
	// unknown.
	old := time.Now().Add(-journalAge - time.Hour)
	for _, j := range journals(t, dir) {
		mustNil(t, os.Chtimes(j, old, old))
	}
	mustNil(t, s.DeleteAll(ctx, []string{"keep"}, DeleteOptions{}))
	if j := journals(t, dir); len(j) != 1 {
		t.Fatalf("journals after the expiry: %v, want the last run's", j)
	}
	err = s.DeleteAll(ctx, []string{"a"}, DeleteOptions{})
	if !errors.Is(err, ErrNoConversation) || !strings.Contains(err.Error(), `conversation "a": no such conversation`) {
		t.Fatalf("delete of a gone id whose journal expired: %v", err)
	}
}

// TestDeleteJournalsAreBounded: at most maxJournals are kept, the newest.
func TestDeleteJournalsAreBounded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	base := time.Now().Add(-time.Hour)
	for i := range maxJournals + 20 {
		p, err := s.writeDeleteJournal(ctx, []string{fmt.Sprintf("c%d", i)})
		mustNil(t, err)
		at := base.Add(time.Duration(i) * time.Second)
		mustNil(t, os.Chtimes(p, at, at))
	}
	mustNil(t, s.CreateConversation("x", "/p", nil, nil))
	mustNil(t, s.DeleteAll(ctx, []string{"x"}, DeleteOptions{}))
	if n := len(journals(t, dir)); n != maxJournals {
		t.Fatalf("%d journals kept, want %d", n, maxJournals)
	}
	// The oldest went: c0 is unknown, the newest still known.
	if err := s.DeleteAll(ctx, []string{"c0"}, DeleteOptions{}); !errors.Is(err, ErrNoConversation) {
		t.Fatalf("c0: %v", err)
	}
	mustNil(t, s.DeleteAll(ctx, []string{fmt.Sprintf("c%d", maxJournals+19)}, DeleteOptions{}))
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
	mustNil(t, s.forkSeq("src", "root", "fork", "froot", -1))

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
	if !reflect.DeepEqual(already, []string{"a"}) {
		t.Fatalf("already deleted %v", already)
	}
}

// FuzzDeleteJournal: whatever a file named like a journal holds, reading
// it never fails the delete: it is a list of ids a store can hold, or not a
// journal. What DeleteAll writes reads back.
func FuzzDeleteJournal(f *testing.F) {
	f.Add([]byte(`{"ids":["a","b/c","team/α β ~1 ../x"]}` + "\n"))
	f.Add([]byte(`{"ids":[`))
	f.Add([]byte(`{"ids":null}`))
	f.Add([]byte(`{"ids":["", "..", "a\u0000b"]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ids := parseJournal(b)
		for _, id := range ids {
			if _, err := EncodeSegment(id); err != nil {
				t.Fatalf("id %q from a journal cannot be a conversation: %v", id, err)
			}
		}
		if ids == nil {
			return
		}
		out, err := json.Marshal(deleteJournal{IDs: ids})
		if err != nil {
			t.Fatal(err)
		}
		if again := parseJournal(out); !reflect.DeepEqual(again, ids) {
			t.Fatalf("written %q, read back %q", ids, again)
		}
	})
}
