package durable

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestWriteback writes through a Writeback that starts at an offset, in
// writes of odd sizes, and checks that the file holds exactly what was
// written and that the writeback was started for consecutive ranges of
// at least every bytes from that offset, none past what was written (a
// range the writeback goroutine was not ready for joins the next, so how
// much the last range leaves depends on its pace).
func TestWriteback(t *testing.T) {
	var mu sync.Mutex
	var got [][2]int64
	startWriteback = func(f *os.File, off, n int64) {
		mu.Lock()
		got = append(got, [2]int64{off, n})
		mu.Unlock()
		StartWriteback(f, off, n)
	}
	defer func() { startWriteback = StartWriteback }()

	p := filepath.Join(t.TempDir(), "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := []byte("head of the file\n")
	if _, err := f.Write(head); err != nil {
		t.Fatal(err)
	}
	const every = 4096
	w := NewWriteback(f, every)
	var want bytes.Buffer
	want.Write(head)
	for i := 0; i < 200; i++ {
		b := bytes.Repeat([]byte{byte('a' + i%26)}, 100+i*7)
		if n, err := w.Write(b); err != nil || n != len(b) {
			t.Fatalf("write %d: %d, %v", i, n, err)
		}
		want.Write(b)
	}
	w.Close()
	w.Close() // a second Close does nothing
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, want.Bytes()) {
		t.Fatalf("the file holds %d bytes, not the %d written", len(b), want.Len())
	}
	if len(got) == 0 {
		t.Fatal("no writeback was started")
	}
	at := int64(len(head))
	for _, r := range got {
		if r[0] != at || r[1] < every {
			t.Fatalf("ranges %v: want consecutive ranges of at least %d bytes from %d", got, every, len(head))
		}
		at += r[1]
	}
	if at > int64(want.Len()) {
		t.Fatalf("ranges %v end at %d of %d bytes written", got, at, want.Len())
	}
}
