package chatread

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/store"
)

func items(t *testing.T, s *store.Store, conv, session string) []TranscriptItem {
	t.Helper()
	var out []TranscriptItem
	if err := ReadTranscript(context.Background(), s, conv, session, func(it *TranscriptItem) error {
		out = append(out, *it)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func history(t *testing.T, path string) []string {
	t.Helper()
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var h convlog.History
	for e, err := range r.Events() {
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Apply(e); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for _, m := range h.Messages() {
		ids = append(ids, m.Message.ID())
	}
	return ids
}

// TestForkAfterCompaction: the fork's log holds the compacted history
// only; its transcript is the source's record through the cut (the items
// the compaction summarised, the summary, a failed and an interrupted turn
// included), then what the fork did, each message once, in order.
func TestForkAfterCompaction(t *testing.T) {
	dir := t.TempDir()
	rep, err := fixtures.Sample(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(context.Background(), dir, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fork := rep.Find(fixtures.CaseForkAfterCompaction)
	src := rep.Find(fixtures.CaseCompaction)
	info, err := s.ReadConversation(fork.ID)
	if err != nil {
		t.Fatal(err)
	}
	root := info.RootSession().ID
	got := items(t, s, fork.ID, root)
	srcInfo, _ := s.ReadConversation(src.ID)
	srcItems := items(t, s, src.ID, srcInfo.RootSession().ID)

	var inherited, own int
	seen := map[string]bool{}
	var summary, interrupted, cut bool
	var ended []string
	for i, it := range got {
		if seen[it.ID] && it.ID != "" {
			t.Fatalf("item %d (%s) twice", i, it.ID)
		}
		seen[it.ID] = true
		if it.Ended != "" {
			ended = append(ended, it.Ended)
		}
		if it.Inherited {
			inherited++
			if own > 0 {
				t.Fatalf("an inherited item after the fork's own: %+v", it)
			}
			if it.Conversation != src.ID {
				t.Fatalf("inherited item of %q", it.Conversation)
			}
		} else {
			own++
			if it.Conversation != fork.ID {
				t.Fatalf("own item of %q", it.Conversation)
			}
		}
		summary = summary || it.Summary
		interrupted = interrupted || it.Interrupted
	}
	// The source's whole record up to the cut: every item of its
	// transcript (the fork took all of it), the summarised ones included.
	if inherited != len(srcItems) || own == 0 {
		t.Fatalf("%d inherited items (the source has %d), %d own", inherited, len(srcItems), own)
	}
	for i := range srcItems {
		if got[i].ID != srcItems[i].ID {
			t.Fatalf("item %d is %s, the source's is %s", i, got[i].ID, srcItems[i].ID)
		}
	}
	for _, it := range srcItems {
		if it.Type == convlog.TypeAssistantMessage && it.Turn == 1 {
			cut = true
		}
	}
	if !summary || !interrupted || !cut || fmt.Sprint(ended) != "[max-tokens error interrupted]" {
		t.Fatalf("summary %v, interrupted %v, turn 1 answer %v, turns ended %v", summary, interrupted, cut, ended)
	}
	// What the model reads of the fork is less: the summary stands for
	// the older items.
	pathLog, _ := s.FindLog(fork.ID, root)
	path := pathLog.Path
	if h := history(t, path); len(h) >= len(got) {
		t.Fatalf("history %d messages, transcript %d", len(h), len(got))
	}
	// By path, in its store, the same; outside a store the log is refused.
	var byPath []TranscriptItem
	if err := ReadTranscriptLog(context.Background(), s, path, func(it *TranscriptItem) error { byPath = append(byPath, *it); return nil }); err != nil || len(byPath) != len(got) {
		t.Fatalf("by path: %d items, %v", len(byPath), err)
	}
	copyPath := filepath.Join(t.TempDir(), filepath.Base(path))
	b, _ := os.ReadFile(path)
	os.WriteFile(copyPath, b, 0o600)
	if err := ReadTranscriptLog(context.Background(), nil, copyPath, func(*TranscriptItem) error { return nil }); err == nil {
		t.Fatal("a seeded log read outside its store")
	}
	// The source's own transcript is what its history kept and what it
	// summarised: more than its history.
	srcPathLog, _ := s.FindLog(src.ID, srcInfo.RootSession().ID)
	srcPath := srcPathLog.Path
	if h := history(t, srcPath); len(h) >= len(srcItems) {
		t.Fatalf("source history %d, transcript %d", len(h), len(srcItems))
	}
}

// TestMissingSource: a fork whose source is gone says which.
func TestMissingSource(t *testing.T) {
	dir := t.TempDir()
	rep, err := fixtures.Sample(dir)
	if err != nil {
		t.Fatal(err)
	}
	fork := rep.Find(fixtures.CaseForkAfterCompaction)
	src := rep.Find(fixtures.CaseCompaction)
	if err := os.RemoveAll(src.Dir); err != nil {
		t.Fatal(err)
	}
	s, _ := store.Open(context.Background(), dir, store.OpenOptions{})
	info, _ := s.ReadConversation(fork.ID)
	err = ReadTranscript(context.Background(), s, fork.ID, info.RootSession().ID, func(*TranscriptItem) error { return nil })
	if !errors.Is(err, ErrMissingSource) {
		t.Fatalf("err = %v", err)
	}
}

// TestOlderVersion: a log of an older format reads as its upgrade does,
// without a byte of it changing.
func TestOlderVersion(t *testing.T) {
	dir := t.TempDir()
	rep, err := fixtures.Sample(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := store.Open(context.Background(), dir, store.OpenOptions{})
	for _, c := range rep.Conversations {
		if c.Version != 1 || !c.Has(fixtures.CaseHistorical) {
			continue
		}
		info, _ := s.ReadConversation(c.ID)
		pathLog, _ := s.FindLog(c.ID, info.RootSession().ID)
		path := pathLog.Path
		before, _ := os.ReadFile(path)
		got := items(t, s, c.ID, info.RootSession().ID)
		after, _ := os.ReadFile(path)
		if len(got) == 0 || string(before) != string(after) {
			t.Fatalf("v1 transcript: %d items, file changed %v", len(got), string(before) != string(after))
		}
		return
	}
	t.Fatal("no v1 conversation")
}
