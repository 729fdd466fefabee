package convlog

import "testing"

func TestSpareBufs(t *testing.T) {
	s := spareBufs{n: 2}
	if b := s.get(0); b != nil {
		t.Fatalf("an empty list gave a buffer of %d", cap(b))
	}
	if d := s.put(make([]byte, 5, 10)); d != nil {
		t.Fatalf("dropped %d with room left", cap(d))
	}
	if d := s.put(make([]byte, 0, 30)); d != nil {
		t.Fatalf("dropped %d with room left", cap(d))
	}
	// Full: a larger buffer replaces the smallest, a smaller one is not kept.
	if d := s.put(make([]byte, 0, 20)); cap(d) != 10 {
		t.Fatalf("dropped %d, want the buffer of 10", cap(d))
	}
	if d := s.put(make([]byte, 0, 15)); cap(d) != 15 {
		t.Fatalf("dropped %d, want the buffer of 15 offered", cap(d))
	}
	// The smallest that fits, empty; none when none fits.
	if b := s.get(31); b != nil {
		t.Fatalf("got %d for 31", cap(b))
	}
	if b := s.get(18); cap(b) != 20 || len(b) != 0 {
		t.Fatalf("got len %d cap %d for 18, want an empty 20", len(b), cap(b))
	}
	if b := s.get(0); cap(b) != 30 {
		t.Fatalf("got %d, want the 30 left", cap(b))
	}
	if b := s.get(0); b != nil {
		t.Fatalf("got %d from an emptied list", cap(b))
	}
}
