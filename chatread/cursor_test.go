package chatread

import (
	"errors"
	"testing"
)

// FuzzCursorOpen: any text given back as a cursor either opens to a
// position that seals and opens again to the same position, or is
// refused with ErrBadCursor; nothing panics. Cursors this package sealed
// open to what was sealed.
func FuzzCursorOpen(f *testing.F) {
	s, err := newSealer(testKey)
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range []position{
		{Op: "messages", Asker: Chat{"c", "s"}, Target: Chat{"c", "s"}, Next: 50, Born: 1, Issued: 1_800_000_000},
		{Op: "search", Asker: Chat{"c", "s"}, Query: "the walrus", Next: 1},
	} {
		c, err := s.seal(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(c)
	}
	f.Add("")
	f.Add("c1")
	f.Add("!!")
	f.Fuzz(func(t *testing.T, cursor string) {
		p, err := s.open(cursor)
		if err != nil {
			if !errors.Is(err, ErrBadCursor) {
				t.Fatalf("refused with %v, not ErrBadCursor", err)
			}
			return
		}
		if p.Next < 0 {
			t.Fatalf("opened to a negative position %d", p.Next)
		}
		again, err := s.seal(p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := s.open(again)
		if err != nil || q != p {
			t.Fatalf("resealed %+v opens to %+v, %v", p, q, err)
		}
	})
}
