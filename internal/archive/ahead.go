package archive

import (
	"context"
	"iter"
	"sync"
)

// Ahead bounds how far ReadAhead's loads run ahead of its sink.
type Ahead struct {
	Workers int   // goroutines loading
	Items   int   // loaded results waiting at most
	Bytes   int64 // bytes the waiting results hold at most (0: no cap)
	Files   int   // files the waiting results hold open at most (0: no cap)
}

// ReadAhead loads items with a.Workers goroutines and hands the results to
// sink in order, in the caller's goroutine. cost (nil: none) is what a
// result holds against a.Bytes and a.Files; release frees those loaded but
// never handed over. It returns sink's first error, else ctx's if ctx ended
// (even after the last item: it cannot tell), else nil.
func ReadAhead[T, R any](ctx context.Context, items iter.Seq[T], a Ahead, load func(T) R, cost func(R) (int64, int), sink func(R) error, release func(R)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	order := make(chan chan R, a.Items) // each load's result, in the items' order
	// To long-lived workers: a goroutine per item grew its stack each read (5% of an export's CPU).
	type task struct {
		it   T
		done chan R
	}
	work := make(chan task)
	var (
		mu    sync.Mutex
		room  = sync.NewCond(&mu)
		bytes int64
		files int
		ended bool
	)
	hold := func(r R, sign int) {
		if cost == nil {
			return
		}
		b, f := cost(r)
		mu.Lock()
		bytes += int64(sign) * b
		files += sign * f
		room.Broadcast()
		mu.Unlock()
	}
	for range max(a.Workers, 1) {
		go func() {
			for t := range work {
				r := load(t.it)
				hold(r, 1)
				t.done <- r
			}
		}()
	}
	go func() {
		defer close(work)
		defer close(order)
		for it := range items {
			mu.Lock()
			for (a.Bytes > 0 && bytes >= a.Bytes || a.Files > 0 && files >= a.Files) && !ended {
				room.Wait()
			}
			stop := ended
			mu.Unlock()
			if stop {
				return
			}
			done := make(chan R, 1)
			select {
			case order <- done:
			case <-ctx.Done():
				return
			}
			// Always taken: a worker never blocks, and what is in order is drained.
			work <- task{it, done}
		}
	}()
	var err error
	for done := range order {
		select {
		case r := <-done:
			hold(r, -1)
			err = sink(r)
		case <-ctx.Done():
			err = ctx.Err()
			release(<-done) // taken from order: the drain below will not see it
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		err = ctx.Err() // the items stopped short when it ended
	}
	cancel()
	mu.Lock()
	ended = true
	room.Broadcast()
	mu.Unlock()
	// Every result in order is loaded, or being loaded.
	for done := range order {
		release(<-done)
	}
	return err
}
