package transfer

import (
	"math/bits"
	"sync"
)

// The buffers small logs are read into (at most smallLog bytes) are
// recycled once their conversation is archived, and once the plan is done
// with a conversation log: an export read every small log into a buffer
// of its own, a quarter of its allocations (224 of 925 MB on the
// realistic bench store), each buffer zeroed when it was made and
// overwritten at once. A buffer is taken from the pool of its size class:
// four classes between two powers of two, so that a buffer is at most a
// quarter larger than the log.
const (
	minLogBufShift = 12 // minLogBuf is 1 << minLogBufShift
	minLogBuf      = 1 << minLogBufShift
	smallLogShift  = 20 // smallLog is 1 << smallLogShift
)

// smallLog must be 1 << smallLogShift (neither array length is negative).
var (
	_ [smallLog - 1<<smallLogShift]struct{}
	_ [1<<smallLogShift - smallLog]struct{}
)

// logBufPools are a pool for buffers up to minLogBuf, then four for each
// power of two up to smallLog.
var logBufPools [1 + 4*(smallLogShift-minLogBufShift)]sync.Pool

// logBufClass is the pool of a buffer of n bytes (0 < n <= smallLog) and
// the capacity of that pool's buffers; ok is false for n out of range.
func logBufClass(n int) (class, size int, ok bool) {
	switch {
	case n <= 0 || n > smallLog:
		return 0, 0, false
	case n <= minLogBuf:
		return 0, minLogBuf, true
	}
	k := bits.Len(uint(n - 1)) // 2^(k-1) < n <= 2^k
	step := 1 << (k - 3)
	j := (n - 1<<(k-1) + step - 1) / step // 1..4
	return 1 + 4*(k-minLogBufShift-1) + j - 1, 1<<(k-1) + j*step, true
}

// getLogBuf returns a buffer of n bytes, its contents undefined.
func getLogBuf(n int64) []byte {
	c, size, ok := logBufClass(int(n))
	if !ok {
		return make([]byte, n)
	}
	if p, _ := logBufPools[c].Get().(*[]byte); p != nil {
		return (*p)[:n]
	}
	return make([]byte, n, size)
}

// putLogBuf gives b back for reuse; nothing may use it afterwards.
func putLogBuf(b []byte) {
	if c, size, ok := logBufClass(cap(b)); ok && size == cap(b) {
		b = b[:0]
		logBufPools[c].Put(&b)
	}
}
