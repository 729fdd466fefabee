package durable

import (
	"io"
	"os"
	"sync"
)

// Writeback writes to a file and starts the writeback of each range of every
// bytes while writing goes on, so the final fsync waits for the last range
// only; the writeback runs on its own goroutine, so a congested disk holds up
// that goroutine, not the writing.
type Writeback struct {
	f       *os.File
	every   int64
	off     int64 // the file offset the next write starts at
	started int64 // the bytes before it have had their writeback started
	ranges  chan [2]int64
	done    chan struct{}
	close   sync.Once
}

// startWriteback is StartWriteback; a test records the ranges instead.
var startWriteback = StartWriteback

// NewWriteback returns a Writeback that writes to f at its current offset.
// Close must be called once the writing ends.
func NewWriteback(f *os.File, every int64) *Writeback {
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		off = 0
	}
	w := &Writeback{f: f, every: every, off: off, started: off, ranges: make(chan [2]int64, 1), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for r := range w.ranges {
			startWriteback(f, r[0], r[1])
		}
	}()
	return w
}

// Write writes p to the file.
func (w *Writeback) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	if w.off-w.started >= w.every {
		select {
		case w.ranges <- [2]int64{w.started, w.off - w.started}:
			w.started = w.off
		default:
		}
	}
	return n, err
}

// Close waits for the writebacks started; it does not close the file.
func (w *Writeback) Close() {
	w.close.Do(func() {
		close(w.ranges)
		<-w.done
	})
}
