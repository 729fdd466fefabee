package reindex

import (
	"context"
	"os"
	"sort"
	"testing"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/store"
)

// TestNames: every conversation directory is named, with its title once
// metadata.db holds it; a conversation the index does not know has no
// title, and one the index knows but the store no longer has is not named.
func TestNames(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rep, err := fixtures.Generate(dir, fixtures.Options{Seed: 5, Conversations: 12})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	present := func() {
		want = nil
		for _, c := range rep.Conversations {
			if _, err := os.Lstat(c.Dir); err == nil {
				want = append(want, c.ID)
			}
		}
		sort.Strings(want)
	}
	present()
	names, err := Names(ctx, reader(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	check := func(names []index.Summary, titled bool) {
		t.Helper()
		if len(names) != len(want) {
			t.Fatalf("%d names, want %d", len(names), len(want))
		}
		n := 0
		for i, nm := range names {
			if nm.ID != want[i] {
				t.Errorf("name %d is %q, want %q", i, nm.ID, want[i])
			}
			if nm.Title != "" {
				n++
			}
		}
		if titled && n < len(want)-2 || !titled && n != 0 {
			t.Errorf("%d of %d titled (index: %v)", n, len(want), titled)
		}
	}
	check(names, false) // no index yet

	s, err := store.Open(ctx, dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Run(ctx, s, Options{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	present() // reindex finished the interrupted deletion
	names, err = Names(ctx, reader(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	check(names, true)

	// Gone from the store, not from the index: not named.
	gone := want[0]
	p, _ := reader(t, dir).ConversationPath(gone)
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	want = want[1:]
	names, err = Names(ctx, reader(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	check(names, true)
}
