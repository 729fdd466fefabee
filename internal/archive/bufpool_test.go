package archive

import "testing"

// TestBufClasses: every size up to MaxPooledBuf has a class whose buffers
// hold it, at most a quarter larger (above minBuf), and a buffer given back
// goes to the class its capacity names.
func TestBufClasses(t *testing.T) {
	prev := -1
	for n := 1; n <= MaxPooledBuf; n++ {
		c, size, ok := bufClass(n)
		if !ok || c < 0 || c >= len(bufPools) || size < n || (n > minBuf && size > n+n/4+1) || c < prev {
			t.Fatalf("size %d: class %d of %d bytes, ok %v (previous class %d)", n, c, size, ok, prev)
		}
		if c2, size2, _ := bufClass(size); c2 != c || size2 != size {
			t.Fatalf("size %d: class %d of %d bytes, but a buffer of %d bytes goes to class %d of %d", n, c, size, size, c2, size2)
		}
		prev = c
	}
	if _, _, ok := bufClass(MaxPooledBuf + 1); ok {
		t.Error("a buffer larger than MaxPooledBuf has a class")
	}
	b := GetBuf(5000)
	if len(b) != 5000 || cap(b) != 5120 {
		t.Errorf("GetBuf(5000): len %d, cap %d", len(b), cap(b))
	}
	PutBuf(b)
	PutBuf(make([]byte, 5001)) // not a class's capacity: dropped
}
