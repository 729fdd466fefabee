package transfer

import "testing"

// TestLogBufClasses: every size up to smallLog has a class whose buffers
// hold it, at most a quarter larger (above minLogBuf), and a buffer given
// back goes to the class its capacity names.
func TestLogBufClasses(t *testing.T) {
	prev := -1
	for n := 1; n <= smallLog; n++ {
		c, size, ok := logBufClass(n)
		if !ok || c < 0 || c >= len(logBufPools) || size < n || (n > minLogBuf && size > n+n/4+1) || c < prev {
			t.Fatalf("size %d: class %d of %d bytes, ok %v (previous class %d)", n, c, size, ok, prev)
		}
		if c2, size2, _ := logBufClass(size); c2 != c || size2 != size {
			t.Fatalf("size %d: class %d of %d bytes, but a buffer of %d bytes goes to class %d of %d", n, c, size, size, c2, size2)
		}
		prev = c
	}
	if _, _, ok := logBufClass(smallLog + 1); ok {
		t.Error("a buffer larger than smallLog has a class")
	}
	b := getLogBuf(5000)
	if len(b) != 5000 || cap(b) != 5120 {
		t.Errorf("getLogBuf(5000): len %d, cap %d", len(b), cap(b))
	}
	putLogBuf(b)
	putLogBuf(make([]byte, 5001)) // not a class's capacity: dropped
}
