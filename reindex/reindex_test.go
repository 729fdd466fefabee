package reindex

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/inspect"
	"github.com/convkit/convkit/store"
)

var clock = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func openStore(t *testing.T, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), dir, store.OpenOptions{
		Lock:   store.LockOptions{Mode: store.LockExclusive, Command: "test"},
		Create: store.CreateAlways,
		Now:    func() time.Time { clock = clock.Add(time.Second); return clock },
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// addConversation creates a conversation with a root session holding one
// turn whose user message says text.
func addConversation(t *testing.T, s *store.Store, id, text string) {
	t.Helper()
	c := store.NewConversation{ID: id, Cwd: "/work/" + id, SessionID: "root", Agent: "coder", Model: "m1"}
	if err := fixtures.Converse(s, c, text, "done with zebra"); err != nil {
		t.Fatal(err)
	}
}

func TestRunCheckList(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	defer s.Close()
	addConversation(t, s, "alpha", "find the giraffe in the logs")
	addConversation(t, s, "beta/with~odd name", "second one")
	addConversation(t, s, "gone", "to be deleted")
	if err := s.MarkDeleting("gone"); err != nil {
		t.Fatal(err)
	}
	// A conversation whose session log is corrupt is skipped, with reason.
	addConversation(t, s, "broken", "will break")
	pLog, err := reader(t, dir).FindLog("broken", "root")
	p := pLog.Path
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	lines := strings.SplitAfter(string(b), "\n")
	lines[2] = "{not json\n"
	os.WriteFile(p, []byte(strings.Join(lines, "")), 0o600)

	// The listing falls back to the logs before any index exists.
	l, err := List(ctx, reader(t, dir), ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Source != "logs" || !strings.Contains(l.FallbackReason, "does not exist") || len(l.Conversations) != 3 {
		t.Fatalf("listing before reindex = %+v", l)
	}

	res, err := Run(ctx, s, Options{Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Indexed != 2 || len(res.DeletionsFinished) != 1 || res.DeletionsFinished[0] != "gone" {
		t.Fatalf("result = %+v", res)
	}
	if len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, "unreadable session log") ||
		!strings.Contains(res.Skipped[0].Reason, "line 3") {
		t.Fatalf("skipped = %+v", res.Skipped)
	}
	if _, err := os.Stat(filepath.Join(dir, "conversations", "gone")); !os.IsNotExist(err) {
		t.Fatalf("interrupted deletion not finished: %v", err)
	}

	chk, err := Check(ctx, reader(t, dir), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if chk.Drift() {
		t.Fatalf("fresh index drifts: %+v", chk)
	}
	l, err = List(ctx, reader(t, dir), ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Source != "index" || len(l.Conversations) != 2 || l.Conversations[0].ID != "beta/with~odd name" {
		t.Fatalf("listing from index = %+v", l)
	}
	if l.Conversations[1].Title != "find the giraffe in the logs" || l.Conversations[1].Turns != 1 {
		t.Fatalf("row = %+v", l.Conversations[1])
	}
	db, err := index.Open(filepath.Join(dir, store.IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	hits, err := db.Search(ctx, "giraffe", 10)
	db.Close()
	if err != nil || len(hits) != 1 || hits[0].ConversationID != "alpha" || !strings.Contains(hits[0].Snippet, "[giraffe]") {
		t.Fatalf("search = %+v, %v", hits, err)
	}

	// A rename after the reindex: Check reports the stale row, List falls
	// back to the logs, and a second Run brings it back in line.
	if err := s.Rename("alpha", "Renamed"); err != nil {
		t.Fatal(err)
	}
	chk, _ = Check(ctx, reader(t, dir), Options{})
	if !chk.Drift() || len(chk.Differences) != 1 || chk.Differences[0].Kind != "stale" || !strings.Contains(chk.Differences[0].Detail, "Renamed") {
		t.Fatalf("check after rename = %+v", chk.Differences)
	}
	l, _ = List(ctx, reader(t, dir), ListOptions{})
	if l.Source != "logs" || !strings.Contains(l.FallbackReason, "changed since it was indexed") {
		t.Fatalf("listing after rename = %+v", l)
	}
	if _, err := Run(ctx, s, Options{}); err != nil {
		t.Fatal(err)
	}
	if chk, _ = Check(ctx, reader(t, dir), Options{}); chk.Drift() {
		t.Fatalf("drift after second reindex: %+v", chk)
	}
}

func TestGarbageIndexIsReplaced(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	defer s.Close()
	addConversation(t, s, "alpha", "hello")
	os.WriteFile(filepath.Join(dir, store.IndexFileName), []byte("this is not a database, just garbage bytes\n"), 0o600)
	chk, err := Check(ctx, reader(t, dir), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if chk.IndexProblem == "" {
		t.Fatal("check accepted a garbage index")
	}
	l, err := List(ctx, reader(t, dir), ListOptions{})
	if err != nil || l.Source != "logs" || len(l.Conversations) != 1 {
		t.Fatalf("list with garbage index = %+v, %v", l, err)
	}
	if _, err := Run(ctx, s, Options{}); err != nil {
		t.Fatal(err)
	}
	if chk, _ := Check(ctx, reader(t, dir), Options{}); chk.Drift() {
		t.Fatalf("drift after replacing garbage: %+v", chk)
	}
	fi, err := os.Stat(filepath.Join(dir, store.IndexFileName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("index mode = %v, %v", fi, err)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}

func TestRunNeedsExclusiveLock(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(context.Background(), dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockNone}, Create: store.CreateAlways})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Run(context.Background(), s, Options{}); err == nil {
		t.Fatal("reindex ran without the lock")
	}
}

// TestDeletionInterruptedAtEachStep leaves a delete at each of its steps
// (tombstone written; session logs removed; conversation log removed too)
// and checks that reindex finishes every one and indexes none.
func TestDeletionInterruptedAtEachStep(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	defer s.Close()
	for _, id := range []string{"step1", "step2", "step3", "kept"} {
		addConversation(t, s, id, "hello "+id)
	}
	for _, id := range []string{"step1", "step2", "step3"} {
		if err := s.MarkDeleting(id); err != nil {
			t.Fatal(err)
		}
	}
	sess2Log, _ := reader(t, dir).FindLog("step2", "root")
	sess2 := sess2Log.Path
	os.Remove(sess2)
	d3, _ := reader(t, dir).ConversationPath("step3")
	ents, _ := os.ReadDir(d3)
	for _, e := range ents {
		os.Remove(filepath.Join(d3, e.Name()))
	}
	res, err := Run(ctx, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Indexed != 1 || len(res.DeletionsFinished) != 3 || len(res.Skipped) != 0 {
		t.Fatalf("result = %+v", res)
	}
	for _, id := range []string{"step1", "step2", "step3"} {
		p, _ := reader(t, dir).ConversationPath(id)
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still exists: %v", id, err)
		}
	}
}

// TestSkipsWhatValidateRefuses: a session log whose lines are each well
// formed but break the format's rules (a message without identity or
// source, a step outside a turn), written by a build that did not check
// them, is skipped with the reason inspect --validate gives, at the same
// line and byte.
func TestSkipsWhatValidateRefuses(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ name, line, want string }{
		{"identity", `{"type":"user/message","seq":SEQ,"time":5,"data":{"role":"user","content":[{"type":"text","text":"x"}]},"surfaceOp":"append"}`,
			"stored message has no id and no source"},
		{"path", `{"type":"step/start","seq":SEQ,"time":5,"data":{"turn":1,"step":2}}`, "step starts while step 1 of turn 1 is still open"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir)
			defer s.Close()
			addConversation(t, s, "good", "fine")
			addConversation(t, s, "bad", "will break")
			pLog, err := reader(t, dir).FindLog("bad", "root")
			p := pLog.Path
			if err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(p)
			lines := strings.SplitAfter(string(b), "\n")
			// The line takes the place of the step's and the turn's end.
			lines = append(lines[:len(lines)-3], strings.Replace(c.line, "SEQ", strconv.Itoa(len(lines)-4), 1)+"\n")
			os.WriteFile(p, []byte(strings.Join(lines, "")), 0o600)

			v, err := inspect.Validate(ctx, &inspect.Target{Path: p}, inspect.ValidateOptions{})
			if err != nil || v.Valid || len(v.Problems) != 1 || !strings.Contains(v.Problems[0].Message, c.want) {
				t.Fatalf("validate = %+v, %v", v, err)
			}
			pos := fmt.Sprintf("line %d, byte %d", v.Problems[0].Line, v.Problems[0].Offset)
			res, err := Run(ctx, s, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Indexed != 1 || len(res.Skipped) != 1 || !strings.Contains(res.Skipped[0].Reason, c.want) ||
				!strings.Contains(res.Skipped[0].Reason, pos) {
				t.Fatalf("reindex = %+v, want a skip at %s: %s", res, pos, c.want)
			}
		})
	}
}

// TestWalkFindingsInWalkOrder: stray files (ignored) and entries that are
// not conversations (skipped) are reported in the walk's name order.
func TestWalkFindingsInWalkOrder(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	defer s.Close()
	addConversation(t, s, "alpha", "hello")
	conv := filepath.Join(dir, "conversations")
	if err := os.WriteFile(filepath.Join(conv, "b-stray"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"a-link", "c-link"} {
		if err := os.Symlink("/nonexistent", filepath.Join(conv, l)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	_, err := Run(context.Background(), s, Options{OnEvent: func(e store.Item) {
		if e.Kind == store.ItemIgnored || e.Kind == store.ItemSkipped {
			got = append(got, string(e.Kind)+" "+filepath.Base(e.Path))
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{string(store.ItemSkipped) + " a-link", string(store.ItemIgnored) + " b-stray", string(store.ItemSkipped) + " c-link"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestSkipsAConversationRecordingATurnTwice: a conversation log whose
// lines are each well formed but record a turn twice (the end of a turn
// that has ended) is skipped with its reason by a rebuild and by an
// incremental run alike, and the others are indexed.
func TestSkipsAConversationRecordingATurnTwice(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	defer s.Close()
	addConversation(t, s, "good", "fine")
	addConversation(t, s, "bad", "will break")
	if _, err := Run(ctx, s, Options{}); err != nil {
		t.Fatal(err)
	}
	l, err := reader(t, dir).FindLog("bad", "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(l.Path)
	if err != nil {
		t.Fatal(err)
	}
	seq := strings.Count(string(b), "\n") - 1
	line := fmt.Sprintf(`{"type":"turn/ended","seq":%d,"time":1793534500000,"data":{"sessionId":"root","turn":1,"outcome":"completed"}}`+"\n", seq)
	if err := os.WriteFile(l.Path, append(b, line...), 0o600); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`unreadable conversation log: turn/ended at seq %d: turn 1 of session "root" is recorded already`, seq)
	for _, incremental := range []bool{true, false} {
		res, err := Run(ctx, s, Options{Incremental: incremental})
		if err != nil {
			t.Fatalf("incremental %v: %v", incremental, err)
		}
		if res.Indexed != 1 || len(res.Skipped) != 1 || res.Skipped[0].Path != l.Path || !strings.Contains(res.Skipped[0].Reason, want) {
			t.Fatalf("incremental %v: %+v, want a skip of %s: %s", incremental, res, l.Path, want)
		}
	}
}
