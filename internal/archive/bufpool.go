package archive

import (
	"math/bits"
	"sync"
)

// Buffers of files read whole before they are archived are pooled by size
// class, four between two powers of two from 4 KiB to MaxPooledBuf, since
// fresh zeroed ones were a quarter of an export's allocations.
const (
	minBufShift  = 12
	maxBufShift  = 22
	minBuf       = 1 << minBufShift
	MaxPooledBuf = 1 << maxBufShift
)

// bufPools: one up to minBuf, then four per power of two.
var bufPools [1 + 4*(maxBufShift-minBufShift)]sync.Pool

// bufClass is the pool of a buffer of n bytes and its buffers' capacity;
// false for n out of (0, MaxPooledBuf].
func bufClass(n int) (class, size int, ok bool) {
	switch {
	case n <= 0 || n > MaxPooledBuf:
		return 0, 0, false
	case n <= minBuf:
		return 0, minBuf, true
	}
	k := bits.Len(uint(n - 1)) // 2^(k-1) < n <= 2^k
	step := 1 << (k - 3)
	j := (n - 1<<(k-1) + step - 1) / step // 1..4
	return 1 + 4*(k-minBufShift-1) + j - 1, 1<<(k-1) + j*step, true
}

// GetBuf returns a buffer of n bytes, its contents undefined.
func GetBuf(n int64) []byte {
	c, size, ok := bufClass(int(n))
	if !ok {
		return make([]byte, n)
	}
	if p, _ := bufPools[c].Get().(*[]byte); p != nil {
		return (*p)[:n]
	}
	return make([]byte, n, size)
}

// PutBuf gives b back for reuse; nothing may use it afterwards.
func PutBuf(b []byte) {
	if c, size, ok := bufClass(cap(b)); ok && size == cap(b) {
		b = b[:0]
		bufPools[c].Put(&b)
	}
}
