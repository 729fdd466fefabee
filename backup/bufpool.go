package backup

import (
	"math/bits"
	"sync"
)

// Buffers for small logs, pooled by power-of-two size class from 4 KiB to
// smallLog: thousands of small logs are read into them, and a recycled
// buffer needs neither an allocation nor zeroing (pread fills it).
const (
	minBufClass = 12 // 4 KiB
	maxBufClass = 22 // smallLog
)

var bufPools [maxBufClass + 1]sync.Pool

func init() {
	if 1<<maxBufClass != smallLog {
		panic("backup: maxBufClass must be log2(smallLog)")
	}
}

func bufClass(n int) int {
	c := bits.Len(uint(max(n, 1) - 1))
	return max(c, minBufClass)
}

// getBuf returns a buffer of length n (at most smallLog).
func getBuf(n int) []byte {
	c := bufClass(n)
	if c >= len(bufPools) {
		return make([]byte, n)
	}
	if b, ok := bufPools[c].Get().(*[]byte); ok {
		return (*b)[:n]
	}
	return make([]byte, n, 1<<c)
}

// putBuf recycles a buffer getBuf returned.
func putBuf(b []byte) {
	c := bufClass(cap(b))
	if c >= len(bufPools) || cap(b) != 1<<c {
		return
	}
	b = b[:0]
	bufPools[c].Put(&b)
}
