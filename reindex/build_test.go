package reindex

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/convkit/convkit/fixtures"
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
