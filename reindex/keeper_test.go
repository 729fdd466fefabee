package reindex_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// keeperStep records one step of se's running turn answering text.
func keeperStep(t *testing.T, se *store.Session, id, text string) {
	t.Helper()
	if _, err := se.BeginStep(); err != nil {
		t.Fatal(err)
	}
	if err := se.Request(store.Request{System: "sys", Config: convlog.LLMConfig{Provider: "p", Model: "m"}}); err != nil {
		t.Fatal(err)
	}
	call, err := se.BeginModelCall()
	if err != nil {
		t.Fatal(err)
	}
	call.Text(0, text)
	if err := call.Complete(id); err != nil {
		t.Fatal(err)
	}
	if err := se.EndStep(); err != nil {
		t.Fatal(err)
	}
}

func userMsg(t *testing.T, id, text string) convlog.StoredMessage {
	m, err := convlog.NewUserMessage(id, convlog.TextBlock(text))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// runtimeStore opens a new store in dir as the runtime does (the lock
// held, a Keeper set) and the same store as a command beside it opens it
// (no lock): the writer, its keeper and the reader.
func runtimeStore(t *testing.T, dir string, onError func(error)) (*store.Store, *reindex.Keeper, *store.Store) {
	t.Helper()
	ctx := context.Background()
	s, err := store.Open(ctx, dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "runtime"},
		Create: store.CreateAlways, Compression: convlog.Zstd})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	k, _, err := reindex.NewKeeper(ctx, s, reindex.KeeperOptions{OnError: onError})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { k.Close() })
	reader, err := store.Open(ctx, dir, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s, k, reader
}

