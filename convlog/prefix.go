package convlog

import (
	"bytes"
	"fmt"
	"io"
	"sync"

	"github.com/cespare/xxhash/v2"
	"github.com/klauspost/compress/zstd"
)

// Prefix is the committed part of a log (docs/FORMAT.md, Torn tails): what
// a copy of a live log holds, and where a writer cuts a torn tail.
type Prefix struct {
	// Bytes is the length of the committed bytes (Stats.CommittedBytes):
	// where a writer cuts a torn tail before appending.
	Bytes int64
	// Torn is set when bytes follow Bytes (a torn line or frame).
	Torn bool
	// RecoveredLines and RecoveredBytes are the complete lines of a torn
	// final frame and their plain bytes, which a copy holds as one frame
	// after Bytes; 0 when the log does not read strictly.
	RecoveredLines, RecoveredBytes int64

	torn Frame  // the torn final frame
	sum  uint64 // XXH64 of the recovered lines
	// end is where the complete frames after Bytes end; the recovered
	// lines are decoded from Bytes to end, then from the torn frame.
	end int64
}

// Len is the length of a copy of the committed prefix (see Reader): Bytes,
// plus the frame of the recovered lines.
func (p Prefix) Len() int64 {
	if p.RecoveredBytes == 0 {
		return p.Bytes
	}
	return p.Bytes + rawFrameLen(p.RecoveredBytes)
}

// CommittedPrefix finds the committed prefix of the log in src from its
// structure: the last newline of a plain log; the frame and block headers
// of a compressed one, walked without decoding (a torn final frame makes
// it read the log strictly). A log without one complete line or frame, or
// whose frames break the container rules, is refused with a *FormatError.
func CommittedPrefix(src io.ReaderAt, size int64, c Compression, path string) (Prefix, error) {
	if c == Zstd {
		return zstdPrefix(NewFrameScanner(src, size), src, size, path)
	}
	return plainPrefix(src, size, path)
}

func plainPrefix(src io.ReaderAt, size int64, path string) (Prefix, error) {
	const chunk = 64 << 10
	mem := memOf(src, size)
	var buf []byte
	if mem == nil {
		buf = make([]byte, min(chunk, size))
	}
	for end := size; end > 0; {
		start := max(0, end-chunk)
		var b []byte
		if mem != nil {
			b, start = mem[:end], 0
		} else {
			b = buf[:end-start]
			if n, err := src.ReadAt(b, start); n < len(b) {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return Prefix{}, fmt.Errorf("%s: %w", path, err)
			}
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			c := start + int64(i) + 1
			return Prefix{Bytes: c, Torn: c < size}, nil
		}
		end = start
	}
	msg := "empty or header-less log: the first line must be a complete header line"
	if size > 0 {
		msg += " (the file holds no complete line)"
	}
	return Prefix{}, &FormatError{Path: path, Msg: msg, Kind: ErrCorrupt}
}

func zstdPrefix(sc *FrameScanner, src io.ReaderAt, size int64, path string) (Prefix, error) {
	defer sc.release()
	var p Prefix
	complete := 0
	var last Frame // the last complete frame
	for f, err := range sc.Frames() {
		if fe, ok := err.(*FrameError); ok {
			// Frames are not decoded here: where a later frame's text
			// begins is not known.
			pos := Position{Frame: fe.Frame, FrameOffset: fe.Offset, Offset: -1}
			if fe.Frame == 1 {
				pos.Offset = 0
			}
			return Prefix{}, &FormatError{Path: path, Pos: pos, Msg: "corrupt zstd log: " + fe.Msg, Kind: ErrCorrupt}
		}
		if err != nil {
			return Prefix{}, fmt.Errorf("%s: %w", path, err)
		}
		if f.Torn {
			p.Torn, p.torn = true, f
			break
		}
		complete++
		last = f
		p.Bytes = f.Offset + f.Size
	}
	if size == 0 {
		return Prefix{}, &FormatError{Path: path, Msg: "empty or header-less log: no zstd frame", Kind: ErrCorrupt}
	}
	p.end = size
	if p.Torn {
		p.end = p.torn.Offset
	}
	// Another framing than the writer's may end a frame inside a line:
	// then, or after a torn frame, the committed prefix is a reader's.
	if (p.Torn && p.torn.lastBlock >= 0) || (complete > 0 && !endsLine(src, last, max(DefaultMinPlainBytes, DefaultPlainRatio*size))) {
		p.recover(src, size, path)
	}
	if complete == 0 && p.RecoveredLines == 0 {
		return Prefix{}, &FormatError{Path: path, Pos: Position{Frame: 1}, Msg: "empty or header-less log: the header frame is torn", Kind: ErrCorrupt}
	}
	return p, nil
}

