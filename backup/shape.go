package backup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/convkit/convkit/convlog"
)

// shape is what a log's structure alone says, without decoding any
// content: where its committed prefix ends (after the last complete line
// of a plain log, before the torn final frame of a compressed one: where
// convlog's Reader puts Stats().CommittedBytes and where a writer cuts a
// torn tail), whether a torn tail follows, or why the structure is broken.
type shape struct {
	committed int64
	torn      bool
	err       string
}

// logShape reads the structure of a log of size bytes held in src. A
// structure without one complete line or frame (no header) is broken.
func logShape(src io.ReaderAt, size int64, comp convlog.Compression, name string) shape {
	if comp == convlog.Zstd {
		return zstdShape(src, size, name)
	}
	return plainShape(src, size, name)
}

// bytesShape is logShape of a log held in memory.
func bytesShape(b []byte, comp convlog.Compression, name string) shape {
	if comp == convlog.Zstd {
		return zstdBytesShape(b, name)
	}
	i := bytes.LastIndexByte(b, '\n')
	switch {
	case i >= 0:
		c := int64(i) + 1
		return shape{committed: c, torn: c < int64(len(b))}
	case len(b) == 0:
		return shape{err: name + ": empty log: the first line must be a complete header line"}
	}
	return shape{err: name + ": byte 0: no complete line: the header line is torn"}
}

func plainShape(src io.ReaderAt, size int64, name string) shape {
	const chunk = 64 << 10
	buf := make([]byte, chunk)
	end := size
	for end > 0 {
		start := max(0, end-chunk)
		b := buf[:end-start]
		if _, err := src.ReadAt(b, start); err != nil && !errors.Is(err, io.EOF) {
			return shape{err: fmt.Sprintf("%s: %v", name, err)}
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			c := start + int64(i) + 1
			return shape{committed: c, torn: c < size}
		}
		end = start
	}
	if size == 0 {
		return shape{err: name + ": empty log: the first line must be a complete header line"}
	}
	return shape{err: name + ": byte 0: no complete line: the header line is torn"}
}

func zstdShape(src io.ReaderAt, size int64, name string) shape {
	sc := convlog.NewFrameScanner(src, size)
	var s shape
	complete := 0
	for {
		f, err := sc.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return shape{err: fmt.Sprintf("%s: corrupt zstd log: %v", name, err)}
		}
		if f.Torn {
			s.committed, s.torn = f.Offset, true
			break
		}
		complete++
		s.committed = f.Offset + f.Size
	}
	if complete == 0 {
		if size == 0 {
			return shape{err: name + ": empty log: no zstd frame"}
		}
		return shape{err: name + ": frame 1 at byte 0: no complete frame: the header frame is torn"}
	}
	return s
}

// Zstandard structure, as convlog's FrameScanner walks it.
const (
	zstdMagic          = 0xFD2FB528
	skippableMagicMask = 0xFFFFFFF0
	skippableMagic     = 0x184D2A50
	maxBlockSize       = 128 << 10
)

// zstdBytesShape is zstdShape over bytes in memory: the same rules as
// convlog.FrameScanner (which reads through a 64 KiB window allocated per
// scanner, too much for thousands of small logs), without its copies.
func zstdBytesShape(b []byte, name string) shape {
	size := len(b)
	var s shape
	bad := func(frame, at int, format string, args ...any) shape {
		return shape{err: fmt.Sprintf("%s: corrupt zstd log: frame %d at byte %d: %s", name, frame, at, fmt.Sprintf(format, args...))}
	}
	off, frame, complete := 0, 0, 0
	var magicLE [4]byte
	binary.LittleEndian.PutUint32(magicLE[:], zstdMagic)
	for off < size {
		frame++
		torn := func() shape {
			s.committed, s.torn = int64(off), true
			return s
		}
		if size-off < 4 {
			if !bytes.Equal(b[off:], magicLE[:size-off]) {
				return bad(frame, off, "invalid frame magic: %d trailing bytes do not start a zstd frame", size-off)
			}
			s = torn()
			break
		}
		magic := binary.LittleEndian.Uint32(b[off:])
		if magic&skippableMagicMask == skippableMagic {
			return bad(frame, off, "skippable frame (magic 0x%08X): a log holds only standard zstd frames", magic)
		}
		if magic != zstdMagic {
			return bad(frame, off, "invalid frame magic 0x%08X, expected 0x%08X", magic, uint32(zstdMagic))
		}
		p := off + 4
		if p >= size {
			s = torn()
			break
		}
		fhd := b[p]
		if fhd&0x18 != 0 {
			return bad(frame, p, "reserved frame-header bit set (descriptor 0x%02X)", fhd)
		}
		single := fhd&0x20 != 0
		checksum := fhd&0x04 != 0
		dictBytes := [4]int{0, 1, 2, 4}[fhd&0x03]
		fcsFlag := fhd >> 6
		fcsBytes := [4]int{0, 2, 4, 8}[fcsFlag]
		if fcsFlag == 0 && single {
			fcsBytes = 1
		}
		p++
		hdr := dictBytes + fcsBytes
		if !single {
			hdr++
		}
		if p+hdr > size {
			s = torn()
			break
		}
		p += hdr
		tornFrame := false
		for {
			if p+3 > size {
				tornFrame = true
				break
			}
			bh := uint32(b[p]) | uint32(b[p+1])<<8 | uint32(b[p+2])<<16
			last := bh&1 != 0
			btype := (bh >> 1) & 3
			bsize := int(bh >> 3)
			if btype == 3 {
				return bad(frame, p, "reserved block type")
			}
			if bsize > maxBlockSize {
				return bad(frame, p, "block size %d exceeds the zstd maximum of %d", bsize, maxBlockSize)
			}
			p += 3
			if btype == 1 { // RLE: one byte
				bsize = 1
			}
			if p+bsize > size {
				tornFrame = true
				break
			}
			p += bsize
			if last {
				break
			}
		}
		if !tornFrame && checksum {
			if p+4 > size {
				tornFrame = true
			} else {
				p += 4
			}
		}
		if tornFrame {
			s = torn()
			break
		}
		complete++
		off = p
		s.committed = int64(off)
	}
	if complete == 0 {
		if size == 0 {
			return shape{err: name + ": empty log: no zstd frame"}
		}
		return shape{err: name + ": frame 1 at byte 0: no complete frame: the header frame is torn"}
	}
	return s
}
