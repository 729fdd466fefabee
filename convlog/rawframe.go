package convlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"

	"github.com/cespare/xxhash/v2"
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
// byte) verbatim, as a deduplicating copier needs of compressed bytes.
func AppendRawFrame(dst, content []byte) []byte {
	w := bytes.NewBuffer(dst)
	fw, _ := newRawFrameWriter(w, int64(len(content)))
	fw.Write(content) // appending to memory never fails
	return w.Bytes()
}

// rawFrameWriter streams content into a raw frame of a declared length.
type rawFrameWriter struct {
	w    io.Writer
	left int64 // content still to come
	h    *xxhash.Digest
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
	return &rawFrameWriter{w: w, left: n, h: xxhash.New(), buf: make([]byte, 0, 3+maxBlockSize)}, nil
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
		f.h.Write(p[:take])
		p, n, f.left = p[take:], n+take, f.left-int64(take)
		if size := len(f.buf) - 3; size == maxBlockSize || f.left == 0 {
			bh := uint32(size) << 3 // a raw block
			if f.left == 0 {
				bh |= 1
			}
			f.buf[0], f.buf[1], f.buf[2] = byte(bh), byte(bh>>8), byte(bh>>16)
			if f.left == 0 {
				f.buf = binary.LittleEndian.AppendUint32(f.buf, uint32(f.h.Sum64()))
			}
			if _, err := f.w.Write(f.buf); err != nil {
				return n, err
			}
			f.buf = f.buf[:0]
		}
	}
	return n, nil
}

var errRawFrameFull = errors.New("raw frame: more content than declared")