// endsLine reports whether the text of frame f ends with a newline,
// decoding at most budget bytes of it (else false). A small frame (most
// last frames: one batch) is decoded whole into a pooled buffer; another
// streamed, by a pooled decoder when its history is small (a decoder made
// per log was a fifth of a backup's CPU), else by one of its own.
func endsLine(src io.ReaderAt, f Frame, budget int64) bool {
	if decodedWhole(f) {
		bp := lineEndBufs.Get().(*[]byte)
		defer lineEndBufs.Put(bp)
		in, out := (*bp)[lineEndWhole:][:f.Size], (*bp)[:0:lineEndWhole]
		if k, _ := src.ReadAt(in, f.Offset); k < len(in) {
			return false
		}
		// DecodeAll verifies the checksum and the declared size.
		out, err := allDecoder.DecodeAll(in, out)
		return err == nil && len(out) > 0 && int64(len(out)) < budget && out[len(out)-1] == '\n'
	}
	d := decoderPool.Get().(*zstd.Decoder)
	defer func() {
		if pooledFrame(f) {
			d.Reset(nil)
			decoderPool.Put(d)
		} else {
			d.Close() // a large history is not kept
		}
	}()
	bp := lineEndBufs.Get().(*[]byte)
	defer lineEndBufs.Put(bp)
	buf := *bp
	// A frame that fits the buffer is read in one call: the decoder reads
	// its input a header and a block at a time, a read each.
	var in io.Reader = io.NewSectionReader(src, f.Offset, f.Size)
	if f.Size <= int64(len(buf)/2) {
		fb := buf[len(buf)/2:][:f.Size]
		if k, _ := src.ReadAt(fb, f.Offset); k < len(fb) {
			return false
		}
		in = bytes.NewReader(fb)
		buf = buf[:len(buf)/2]
	}
	if err := d.Reset(in); err != nil {
		return false
	}
	var n int64
	var last byte
	for n < budget {
		k, err := d.Read(buf[:min(int64(len(buf)), budget-n)])
		if k > 0 {
			n += int64(k)
			last = buf[k-1]
		}
		if err == io.EOF {
			return n > 0 && last == '\n'
		}
		if err != nil {
			return false
		}
	}
	return false // the budget reached: too long to tell
}

// pooledFrame reports whether endsLine keeps f's decoder in the pool.
func pooledFrame(f Frame) bool { return f.window > 0 && f.window <= keepBufBytes }

// decodedWhole reports whether endsLine decodes f whole: its bytes and
// text each fit half of one of lineEndBufs.
func decodedWhole(f Frame) bool {
	return f.ContentSize >= 0 && f.ContentSize <= lineEndWhole && f.Size <= lineEndWhole
}

// lineEndWhole is half of one of lineEndBufs.
const lineEndWhole = 16 << 10

// lineEndBufs are endsLine's buffers: a frame read into the second half,
// its text decoded into the first.
var lineEndBufs = sync.Pool{New: func() any { b := make([]byte, 2*lineEndWhole); return &b }}

// recover takes a strict reader's committed prefix and recovered lines;
// a log the reader refuses keeps the structure's answer.
func (p *Prefix) recover(src io.ReaderAt, size int64, path string) {
	comp := Zstd
	r, err := NewReader(src, size, path, ReaderOptions{Compression: &comp})
	if err != nil {
		return
	}
	defer r.Close()
	for _, err := range r.Events() {
		if err != nil {
			return
		}
	}
	rp := r.prefix()
	if !rp.Torn {
		return // every line complete, as the structure said
	}
	if rp.RecoveredBytes > 0 {
		// The sum lets a copy see the lines change under it.
		h := xxhash.New()
		d, in, err := rp.decodeTail(src)
		if err != nil {
			return
		}
		n, err := io.Copy(h, in)
		d.Close()
		if err != nil || n != rp.RecoveredBytes {
			return
		}
		rp.sum = h.Sum64()
	}
	*p = rp
}

