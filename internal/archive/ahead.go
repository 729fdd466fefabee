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
// never handed over.
func ReadAhead[T, R any](ctx context.Context, items iter.Seq[T], a Ahead, load func(T) R, cost func(R) (int64, int), sink func(R) error, release func(R)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type slot struct {
		item T
		done chan R
	}
	order := make(chan *slot, a.Items)
	work := make(chan *slot)
	var (
		mu    sync.Mutex
		room  = sync.NewCond(&mu)
		bytes int64
		files int
		ended bool
	)
	full := func() bool {
		return (a.Bytes > 0 && bytes >= a.Bytes) || (a.Files > 0 && files >= a.Files)
	}
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
	var wg sync.WaitGroup
	for range a.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range work {
				r := load(s.item)
				hold(r, 1)
				s.done <- r
			}
		}()
	}
	go func() {
		defer close(order)
		defer close(work)
		for it := range items {
			mu.Lock()
			for full() && !ended {
				room.Wait()
			}
			stop := ended
			mu.Unlock()
			if stop {
				return
			}
			s := &slot{item: it, done: make(chan R, 1)}
			select {
			case order <- s:
			case <-ctx.Done():
				return
			}
			select {
			case work <- s:
			case <-ctx.Done():
				return
			}
		}
	}()
	var err error
	for s := range order {
		select {
		case r := <-s.done:
			hold(r, -1)
			err = sink(r)
		case <-ctx.Done():
			err = ctx.Err()
		}
		if err != nil {
			break
		}
	}
	cancel()
	mu.Lock()
	ended = true
	room.Broadcast()
	mu.Unlock()
	wg.Wait()
	for s := range order {
		select {
		case r := <-s.done:
			release(r)
		default:
		}
	}
	return err
}