// TestKeeperKeepsIndexCurrent: with a Keeper, the store updates
// metadata.db itself; after every change between turns it holds exactly
// what a rebuild writes (every row of every table, the search text
// included), list reads it, and reindex --check agrees; during a turn,
// list still reads it and the check reports the turn in flight, not a
// difference.
func TestKeeperKeepsIndexCurrent(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	var keepErr error
	s, _, reader := runtimeStore(t, dir, func(err error) { keepErr = err })
	// agrees: the index is what a rebuild writes, list reads it, the
	// check finds no difference; inFlight is the conversation whose turn
	// runs ("" none).
	agrees := func(stage, inFlight string) {
		t.Helper()
		if keepErr != nil {
			t.Fatalf("%s: the keeper failed: %v", stage, keepErr)
		}
		l, err := reindex.List(ctx, reader, reindex.ListOptions{All: true})
		if err != nil || l.Source != "index" {
			t.Fatalf("%s: list from %s (%s, %v)", stage, l.Source, l.FallbackReason, err)
		}
		res, err := reindex.Check(ctx, reader, reindex.Options{})
		if err != nil || res.Drift() {
			t.Fatalf("%s: check: %v %+v", stage, err, res)
		}
		if inFlight == "" {
			if len(res.InFlight) > 0 {
				t.Fatalf("%s: in flight %+v", stage, res.InFlight)
			}
			rebuilt := filepath.Join(t.TempDir(), "rebuilt")
			if err := os.CopyFS(rebuilt, os.DirFS(dir)); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(rebuilt, "metadata.db"))
			os.Remove(filepath.Join(rebuilt, "metadata.db-wal"))
			os.Remove(filepath.Join(rebuilt, "metadata.db-shm"))
			os.Remove(filepath.Join(rebuilt, "runtime.lock"))
			run(t, rebuilt, reindex.Options{})
			// The copy's files have other inodes and times: their
			// fingerprints differ (the check compared the kept ones).
			kept := maskIdentities(indexRows(t, s.IndexPath()))
			want := maskIdentities(indexRows(t, filepath.Join(rebuilt, "metadata.db")))
			if d := diffLines(want, kept); d != "" {
				t.Fatalf("%s: the kept index differs from a rebuild (- rebuild, + kept):\n%s", stage, d)
			}
		} else if len(res.InFlight) != 1 || res.InFlight[0].ID != inFlight || res.InFlight[0].Kind != reindex.InFlight || !strings.Contains(res.InFlight[0].Detail, "in flight") {
			t.Fatalf("%s: in flight %+v", stage, res.InFlight)
		}
	}

	se, err := s.NewConversation(store.NewConversation{ID: "c1", Cwd: "/", SessionID: "root", Agent: "a", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := se.BeginTurn(userMsg(t, "u1", "Find the bug")); err != nil {
		t.Fatal(err)
	}
	agrees("a new conversation", "")
	keeperStep(t, se, "a1", "Looking for the bug")
	agrees("a turn in flight", "c1")
	child, err := se.Spawn("sub", "reviewer", "m2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := child.BeginTurn(userMsg(t, "t1", "Review it")); err != nil {
		t.Fatal(err)
	}
	keeperStep(t, child, "ca1", "Reviewed: fine")
	if err := child.EndTurn(store.OutcomeCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := se.SubagentReport("sub", "rep1", "fine", []convlog.Block{convlog.TextBlock("The review found nothing.")}); err != nil {
		t.Fatal(err)
	}
	agrees("a subagent's turn in the parent's", "c1")
	keeperStep(t, se, "a2", "Found the bug")
	if err := se.EndTurn(store.OutcomeCompleted, nil); err != nil {
		t.Fatal(err)
	}
	agrees("the turn ended", "")
	if err := se.Compact(store.Compaction{KeepFrom: "a2", Summary: "Looked for the bug.", Provider: "p", Model: "m"}); err != nil {
		t.Fatal(err)
	}
	agrees("a manual compaction", "")
	if err := s.Rename("c1", "The bug hunt"); err != nil {
		t.Fatal(err)
	}
	if err := se.Fork("c2", "root", ""); err != nil {
		t.Fatal(err)
	}
	agrees("a rename and a fork", "")
	if _, err := se.BeginTurn(userMsg(t, "u2", "Fix it")); err != nil {
		t.Fatal(err)
	}
	if _, err := se.BeginStep(); err != nil {
		t.Fatal(err)
	}
	if err := se.Interrupt(nil); err != nil {
		t.Fatal(err)
	}
	agrees("an interrupted turn", "")
	if err := se.Close(); err != nil {
		t.Fatal(err)
	}
	if err := child.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteAll(context.Background(), []string{"c2"}, store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	agrees("a delete", "")
}

var identity = regexp.MustCompile(`\b[0-9a-f]{32}\b`)

// maskIdentities hides the log fingerprints and identities of rows.
func maskIdentities(rows []string) []string {
	for i, r := range rows {
		rows[i] = identity.ReplaceAllString(r, "<identity>")
	}
	slices.Sort(rows)
	return rows
}

// TestCheckHintBesideAHolder: while another process holds runtime.lock,
// a difference that stays when read again is reported, and neither check
// nor list advises a command the lock refuses.
func TestCheckHintBesideAHolder(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	s, err := store.Open(ctx, dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "runtime"},
		Create: store.CreateAlways})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	se, err := s.NewConversation(store.NewConversation{ID: "c1", Cwd: "/", SessionID: "root", Agent: "a", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := se.BeginTurn(userMsg(t, "u1", "hi")); err != nil {
		t.Fatal(err)
	}
	if _, err := reindex.Run(ctx, s, reindex.Options{}); err != nil {
		t.Fatal(err)
	}
	// Without a keeper, nothing updates the index after this.
	if err := se.Interrupt(nil); err != nil {
		t.Fatal(err)
	}
	reader, err := store.Open(ctx, dir, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := reindex.Check(ctx, reader, reindex.Options{})
	if err != nil || !res.Drift() || len(res.Differences) != 1 || !strings.Contains(res.Differences[0].Detail, "running turn: logs false, index true") {
		t.Fatalf("check: %v %+v", err, res)
	}
	l, err := reindex.List(ctx, reader, reindex.ListOptions{})
	if err != nil || l.Source != "logs" || !strings.Contains(l.FallbackReason, `runtime.lock is held by pid`) ||
		!strings.Contains(l.FallbackReason, `"runtime"`) || strings.Contains(l.FallbackReason, "(run convkit reindex)") {
		t.Fatalf("list: %+v (%v)", l, err)
	}
	if h := reindex.ReindexHint(s); h != "run convkit reindex" {
		t.Fatalf("the holder's own hint: %q", h)
	}
}

// TestListBesideConversationBeingCreated: the runtime writes a new
// conversation's first session log, then its conversation log, then the
// index row. A conversation directory holding only the session log is not
// a conversation yet (listing from the logs leaves it out too): list
// still reads the index.
func TestListBesideConversationBeingCreated(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	s, err := store.Open(ctx, dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "runtime"},
		Create: store.CreateAlways, Compression: convlog.Zstd})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	k, _, err := reindex.NewKeeper(ctx, s, reindex.KeeperOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	se, err := s.NewConversation(store.NewConversation{ID: "c1", Cwd: "/", SessionID: "root", Agent: "a", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := se.BeginTurn(userMsg(t, "u1", "Find the bug")); err != nil {
		t.Fatal(err)
	}
	// c2 as the runtime leaves it between its first two writes.
	src, err := s.ConversationPath("c1")
	if err != nil {
		t.Fatal(err)
	}
	dst, err := s.ConversationPath("c2")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if n, ok := convlog.ParseName(e.Name()); ok && n.Base != store.ConversationLogBase {
			b, err := os.ReadFile(filepath.Join(src, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	reader, err := store.Open(ctx, dir, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := reindex.List(ctx, reader, reindex.ListOptions{All: true})
	if err != nil || l.Source != "index" || len(l.Conversations) != 1 {
		t.Fatalf("list from %s (%s, %v): %+v", l.Source, l.FallbackReason, err, l.Conversations)
	}
}

// TestCheckBesideAnUnfinishedCreate: while the runtime holds runtime.lock,
// a conversation whose log the first reading did not find (a create not
// finished yet) and the second reading finds whole is neither skipped nor
// a difference: check agrees, as reindex --check beside a live runtime
// must.
func TestCheckBesideAnUnfinishedCreate(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	s, k, reader := runtimeStore(t, dir, func(err error) { t.Errorf("keeper: %v", err) })
	for _, id := range []string{"c1", "c2"} {
		se, err := s.NewConversation(store.NewConversation{ID: id, Cwd: "/", SessionID: "root", Agent: "a", Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := se.BeginTurn(userMsg(t, id+"u", "Hello")); err != nil {
			t.Fatal(err)
		}
		keeperStep(t, se, id+"a", "Hi")
		if err := se.EndTurn(store.OutcomeCompleted, nil); err != nil {
			t.Fatal(err)
		}
		if err := se.Close(); err != nil {
			t.Fatal(err)
		}
	}
	c2, err := reader.ConversationPath("c2")
	if err != nil {
		t.Fatal(err)
	}
	logs, err := filepath.Glob(filepath.Join(c2, "metadata*"))
	if err != nil || len(logs) != 1 {
		t.Fatalf("c2's conversation log: %v %v", logs, err)
	}
	aside := filepath.Join(t.TempDir(), "log")
	// A link in the directory is skipped by the walk, not by the reading:
	// no second reading takes that back.
	link := filepath.Join(c2, "notes")
	if err := os.Symlink("/dev/null", link); err != nil {
		t.Fatal(err)
	}
	for _, finish := range []bool{true, false} {
		if err := os.Rename(logs[0], aside); err != nil {
			t.Fatal(err)
		}
		undo := reindex.SetBetweenReadings(func() {
			if finish {
				if err := os.Rename(aside, logs[0]); err != nil {
					t.Error(err)
				}
				// The runtime's keeper then indexes the new conversation.
				k.Changed(&store.IndexChange{ID: "c2", Conversation: &store.ConversationInfo{}, Whole: true})
			}
		})
		res, err := reindex.Check(ctx, reader, reindex.Options{})
		undo()
		if err != nil {
			t.Fatal(err)
		}
		if finish {
			if res.Drift() || len(res.Skipped) != 1 || res.Skipped[0].Path != link || res.Conversations != 2 {
				t.Fatalf("finished between the readings: drift %v, skipped %+v, conversations %d, differences %+v",
					res.Drift(), res.Skipped, res.Conversations, res.Differences)
			}
			continue
		}
		// Never finished: still skipped, and the index that holds it differs.
		if len(res.Skipped) != 2 || res.Skipped[0].Path != link || !strings.Contains(res.Skipped[1].Reason, "no conversation log") || !res.Drift() || res.Conversations != 1 {
			t.Fatalf("never finished: drift %v, skipped %+v, conversations %d", res.Drift(), res.Skipped, res.Conversations)
		}
		os.Rename(aside, logs[0])
	}
}