// decodeTail decodes the recovered lines: the complete frames after Bytes,
// then the torn frame's complete blocks, cut at RecoveredBytes.
func (p Prefix) decodeTail(src io.ReaderAt) (*zstd.Decoder, io.Reader, error) {
	var in io.Reader = io.NewSectionReader(src, p.Bytes, p.end-p.Bytes)
	if p.torn.Torn {
		in = io.MultiReader(in, p.torn.decodable(src))
	}
	d, err := zstd.NewReader(in, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxWindow))
	if err != nil {
		return nil, nil, err
	}
	return d, io.LimitReader(d, p.RecoveredBytes), nil
}

// readTail reads the recovered lines into memory.
func (p Prefix) readTail(src io.ReaderAt) ([]byte, error) {
	d, in, err := p.decodeTail(src)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	b := make([]byte, p.RecoveredBytes)
	_, err = io.ReadFull(in, b)
	return b, err
}

// Reader returns the copy of the committed prefix of the log in src: its
// first Bytes bytes, then one raw frame of the recovered lines, Len bytes
// in all, reading as the same events without a torn tail. If the file
// changed, reading fails instead of ending.
func (p Prefix) Reader(src io.ReaderAt) io.Reader {
	head := io.NewSectionReader(src, 0, p.Bytes)
	if p.RecoveredBytes == 0 {
		return head
	}
	return io.MultiReader(head, &tailReader{p: p, src: src})
}

// tailReader streams the frame of the recovered lines: the torn frame's
// complete blocks decoded again, cut at the counted bytes, stored.
type tailReader struct {
	p   Prefix
	src io.ReaderAt
	dec *zstd.Decoder
	in  io.Reader
	fw  *rawFrameWriter
	out bytes.Buffer
	buf []byte
	err error
}

func (t *tailReader) Read(b []byte) (int, error) {
	for t.out.Len() == 0 && t.err == nil {
		t.err = t.fill()
	}
	if t.out.Len() == 0 {
		return 0, t.err
	}
	return t.out.Read(b)
}

// fill decodes the next piece of the recovered lines into out (io.EOF
// after the last).
func (t *tailReader) fill() error {
	if t.fw == nil {
		d, in, err := t.p.decodeTail(t.src)
		if err != nil {
			return t.changed()
		}
		t.dec, t.in, t.buf = d, in, make([]byte, 64<<10)
		t.fw, _ = newRawFrameWriter(&t.out, t.p.RecoveredBytes) // a bytes.Buffer takes every write
	} else if t.fw.left == 0 {
		return io.EOF
	}
	n, err := t.in.Read(t.buf)
	t.fw.Write(t.buf[:n])
	switch {
	case t.fw.left == 0:
		// The checksum is in out, not yet handed on: the copy ends only
		// if the lines are the ones counted.
		t.dec.Close()
		if t.fw.h.Sum64() != t.p.sum {
			return t.changed()
		}
	case err != nil:
		return t.changed() // the decode ended or failed before the counted bytes
	}
	return nil
}

func (t *tailReader) changed() error {
	if t.dec != nil {
		t.dec.Close()
	}
	t.out.Reset()
	return fmt.Errorf("the torn final frame at byte %d changed while the log was copied", t.p.torn.Offset)
}

// ReadPrefix is what CommittedPrefix would find, for a reader whose strict
// read reached io.EOF with the whole file committed; ok is false otherwise.
func (r *Reader) ReadPrefix() (p Prefix, ok bool) {
	p = r.prefix()
	if !r.done || r.stopped || p.Torn || p.Bytes == 0 {
		return Prefix{}, false
	}
	return p, true
}

// prefix is the committed prefix a strict read to io.EOF found.
func (r *Reader) prefix() Prefix {
	s := r.Stats()
	p := Prefix{Bytes: s.CommittedBytes, Torn: s.TornTail}
	if r.comp == Zstd {
		p.end = s.FileBytes
		if s.TornTail {
			p.RecoveredLines, p.RecoveredBytes = s.RecoveredLines, r.plainOff-r.aligned.plain
		}
		if r.frame.Torn {
			p.torn, p.end = r.frame, r.frame.Offset
		}
	}
	return p
}
