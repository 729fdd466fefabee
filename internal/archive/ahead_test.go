package archive

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
)

// TestReadAhead: results reach the sink in the items' order, the waiting
// results never hold more files than the cap plus one a worker, and after
// the sink fails every loaded result not handed over is released.
func TestReadAhead(t *testing.T) {
	items := make([]int, 200)
	for i := range items {
		items[i] = i
	}
	var open, most, released atomic.Int64
	load := func(i int) int {
		n := open.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		return i
	}
	cost := func(int) (int64, int) { return 10, 1 }
	a := Ahead{Workers: 4, Items: 64, Bytes: 1 << 20, Files: 8}
	next := 0
	errStop := errors.New("stop")
	err := ReadAhead(context.Background(), slices.Values(items), a, load, cost, func(i int) error {
		open.Add(-1)
		if i != next {
			t.Fatalf("sink got %d, want %d", i, next)
		}
		next++
		if i == 150 {
			return errStop
		}
		return nil
	}, func(int) { open.Add(-1); released.Add(1) })
	if !errors.Is(err, errStop) || next != 151 {
		t.Fatalf("err %v after %d results, want stop after 151", err, next)
	}
	if m := most.Load(); m > int64(a.Files+a.Workers+1) {
		t.Errorf("%d results held at once, cap %d files and %d workers", m, a.Files, a.Workers)
	}
	if n := open.Load(); n != 0 {
		t.Errorf("%d results neither sunk nor released (%d released)", n, released.Load())
	}
}

// TestReadAheadCancelled: when the caller's context ends mid-run, every
// loaded result is still either sunk or released, once.
func TestReadAheadCancelled(t *testing.T) {
	items := make([]int, 200)
	for i := range items {
		items[i] = i
	}
	for round := range 30 {
		ctx, cancel := context.WithCancel(context.Background())
		var loaded, sunk, released atomic.Int64
		load := func(i int) int { loaded.Add(1); return i }
		err := ReadAhead(ctx, slices.Values(items), Ahead{Workers: 1 + round%4, Items: 16}, load, nil, func(i int) error {
			sunk.Add(1)
			if i == 50 {
				cancel()
			}
			return nil
		}, func(int) { released.Add(1) })
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("round %d: err %v, want context.Canceled", round, err)
		}
		if l, s, r := loaded.Load(), sunk.Load(), released.Load(); l != s+r {
			t.Fatalf("round %d: %d loaded, %d sunk, %d released", round, l, s, r)
		}
	}
}
