package convlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"iter"
	"sync"
)

// A compressed log is a concatenation of zstd frames, whose structure the
// scanner walks without decompressing, before any content is trusted.

// ZstdMagic begins every zstd frame (little-endian): the first four bytes
// of a compressed log.
const ZstdMagic = zstdMagic

const (
	zstdMagic          = 0xFD2FB528
	skippableMagicMask = 0xFFFFFFF0
	skippableMagic     = 0x184D2A50
	maxBlockSize       = 128 << 10
	// maxWindow is the largest window a reader allows a frame: zstd's
	// default, as the runtime's reader has it.
	maxWindow = 128 << 20
)

// Frame is one zstd frame found by the scanner.
type Frame struct {
	Index    int64 // 1-based
	Offset   int64 // byte offset of the frame's magic in the file
	Size     int64 // bytes of the frame, or of what the file holds of a torn one
	Checksum bool  // the frame carries a content checksum
	// ContentSize is the declared decompressed size, or -1.
	ContentSize int64
	// Torn is set when the file ends inside the frame.
	Torn bool

	// Structure, for a best-effort decode of a torn frame's complete blocks.
	fhd       byte
	window    int64 // the history a decoder keeps: the declared window, or a single segment's content (at least 1 KiB)
	hdrOff    int64 // offset just past the frame-header descriptor
	hdrEnd    int64 // offset of the first block header
	lastBlock int64 // offset of the last complete block's header, or -1
	blocksEnd int64 // offset just past the last complete block
}

// FrameScanner walks the frames of a compressed log held in an io.ReaderAt
// or in memory: convkit's one frame parser.
type FrameScanner struct {
	r    io.ReaderAt
	size int64
	off  int64
	n    int64
	// small read-ahead window over r, so walking many small frames costs
	// few reads
	win    []byte
	winOff int64
	// mem, when set, holds all of r: reads are slices of it.
	mem []byte
}

// NewFrameScanner scans r, whose length is size; Bytes are scanned
// without a read buffer or copies.
func NewFrameScanner(r io.ReaderAt, size int64) *FrameScanner {
	if mem := memOf(r, size); mem != nil {
		return &FrameScanner{r: r, size: size, mem: mem}
	}
	return &FrameScanner{r: r, size: size, win: windowPool.Get().([]byte)[:0]}
}

var windowPool = sync.Pool{New: func() any { return make([]byte, 0, 64<<10) }}

// release returns the scanner's buffer; the scanner is unusable afterwards.
func (s *FrameScanner) release() {
	if s.win != nil {
		windowPool.Put(s.win[:0])
		s.win = nil
	}
}

// zeroTail reports whether every byte from off to the end is zero, reading
// a window at a time.
func (s *FrameScanner) zeroTail(off int64) bool {
	if s.mem != nil {
		return allZero(s.mem[off:])
	}
	var buf [4096]byte
	for off < s.size {
		b := buf[:min(int64(len(buf)), s.size-off)]
		if m, err := s.r.ReadAt(b, off); m < len(b) {
			return err == io.EOF && allZero(b[:m]) // the file shrank under the scan
		}
		if !allZero(b) {
			return false
		}
		off += int64(len(b))
	}
	return true
}

func allZero(b []byte) bool { return len(bytes.TrimLeft(b, "\x00")) == 0 }

// errShort reports that the file ended inside a frame.
var errShort = fmt.Errorf("short")

// read returns n bytes at off, or errShort when the file ends first.
func (s *FrameScanner) read(off int64, n int) ([]byte, error) {
	if off+int64(n) > s.size {
		return nil, errShort
	}
	if s.mem != nil {
		return s.mem[off : off+int64(n)], nil
	}
	if off >= s.winOff && off+int64(n) <= s.winOff+int64(len(s.win)) {
		p := off - s.winOff
		return s.win[p : p+int64(n)], nil
	}
	s.win = s.win[:min(int64(cap(s.win)), s.size-off)]
	m, err := s.r.ReadAt(s.win, off)
	if m < n {
		if err == nil || err == io.EOF {
			err = errShort
		}
		s.win = s.win[:0]
		return nil, err
	}
	s.win = s.win[:m]
	s.winOff = off
	return s.win[:n], nil
}

