package convlog

import (
	"encoding/binary"
	"io"
	"math/bits"
)

// A raw frame is a standard zstd frame whose blocks are stored, not
// compressed: its exact length follows from the content's length alone, so
// a copier can state it (in a tar header, say) before streaming the
// content. It carries the content size and the content checksum (the low
// 32 bits of XXH64, as every zstd frame's checksum).

// rawFrameLen is the length of the raw frame holding n bytes (n > 0).
func rawFrameLen(n int64) int64 {
	blocks := (n + maxBlockSize - 1) / maxBlockSize
	return rawFrameHeaderLen + n + 3*blocks + 4
}

// rawFrameHeaderLen: magic, descriptor, window descriptor, 8-byte content
// size.
const rawFrameHeaderLen = 4 + 1 + 1 + 8

// AppendRawFrame appends to dst the raw frame holding content (at least one
// byte): content stored as it is, so that it appears verbatim in the
// output, which is what a deduplicating copier needs of bytes that are
// compressed already.
func AppendRawFrame(dst, content []byte) []byte {
	w := appendWriter{b: dst}
	fw, _ := newRawFrameWriter(&w, int64(len(content)))
	fw.Write(content) // appending to memory never fails
	return w.b
}

type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// rawFrameWriter streams content into a raw frame of a declared length.
type rawFrameWriter struct {
	w    io.Writer
	left int64 // content still to come
	h    xxh64
	buf  []byte // one block: header and content
}

func newRawFrameWriter(w io.Writer, n int64) (*rawFrameWriter, error) {
	var hdr [rawFrameHeaderLen]byte
	binary.LittleEndian.PutUint32(hdr[:], zstdMagic)
	// Content size in 8 bytes, one segment off, a checksum, no dictionary.
	hdr[4] = 3<<6 | 0x04
	// A 128 KiB window: what a stored block needs.
	hdr[5] = 7 << 3
	binary.LittleEndian.PutUint64(hdr[6:], uint64(n))
	if _, err := w.Write(hdr[:]); err != nil {
		return nil, err
	}
	return &rawFrameWriter{w: w, left: n, h: newXXH64(), buf: make([]byte, 0, 3+maxBlockSize)}, nil
}

// Write takes content; the frame ends, checksum written, with its last byte.
func (f *rawFrameWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		if f.left <= 0 {
			return n, errRawFrameFull
		}
		if len(f.buf) == 0 {
			f.buf = f.buf[:3]
		}
		take := min(len(p), 3+maxBlockSize-len(f.buf), int(min(f.left, maxBlockSize)))
		f.buf = append(f.buf, p[:take]...)
		f.h.write(p[:take])
		p, n, f.left = p[take:], n+take, f.left-int64(take)
		if size := len(f.buf) - 3; size == maxBlockSize || f.left == 0 {
			bh := uint32(size) << 3 // a raw block
			if f.left == 0 {
				bh |= 1
			}
			f.buf[0], f.buf[1], f.buf[2] = byte(bh), byte(bh>>8), byte(bh>>16)
			if f.left == 0 {
				f.buf = binary.LittleEndian.AppendUint32(f.buf, uint32(f.h.sum()))
			}
			if _, err := f.w.Write(f.buf); err != nil {
				return n, err
			}
			f.buf = f.buf[:0]
		}
	}
	return n, nil
}

type rawFrameError string

func (e rawFrameError) Error() string { return string(e) }

const errRawFrameFull = rawFrameError("raw frame: more content than declared")

// xxh64 is XXH64 with seed 0, the hash of zstd's content checksum.
type xxh64 struct {
	v     [4]uint64
	total uint64
	mem   [32]byte
	n     int
}

const (
	xxPrime1 uint64 = 11400714785074694791
	xxPrime2 uint64 = 14029467366897019727
	xxPrime3 uint64 = 1609587929392839161
	xxPrime4 uint64 = 9650029242287828579
	xxPrime5 uint64 = 2870177450012600261
)

func newXXH64() xxh64 {
	p1, p2 := xxPrime1, xxPrime2 // variables: the sums wrap
	return xxh64{v: [4]uint64{p1 + p2, p2, 0, -p1}}
}

func xxRound(acc, in uint64) uint64 {
	return bits.RotateLeft64(acc+in*xxPrime2, 31) * xxPrime1
}

func xxMerge(acc, v uint64) uint64 {
	return (acc^xxRound(0, v))*xxPrime1 + xxPrime4
}

func (h *xxh64) write(p []byte) {
	h.total += uint64(len(p))
	if h.n > 0 {
		k := copy(h.mem[h.n:], p)
		h.n += k
		p = p[k:]
		if h.n < 32 {
			return
		}
		h.stripe(h.mem[:])
		h.n = 0
	}
	for len(p) >= 32 {
		h.stripe(p[:32])
		p = p[32:]
	}
	h.n = copy(h.mem[:], p)
}

func (h *xxh64) stripe(b []byte) {
	for k := range h.v {
		h.v[k] = xxRound(h.v[k], binary.LittleEndian.Uint64(b[8*k:]))
	}
}

func (h *xxh64) sum() uint64 {
	var acc uint64
	if h.total >= 32 {
		v := h.v
		acc = bits.RotateLeft64(v[0], 1) + bits.RotateLeft64(v[1], 7) + bits.RotateLeft64(v[2], 12) + bits.RotateLeft64(v[3], 18)
		for _, x := range v {
			acc = xxMerge(acc, x)
		}
	} else {
		acc = h.v[2] + xxPrime5
	}
	acc += h.total
	b := h.mem[:h.n]
	for ; len(b) >= 8; b = b[8:] {
		acc ^= xxRound(0, binary.LittleEndian.Uint64(b))
		acc = bits.RotateLeft64(acc, 27)*xxPrime1 + xxPrime4
	}
	if len(b) >= 4 {
		acc ^= uint64(binary.LittleEndian.Uint32(b)) * xxPrime1
		acc = bits.RotateLeft64(acc, 23)*xxPrime2 + xxPrime3
		b = b[4:]
	}
	for _, c := range b {
		acc ^= uint64(c) * xxPrime5
		acc = bits.RotateLeft64(acc, 11) * xxPrime1
	}
	acc ^= acc >> 33
	acc *= xxPrime2
	acc ^= acc >> 29
	acc *= xxPrime3
	acc ^= acc >> 32
	return acc
}
