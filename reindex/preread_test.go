package reindex_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// preread reads the session log at p strictly, as import does, and
// collects its Preread; nil when the read fails or the rules refuse it.
func preread(t *testing.T, p, sessionID string) *reindex.Preread {
	t.Helper()
	x := reindex.NewSessionIndexer(p, sessionID)
	r, err := openLog(p)
	if err != nil {
		return nil
	}
	defer r.Close()
	x.Begin(r)
	for e, err := range r.Events() {
		if err != nil {
			return nil
		}
		x.Add(e)
	}
	return x.Finish(r)
}

// TestPrereadsEqualRebuild: a rebuild from the Prereads of a strict read of
// every session log writes exactly the index a rebuild reading the logs
// writes (every row, the search text included, the skips with their
// reasons), reads none of the logs whose Prereads stand for them, and does
// not take a Preread for a log whose identity changed since (one rewritten
// in place, whose Preread is made to lie), nor for one the rules refuse.
func TestPrereadsEqualRebuild(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "data")
	if _, err := fixtures.Generate(dir, fixtures.Options{Seed: 5, Conversations: 24}); err != nil {
		t.Fatal(err)
	}
	// A session log each of whose lines is well formed but that breaks
	// the rules: the rebuild skips its conversation.
	tree := walkOf(t, dir)
	var refused, rewritten string
	for _, c := range tree.Conversations {
		for _, l := range c.Logs {
			if l.IsConversationLog || l.Current.Compression != convlog.Plain || preread(t, l.Path, l.ID) == nil {
				continue
			}
			switch {
			case refused == "":
				refused = l.Path
			case rewritten == "" && filepath.Dir(l.Path) != filepath.Dir(refused):
				rewritten = l.Path
			}
		}
	}
	if refused == "" || rewritten == "" {
		t.Fatal("the generated store has too few plain session logs")
	}
	b, err := os.ReadFile(refused)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var last struct{ Seq int64 }
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	b = fmt.Appendf(b, `{"type":"step/start","seq":%d,"time":5,"data":{"turn":99,"step":2}}`+"\n", last.Seq+1)
	if err := os.WriteFile(refused, b, 0o600); err != nil {
		t.Fatal(err)
	}

	pres := map[string]*reindex.Preread{}
	var loads atomic.Int64
	want := 0
	for _, c := range walkOf(t, dir).Conversations {
		for _, l := range c.Logs {
			if l.IsConversationLog {
				continue
			}
			pr := preread(t, l.Path, l.ID)
			if pr == nil {
				continue
			}
			msgs := pr.Msgs
			pr.Msgs, pr.Load = nil, func() ([]index.Message, error) {
				loads.Add(1)
				return msgs, nil
			}
			pres[l.Path] = pr
		}
	}
	if pres[refused] != nil {
		t.Fatal("a log the rules refuse has a Preread")
	}
	if n, err := readAll(refused); err != nil || n == 0 {
		t.Fatalf("the refused log does not read to its end: %d events, %v", n, err)
	}
	// Rewritten with the same bytes: another inode. Its Preread now lies.
	stale := pres[rewritten]
	if stale == nil {
		t.Fatalf("no Preread for %s", rewritten)
	}
	stale.Events++
	stale.Load = func() ([]index.Message, error) {
		return []index.Message{{SessionID: "stale", Seq: 1, Role: "user", Text: "stale"}}, nil
	}
	b, err = os.ReadFile(rewritten)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(rewritten); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rewritten, b, 0o600); err != nil {
		t.Fatal(err)
	}

	fromReads := run(t, dir, reindex.Options{Prereads: func(p string) *reindex.Preread { return pres[p] }})
	// Every Preread is taken but the stale one's and those of the
	// conversations the rebuild skips or removes (their logs are not all
	// read).
	for p := range pres {
		conv := filepath.Dir(p)
		if _, err := os.Lstat(conv); p == rewritten || err != nil {
			continue
		}
		skipped := false
		for _, sk := range fromReads.Skipped {
			skipped = skipped || sk.Path == conv || filepath.Dir(sk.Path) == conv
		}
		if !skipped {
			want++
		}
	}
	if got := loads.Load(); got != int64(want) || want == 0 {
		t.Fatalf("%d Prereads taken, want %d", got, want)
	}
	if !slices.ContainsFunc(fromReads.Skipped, func(sk store.Item) bool {
		return sk.Path == refused
	}) {
		t.Fatalf("skipped %+v, want the refused log's conversation", fromReads.Skipped)
	}
	got := dump(t, filepath.Join(dir, store.IndexFileName))
	if err := os.Remove(filepath.Join(dir, store.IndexFileName)); err != nil {
		t.Fatal(err)
	}
	full := run(t, dir, reindex.Options{})
	if d := diffLines(got, dump(t, filepath.Join(dir, store.IndexFileName))); d != "" {
		t.Fatalf("the index built from the reads differs from the rebuild (-reads +rebuild):\n%s", d)
	}
	if !slices.Equal(skipPaths(fromReads.Skipped), skipPaths(full.Skipped)) || fromReads.Messages != full.Messages || fromReads.Sessions != full.Sessions {
		t.Fatalf("results differ:\nreads   %+v\nrebuild %+v", fromReads, full)
	}
}

// readAll reads the log at p to its end and counts its events.
func readAll(p string) (int, error) {
	r, err := openLog(p)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n := 0
	for _, err := range r.Events() {
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// openLog opens the log at p, a file of a store, as the store opens it.
func openLog(p string) (*convlog.Reader, error) {
	l, err := store.LooseLog(p)
	if err != nil {
		return nil, err
	}
	return l.Open(convlog.ReaderOptions{})
}
