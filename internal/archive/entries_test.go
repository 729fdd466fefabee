package archive

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestNext: Next returns the entries in order, skipping content left
// unread, then io.EOF; a refusal ends the reading and is returned again.
func TestNext(t *testing.T) {
	entries := sampleEntries()
	data, _ := write(t, entries, WriterOptions{ChunkSize: 256 << 10})

	ar, err := NewReader(bytes.NewReader(data), ReaderOptions{Archive: "a.tar.zst"})
	if err != nil {
		t.Fatal(err)
	}
	for n := range entries {
		h, err := ar.Next()
		if err != nil || h.Index != n+1 || h.Name != entries[n].name {
			t.Fatalf("entry %d: %+v %v", n, h, err)
		}
		if n%2 == 0 { // the others are left unread: the next entry skips them
			got, err := io.ReadAll(ar)
			if err != nil || !bytes.Equal(got, entries[n].data) {
				t.Fatalf("%s: content differs (%v)", h.Name, err)
			}
		}
	}
	if h, err := ar.Next(); err != io.EOF {
		t.Fatalf("after the last entry: %+v %v", h, err)
	}
	ar.Close()

	// A limit refuses the fourth entry, and every later call.
	ar, err = NewReader(bytes.NewReader(data), ReaderOptions{Limits: Limits{MaxEntries: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer ar.Close()
	for range 3 {
		if _, err := ar.Next(); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		h, err := ar.Next()
		var ae *Error
		if h != nil || !errors.Is(err, ErrRefused) || !errors.As(err, &ae) || ae.Entry != 4 {
			t.Fatalf("(%v, %v), want a refusal of entry 4", h, err)
		}
	}
}