// FrameError is a structural problem at a byte offset of the file.
type FrameError struct {
	Frame  int64
	Offset int64
	Msg    string
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("frame %d at byte %d: %s", e.Frame, e.Offset, e.Msg)
}

// Frames yields the frames in order, then a *FrameError once if one is
// found; a frame the file ends inside is yielded Torn, and ends the scan.
func (s *FrameScanner) Frames() iter.Seq2[Frame, error] { return untilEOF(s.next) }

// next returns the next frame, io.EOF after the last one, or an error.
func (s *FrameScanner) next() (Frame, error) {
	if s.off >= s.size {
		return Frame{}, io.EOF
	}
	s.n++
	f := Frame{Index: s.n, Offset: s.off, ContentSize: -1, lastBlock: -1}
	torn := func() (Frame, error) {
		f.Torn = true
		f.Size = s.size - f.Offset
		s.off = s.size
		return f, nil
	}
	bad := func(at int64, format string, args ...any) (Frame, error) {
		s.off = s.size
		return Frame{}, &FrameError{Frame: f.Index, Offset: at, Msg: fmt.Sprintf(format, args...)}
	}
	p := s.off
	if b, err := s.read(p, 1); err == nil && b[0] == 0 && s.n > 1 && s.zeroTail(p) {
		// NUL padding: what a file system leaves when a crash extended
		// the file and did not write its data. A torn frame, cut
		// before its magic.
		return torn()
	}
	b, err := s.read(p, 4)
	if err == errShort {
		// A torn frame starts with a prefix of the magic; other short
		// trailing bytes are foreign.
		n := int(min(s.size-p, 4)) // more: the file shrank under the scan
		if rest, err := s.read(p, n); err == nil && !bytes.Equal(rest, binary.LittleEndian.AppendUint32(nil, zstdMagic)[:n]) {
			return bad(p, "invalid frame magic: %d trailing bytes do not start a zstd frame", n)
		} else if err != nil && err != errShort {
			return Frame{}, err
		}
		return torn() // errShort: the file shrank under the scan
	} else if err != nil {
		return Frame{}, err
	}
	magic := binary.LittleEndian.Uint32(b)
	if magic&skippableMagicMask == skippableMagic {
		return bad(p, "skippable frame (magic 0x%08X): a log holds only standard zstd frames", magic)
	}
	if magic != zstdMagic {
		return bad(p, "invalid frame magic 0x%08X, expected 0x%08X", magic, uint32(zstdMagic))
	}
	p += 4
	if b, err = s.read(p, 1); err == errShort {
		return torn()
	} else if err != nil {
		return Frame{}, err
	}
	fhd := b[0]
	f.fhd = fhd
	if fhd&0x18 != 0 {
		return bad(p, "reserved frame-header bit set (descriptor 0x%02X)", fhd)
	}
	singleSegment := fhd&0x20 != 0
	f.Checksum = fhd&0x04 != 0
	dictBytes := [4]int{0, 1, 2, 4}[fhd&0x03]
	fcsFlag := fhd >> 6
	fcsBytes := [4]int{0, 2, 4, 8}[fcsFlag]
	if fcsFlag == 0 && singleSegment {
		fcsBytes = 1
	}
	p++
	f.hdrOff = p
	hdr := dictBytes + fcsBytes
	if !singleSegment {
		hdr++
	}
	if b, err = s.read(p, hdr); err == errShort {
		return torn()
	} else if err != nil {
		return Frame{}, err
	}
	if !singleSegment {
		wd := b[0]
		wlog := 10 + uint(wd>>3)
		window := uint64(1)<<wlog + (uint64(1)<<wlog)/8*uint64(wd&7)
		if window > maxWindow {
			return bad(p, "frame window of %d bytes (%s) exceeds the %s a log reader allows", window, humanBytes(window), humanBytes(maxWindow))
		}
		f.window = int64(window)
	}
	if id := littleEndian(b[hdr-fcsBytes-dictBytes : hdr-fcsBytes]); id != 0 {
		return bad(p, "frame needs zstd dictionary %d: log frames are written without a dictionary", id)
	}
	if fcsBytes > 0 {
		f.ContentSize = int64(littleEndian(b[hdr-fcsBytes:]) & (1<<63 - 1))
		if fcsBytes == 2 {
			f.ContentSize += 256
		}
	}
	if singleSegment && uint64(f.ContentSize) > maxWindow {
		// One segment: the whole content is the window.
		return bad(p-1, "single-segment frame of %d bytes (%s) exceeds the %s window a log reader allows", f.ContentSize, humanBytes(uint64(f.ContentSize)), humanBytes(maxWindow))
	}
	if singleSegment {
		f.window = max(f.ContentSize, 1<<10) // as a decoder sizes it
	}
	p += int64(hdr)
	f.hdrEnd = p
	f.blocksEnd = p
	for {
		if b, err = s.read(p, 3); err == errShort {
			return torn()
		} else if err != nil {
			return Frame{}, err
		}
		bh := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
		last := bh&1 != 0
		btype := (bh >> 1) & 3
		bsize := int64(bh >> 3)
		if btype == 3 {
			return bad(p, "reserved block type")
		}
		if bsize > maxBlockSize {
			return bad(p, "block size %d exceeds the zstd maximum of %d", bsize, maxBlockSize)
		}
		p += 3
		if btype == 1 { // RLE: one byte repeated bsize times
			bsize = 1
		}
		if p+bsize > s.size {
			return torn()
		}
		f.lastBlock = p - 3
		p += bsize
		f.blocksEnd = p
		if last {
			break
		}
	}
	if f.Checksum {
		if p+4 > s.size {
			return torn()
		}
		p += 4
	}
	f.Size = p - f.Offset
	s.off = p
	return f, nil
}

