package store

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convkit/convkit/convlog"
)

// tree lists every file under dir (path, size, modification time).
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	mustNil(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if d.Name() != LockFileName {
			fmt.Fprintf(&b, "%s %v %d %s\n", p, fi.Mode(), fi.Size(), fi.ModTime())
		}
		return nil
	}))
	return b.String()
}

// TestPlanDelete: the plan says, for each conversation, what DeleteAll
// would do (after a killed delete too), with its title, files and bytes;
// it refuses what DeleteAll refuses, and writes nothing, on a handle
// opened read-only without the lock.
func TestPlanDelete(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	ids := []string{"a", "b", "c", "d"}
	for _, id := range append(ids, "busy") {
		mustNil(t, s.CreateConversation(id, "/p", nil, nil))
	}
	mustNil(t, s.Rename("d", "Title of d"))
	w, err := s.StartSession("busy", "r", "x", "m", "")
	mustNil(t, err)
	w.Close()
	mustNil(t, s.BeginTurn("busy", "r", 1, "hi"))
	compactedSource(t, s)
	mustNil(t, s.forkSeq("src", "root", "fork", "froot", -1))
	// What a kill of "delete a b c" can leave: a removed, b's tombstone
	// recorded, c's directory emptied.
	_, err = s.writeDeleteJournal(ctx, []string{"a", "b", "c"})
	mustNil(t, err)
	mustNil(t, s.deleteOne("a"))
	mustNil(t, s.MarkDeleting("b"))
	cdir, _ := conversationPath(dir, "c")
	ents, _ := os.ReadDir(cdir)
	for _, e := range ents {
		mustNil(t, os.Remove(filepath.Join(cdir, e.Name())))
	}
	mustNil(t, s.Close())

	before := tree(t, dir)
	ro := at(dir)
	plan, err := ro.PlanDelete([]string{"a", "b", "c", "d", "d"}, false)
	mustNil(t, err)
	want := []struct{ id, action, title string }{
		{"a", DeleteActionAlready, ""}, {"b", DeleteActionFinish, ""}, {"c", DeleteActionRemoveEmpty, ""}, {"d", DeleteActionDelete, "Title of d"},
	}
	if len(plan) != len(want) {
		t.Fatalf("plan %+v", plan)
	}
	for i, w := range want {
		p := plan[i]
		path, _ := conversationPath(dir, w.id)
		if p.ID != w.id || p.Action != w.action || p.Title != w.title || p.Path != path {
			t.Errorf("plan[%d] = %+v, want %+v", i, p, w)
		}
	}
	ddir, _ := conversationPath(dir, "d")
	files, bytes, err := filesIn(ddir)
	mustNil(t, err)
	if d := plan[3]; files == 0 || d.Files != files || d.Bytes != bytes || bytes == 0 {
		t.Errorf("d: %d files, %d bytes; the directory holds %d, %d", d.Files, d.Bytes, files, bytes)
	}
	if b := plan[1]; b.Files == 0 || b.Bytes == 0 {
		t.Errorf("b: %+v, want its files counted", b)
	}

	for _, tc := range []struct {
		ids   []string
		force bool
		want  error
	}{
		{[]string{"d", "typo"}, false, ErrNoConversation},
		{[]string{"d", "busy"}, false, ErrTurnRunning},
		{[]string{"d", "src"}, false, ErrHasDependents},
	} {
		if _, err := ro.PlanDelete(tc.ids, tc.force); !errors.Is(err, tc.want) {
			t.Errorf("%v: %v, want %v", tc.ids, err, tc.want)
		}
	}
	if plan, err := ro.PlanDelete([]string{"src"}, true); err != nil || len(plan) != 1 || plan[0].Action != DeleteActionDelete {
		t.Errorf("src with force: %+v, %v", plan, err)
	}
	if after := tree(t, dir); after != before {
		t.Errorf("the plan changed the store:\n%s---\n%s", before, after)
	}
}
