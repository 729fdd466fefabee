package reindex

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/store"
)

// TestReadFingerprintIsDirFingerprint: the fingerprint a read records is
// the one List, Check and an incremental run compute from the directory.
func TestReadFingerprintIsDirFingerprint(t *testing.T) {
	dir := t.TempDir()
	if _, err := fixtures.Sample(dir); err != nil {
		t.Fatal(err)
	}
	tree, err := reader(t, dir).Walk()
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	for _, c := range tree.Conversations {
		present[c.ID] = true
	}
	indexed := 0
	for _, c := range tree.Conversations {
		b := readConversation(c, present, true)
		if b.conv == nil {
			continue
		}
		indexed++
		if want := dirFingerprint(c); b.conv.Fingerprint != want {
			t.Errorf("%s: fingerprint %s, directory's %s", c.ID, b.conv.Fingerprint, want)
		}
	}
	if indexed < 10 {
		t.Fatalf("only %d conversations indexed", indexed)
	}
}

// TestBuildOrderAndEarlyStop: results come in the order of the
// conversations whatever the readers' pace, and a failing sink stops the
// readers without waiting for the rest.
func TestBuildOrderAndEarlyStop(t *testing.T) {
	dir := t.TempDir()
	if _, err := fixtures.Generate(dir, fixtures.Options{Seed: 7, Conversations: 60, OrdinaryOnly: true}); err != nil {
		t.Fatal(err)
	}
	tree, err := reader(t, dir).Walk()
	if err != nil {
		t.Fatal(err)
	}
	convs := tree.Conversations
	present := map[string]bool{}
	for _, c := range convs {
		present[c.ID] = true
	}
	for _, jobs := range []int{1, 2, 5} {
		var seen []string
		err := build(context.Background(), convs, present, Options{Jobs: jobs}, nil, func(b *built) error {
			// A slow writer: the readers run ahead of it.
			time.Sleep(time.Millisecond)
			seen = append(seen, b.dir.ID)
			return nil
		})
		if err != nil || len(seen) != len(convs) {
			t.Fatalf("jobs %d: %d results, %v", jobs, len(seen), err)
		}
		for i, c := range convs {
			if seen[i] != c.ID {
				t.Fatalf("jobs %d: result %d is %s, want %s", jobs, i, seen[i], c.ID)
			}
		}

		stop := errors.New("stop")
		n := 0
		done := make(chan error, 1)
		go func() {
			done <- build(context.Background(), convs, present, Options{Jobs: jobs}, nil, func(*built) error {
				if n++; n == 5 {
					return stop
				}
				return nil
			})
		}()
		select {
		case err := <-done:
			if err != stop {
				t.Fatalf("jobs %d: err = %v, want the sink's", jobs, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("jobs %d: build did not return after the sink failed", jobs)
		}
	}
}

// TestReadOrder: conversations of similar sizes keep their order; a large
// one is read ahead of its turn by about jobs times its size in the bytes
// before it; one reader reads in order.
func TestReadOrder(t *testing.T) {
	sizes := []int64{10, 10, 10, 10, 10, 10, 25, 10, 10, 10}
	if got := readOrder(sizes, 1); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("one job: %v", got)
	}
	// The 25 falls at 60, less 2×25: 10, as the 10 at 30 (30−2×10); ties
	// keep the order.
	if got := readOrder(sizes, 2); !slices.Equal(got, []int{0, 1, 2, 3, 6, 4, 5, 7, 8, 9}) {
		t.Errorf("two jobs: %v", got)
	}
	if got := readOrder([]int64{1, 1, 1, 1000}, 2); !slices.Equal(got, []int{3, 0, 1, 2}) {
		t.Errorf("a large one last: %v", got)
	}
}

// TestReadQueueNeverStalls: whatever the read order and however tight the
// bounds, the conversation the writer takes next is handed out, and every
// conversation once.
func TestReadQueueNeverStalls(t *testing.T) {
	const n = 200
	for _, tc := range []struct {
		name     string
		order    []int
		maxTaken int
		maxHeld  int64
	}{
		{"in order", nil, 4, 1 << 20},
		{"reversed", reversed(n), 4, 1 << 20},
		{"reversed, one taken", reversed(n), 1, 1 << 20},
		{"reversed, text full", reversed(n), 64, 1},
	} {
		order := tc.order
		if order == nil {
			order = reversed(n)
			slices.Reverse(order)
		}
		for _, jobs := range []int{1, 2, 5} {
			q := newReadQueue(order, tc.maxTaken, tc.maxHeld)
			results := make([]chan int, n)
			for i := range results {
				results[i] = make(chan int, 1)
			}
			var wg sync.WaitGroup
			for range jobs {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						i, ok := q.take()
						if !ok {
							return
						}
						q.read(1)
						results[i] <- i
					}
				}()
			}
			done := make(chan bool)
			go func() {
				for i := range n {
					if got := <-results[i]; got != i {
						t.Errorf("%s, %d jobs: result %d for %d", tc.name, jobs, got, i)
					}
					q.written(i, 1)
				}
				done <- true
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatalf("%s, %d jobs: stalled", tc.name, jobs)
			}
			wg.Wait()
		}
	}
}

func reversed(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = n - 1 - i
	}
	return out
}

// readConversation replays one conversation's logs into index rows.
func readConversation(c store.ConversationDir, present map[string]bool, withText bool) *built {
	return readConversationWith(context.Background(), c, readEnv{present: func(id string) bool { return present[id] }, withText: withText})
}

// TestLogIdentityIsTakenWithTheFingerprint: a conversation log that changes
// after the fingerprint pass stated it, before it is read, is indexed with
// the identity that pass saw, so listing finds it changed as Check does
// (the fingerprint), and reads it again.
func TestLogIdentityIsTakenWithTheFingerprint(t *testing.T) {
	dir := t.TempDir()
	if _, err := fixtures.Generate(dir, fixtures.Options{Seed: 7, Conversations: 3, OrdinaryOnly: true}); err != nil {
		t.Fatal(err)
	}
	tree, err := reader(t, dir).Walk()
	if err != nil {
		t.Fatal(err)
	}
	convs := tree.Conversations
	present := map[string]bool{}
	for _, c := range convs {
		present[c.ID] = true
	}
	c := convs[0]
	if c.ConversationLog() == nil {
		t.Fatalf("%s has no conversation log", c.ID)
	}
	var seenID, seenFP string
	keep := func(d store.ConversationDir, fp string) *built {
		if d.ID == c.ID {
			// Called just after the pass stated d's logs: change the conversation log's mtime and ctime.
			seenID, seenFP = logIdentity(d), fp
			later := time.Now().Add(time.Hour)
			if err := os.Chtimes(d.ConversationLog().Path, later, later); err != nil {
				t.Error(err)
			}
		}
		return nil
	}
	var got *built
	err = build(context.Background(), convs, present, Options{Jobs: 1}, keep, func(b *built) error {
		if b.dir.ID == c.ID {
			got = b
		}
		return nil
	})
	if err != nil || got == nil || got.conv == nil {
		t.Fatalf("build: %v, %+v", err, got)
	}
	if seenID == logIdentity(c) || seenFP == dirFingerprint(c) {
		t.Fatal("the conversation log's identity did not change")
	}
	if got.conv.LogIdentity != seenID || got.conv.Fingerprint != seenFP {
		t.Errorf("indexed identity %s, fingerprint %s; the pass saw %s, %s (now %s)",
			got.conv.LogIdentity, got.conv.Fingerprint, seenID, seenFP, logIdentity(c))
	}
}
