package archive

import (
	"bufio"
	"encoding/gob"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"

	"github.com/convkit/convkit/internal/durable"
)

// ExtractedList is the entries an extraction wrote, in archive order: the
// first memEntries in memory, the rest gob-encoded in an unlinked file
// beside the tree, so memory stays flat in the number of entries.
type ExtractedList struct {
	mem   []Extracted
	spill *os.File
	w     *bufio.Writer
	enc   *gob.Encoder
	dir   string // where the spill file goes
	n     int
	last  Extracted
	err   error
}

// memEntries is how many entries are held in memory (about 2 MiB).
const memEntries = 1 << 14

func (l *ExtractedList) Len() int { return l.n }

// Last is the last entry; the zero Extracted when there is none.
func (l *ExtractedList) Last() Extracted { return l.last }

// Err is the first problem All had reading the entries back.
func (l *ExtractedList) Err() error { return l.err }

// Close releases the file.
func (l *ExtractedList) Close() {
	if l != nil && l.spill != nil {
		l.spill.Close()
		l.spill = nil
	}
}

func (l *ExtractedList) add(e Extracted) error {
	if l.n < memEntries {
		l.mem = append(l.mem, e)
	} else {
		if l.spill == nil {
			f, err := durable.CreateTemp(l.dir, ".entries")
			if err != nil {
				return err
			}
			if err := os.Remove(f.Name()); err != nil {
				f.Close()
				return err
			}
			l.spill, l.w = f, bufio.NewWriterSize(f, 64<<10)
			l.enc = gob.NewEncoder(l.w)
		}
		if err := l.enc.Encode(&e); err != nil {
			return fmt.Errorf("keeping the list of entries: %w", err)
		}
	}
	l.n++
	l.last = e
	return nil
}

// All yields the first n entries; a problem reading them back ends the
// loop, and Err says it.
func (l *ExtractedList) All(n int) iter.Seq[Extracted] {
	return func(yield func(Extracted) bool) {
		n = min(n, l.n)
		for i := range min(n, len(l.mem)) {
			if !yield(l.mem[i]) {
				return
			}
		}
		if n <= len(l.mem) {
			return
		}
		if err := l.w.Flush(); err != nil {
			l.err = fmt.Errorf("keeping the list of entries: %w", err)
			return
		}
		dec := gob.NewDecoder(bufio.NewReaderSize(io.NewSectionReader(l.spill, 0, 1<<62), 64<<10))
		for range n - len(l.mem) {
			var e Extracted
			if err := dec.Decode(&e); err != nil {
				l.err = fmt.Errorf("reading the list of entries back: %w", err)
				return
			}
			if !yield(e) {
				return
			}
		}
	}
}

func newExtractedList(dir string) *ExtractedList { return &ExtractedList{dir: filepath.Dir(dir)} }