func littleEndian(b []byte) uint64 {
	var n uint64
	for k := len(b) - 1; k >= 0; k-- {
		n = n<<8 | uint64(b[k])
	}
	return n
}

// completeBlocks returns a reader of a well-formed frame of the complete
// blocks of a torn frame, the last marked last; ok is false when none is.
func (f Frame) completeBlocks(r io.ReaderAt) (io.Reader, bool) {
	if f.lastBlock < 0 {
		return nil, false
	}
	var hdr [4 + 1 + 1 + 4]byte
	binary.LittleEndian.PutUint32(hdr[:], zstdMagic)
	singleSegment := f.fhd&0x20 != 0
	dictBytes := [4]int{0, 1, 2, 4}[f.fhd&0x03]
	// Keep the dictionary id, drop the content size and the checksum, and
	// always state a window.
	hdr[4] = f.fhd & 0x03
	n := 5
	if singleSegment {
		// The window was the content size: state one at least as large.
		wlog := 10
		for wlog < 31 && int64(1)<<wlog < f.ContentSize {
			wlog++
		}
		hdr[n] = byte(wlog-10) << 3
	} else {
		if _, err := r.ReadAt(hdr[n:n+1], f.hdrOff); err != nil {
			return nil, false
		}
	}
	n++
	dict := make([]byte, dictBytes)
	if dictBytes > 0 {
		off := f.hdrOff
		if !singleSegment {
			off++
		}
		if _, err := r.ReadAt(dict, off); err != nil {
			return nil, false
		}
	}
	var last [3]byte
	if _, err := r.ReadAt(last[:], f.lastBlock); err != nil {
		return nil, false
	}
	last[0] |= 1
	return io.MultiReader(
		bytes.NewReader(append(hdr[:n:n], dict...)),
		io.NewSectionReader(r, f.hdrEnd, f.lastBlock-f.hdrEnd),
		bytes.NewReader(last[:]),
		io.NewSectionReader(r, f.lastBlock+3, f.blocksEnd-f.lastBlock-3),
	), true
}

// decodable is what a torn frame's decoder reads: its complete blocks, or
// nothing.
func (f Frame) decodable(r io.ReaderAt) io.Reader {
	if blocks, ok := f.completeBlocks(r); ok {
		return blocks
	}
	return bytes.NewReader(nil)
}

// humanBytes is n in binary units, for messages.
func humanBytes(n uint64) string {
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	u := 0
	for n >= 1024 && n%1024 == 0 && u < len(units)-1 {
		n /= 1024
		u++
	}
	return fmt.Sprintf("%d %s", n, units[u])
}
