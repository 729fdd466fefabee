package archive

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// TestEntries: Entries yields the entries Next returns, with their content
// to read or leave, a refusal once, and a loop left early can go on.
func TestEntries(t *testing.T) {
	entries := sampleEntries()
	data, _ := write(t, entries, WriterOptions{ChunkSize: 256 << 10})

	ar, err := NewReader(bytes.NewReader(data), ReaderOptions{Archive: "a.tar.zst"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for h, err := range ar.Entries() {
		if err != nil {
			t.Fatal(err)
		}
		if h.Index != n+1 || h.Name != entries[n].name {
			t.Fatalf("entry %d: %+v", n, h)
		}
		if n%2 == 0 { // the others are left unread: the next entry skips them
			got, err := io.ReadAll(ar)
			if err != nil || !bytes.Equal(got, entries[n].data) {
				t.Fatalf("%s: content differs (%v)", h.Name, err)
			}
		}
		n++
		if n == 2 {
			break
		}
	}
	for h, err := range ar.Entries() {
		if err != nil {
			t.Fatal(err)
		}
		if h.Index != n+1 || h.Name != entries[n].name {
			t.Fatalf("entry %d after a break: %+v", n, h)
		}
		n++
	}
	if n != len(entries) {
		t.Fatalf("%d entries, want %d", n, len(entries))
	}
	ar.Close()

	// A limit refuses the fourth entry: three are yielded, then the
	// refusal once.
	ar, err = NewReader(bytes.NewReader(data), ReaderOptions{Limits: Limits{MaxEntries: 3}})
	if err != nil {
		t.Fatal(err)
	}
	defer ar.Close()
	n, errs := 0, 0
	for h, err := range ar.Entries() {
		if err != nil {
			var ae *Error
			if h != nil || !errors.Is(err, ErrRefused) || !errors.As(err, &ae) || ae.Entry != 4 {
				t.Fatalf("yielded (%v, %v), want a refusal of entry 4", h, err)
			}
			errs++
			continue // the loop ends by itself after the error
		}
		n++
	}
	if n != 3 || errs != 1 {
		t.Fatalf("%d entries and %d errors, want 3 and 1", n, errs)
	}
}
