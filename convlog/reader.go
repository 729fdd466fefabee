package convlog

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
)

// DefaultMaxLineBytes bounds one line of a log, and so the reader's memory.
const DefaultMaxLineBytes = 64 << 20

// Logs compress 2 to 10 times: one decoding to far more is a decompression
// bomb (zstd can expand a byte 32,768 times).
const (
	DefaultPlainRatio    = 128
	DefaultMinPlainBytes = 256 << 20
)

// ReaderOptions tune a Reader. The zero value reads strictly.
type ReaderOptions struct {
	// MaxLineBytes bounds one line (default DefaultMaxLineBytes); in a
	// compressed log a longer line ends the read.
	MaxLineBytes int
	// MaxPlainBytes bounds what a compressed log may decode to (default:
	// DefaultPlainRatio times its size, at least DefaultMinPlainBytes;
	// negative: no limit).
	MaxPlainBytes int64
	// OnProblem, when set, receives each problem the read can go on past
	// (unless it calls Stop); when nil the first problem is the error.
	OnProblem func(*FormatError)
	// Version is the version the file name carries; -1 (or use Open) to
	// take it from the name, or from the header alone for foreign names.
	Version int
	// Compression overrides detection from the name and the first bytes.
	Compression *Compression
	// WantID, when set, is the id the log's place implies, of type WantType
	// (SessionLog by default): another header is an *IdentityError.
	WantID, WantType string
	// LowMemory decodes ahead at most one run of frames (1 MiB of them on
	// disk) and keeps at most 8 MiB of decoder history: for callers
	// reading many logs at once.
	LowMemory bool
}

// Stats describes what a reader has read so far.
type Stats struct {
	FileBytes             int64 // size of the file
	PlainBytes            int64 // bytes of complete lines, header included
	Lines                 int64 // complete lines, header included
	Events                int64 // event rows read
	Frames                int64 // zstd frames, a torn one included
	FramesWithoutChecksum int64
	TornTail              bool // the log ends in an incomplete line or frame
	// CommittedBytes is where a writer would cut a torn tail (FileBytes
	// without one); TornBytes is what lies past it.
	CommittedBytes, TornBytes int64
	// RecoveredLines: complete lines past the committed prefix, which a
	// writer rewrites as a fresh frame.
	RecoveredLines int64
	Framing        Framing // departures from the canonical framing
}

// Reader streams the events of one log in memory bounded by one line, one
// zstd window and fixed buffers, through one pipeline (frames, lines,
// events) whose fast paths are chosen when it is made.
type Reader struct {
	source
	pipe   pipeline
	opts   ReaderOptions
	header *Header
	stats  Stats

	frameStage
	lineStage

	members [10]member // backs the parser's first members
	parser  envelopeParser
	nextSeq int64
	resync  bool // the previous row was damaged: accept the next good seq
	ev      Event
	err     error
	stopped bool
}

// source is where a reader's bytes come from.
type source struct {
	path   string
	src    io.ReaderAt
	closer io.Closer
	comp   Compression
	mtime  time.Time // at Open
	mem    []byte    // the whole file, when it is in memory
}

// pipeline is which fast paths a reader takes.
type pipeline struct {
	// prefetch: frames after the first are decoded ahead by decoders
	// goroutines, checkAhead: and their lines checked there; streamAhead: a
	// streamed frame is decoded a chunk ahead (prefetch.go).
	prefetch    bool
	decoders    int
	wholeBytes  int64 // frames of at most this are decoded whole
	checkAhead  bool
	streamAhead bool
	lowMemory   bool
}

func newPipeline(opts ReaderOptions, comp Compression, size int64) pipeline {
	procs := runtime.GOMAXPROCS(0)
	p := pipeline{lowMemory: opts.LowMemory, streamAhead: procs > 1, wholeBytes: smallFrameBytes}
	if comp == Zstd && size >= prefetchMinFile && procs > 1 {
		p.prefetch, p.decoders, p.wholeBytes, p.checkAhead = true, min(prefetchDecoders, procs), prefetchFrameBytes, true
		if opts.LowMemory {
			// A migration's reader keeps its cores for compressing.
			p.decoders, p.wholeBytes, p.checkAhead = 1, smallFrameBytes, false
		}
	}
	return p
}

// frameStage is a compressed log's frames found and decoded.
type frameStage struct {
	frameIn *bufio.Reader // a streamed frame's bytes
	plain   bytes.Reader
	scanner *FrameScanner
	dec     *zstd.Decoder
	frame   Frame
	inFrame bool
	pre     *ahead[*pframe] // frames decoded ahead (prefetch.go)
	cur     *pframe         // the run at hand, from pre or loaded here
	curK    int             // cur's frames opened
	curPre  framePre        // the frame at hand's lines in cur.pre
	stream  *streamDec      // a large frame decoded ahead
	// decBig is set once dec's history may exceed keepBufBytes: it is then
	// not pooled, nor kept through a large frame decoded whole. decWin is
	// the largest window dec streamed, -1 once one was not stated.
	decBig          bool
	decWin          int64
	decoded, budget int64 // plain bytes decoded, and the limit
}

// lineStage is the plain text cut into lines.
type lineStage struct {
	// text (from tpos) is the plain text at hand: a frame decoded whole, a
	// plain log in memory, or the last chunk read from in (into chunk, or
	// from stream); inErr is what ended in.
	text  []byte
	tpos  int
	in    io.Reader
	inErr error
	chunk *readBufs
	// textPre: text's lines as a prefetcher parsed them; tline counts
	// text's lines read; lineK is the last line's index in text, or -1.
	textPre  *framePre
	tline    int
	lineK    int
	lineBuf  []byte
	plainOff int64
	line     int64
	done     bool
	// carry is the start of a line a frame ended inside; aligned is the
	// last frame start between two lines.
	carry   []byte
	aligned alignedMark
}

// Pooled: a fresh 256 KiB buffer per small log would be most of its cost.
var (
	bufioPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 256<<10) }}
	chunkPool = sync.Pool{New: func() any { return &readBufs{chunk: make([]byte, 256<<10)} }}
)

// readBufs are a chunk of text and the line that crosses into the next.
type readBufs struct{ chunk, line []byte }

var decoderPool = sync.Pool{New: func() any {
	// The window limit bounds memory for hostile frames.
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(maxWindow))
	if err != nil {
		panic(err)
	}
	return d
}}

// Open opens a log file as OpenFile does and reads it as NewReader would.
func Open(path string, opts ReaderOptions) (*Reader, error) {
	f, err := OpenFile(path)
	if err != nil {
		return nil, err
	}
	size, mtime := f.size, f.mtime
	// Most logs are a few kilobytes: read whole, the file closed at once.
	if size <= wholeFileBytes {
		whole := wholePool.Get().(*[]byte)
		buf := (*whole)[:size]
		if n, rerr := f.ReadAt(buf, 0); n == len(buf) && (rerr == nil || rerr == io.EOF) {
			if err := f.Close(); err != nil {
				putWhole(whole)
				return nil, err
			}
			*whole = buf
			r, err := NewReader(Bytes(buf), size, path, opts)
			if err != nil {
				putWhole(whole)
				return nil, err
			}
			r.closer, r.mtime = pooledBytes{whole}, mtime
			return r, nil
		}
		// The file shrank since its Stat: read in place, the shortfall shows.
		putWhole(whole)
	}
	r, err := NewReader(f, size, path, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.closer, r.mtime = f, mtime
	return r, nil
}

// ModTime is the log's modification time at Open (zero for a NewReader).
func (r *Reader) ModTime() time.Time { return r.mtime }

// wholeFileBytes bounds the logs Open reads whole into a pooled buffer.
const wholeFileBytes = 128 << 10

var wholePool = sync.Pool{New: func() any { b := make([]byte, 0, wholeFileBytes); return &b }}

func putWhole(b *[]byte) {
	*b = (*b)[:0]
	wholePool.Put(b)
}

// pooledBytes closes a log Open read whole: its buffer goes back.
type pooledBytes struct{ b *[]byte }

func (p pooledBytes) Close() error {
	putWhole(p.b)
	return nil
}

// Bytes is a log in memory: a Reader or FrameScanner slices lines and
// frames out of it, so it must not change while they use it.
type Bytes []byte

func (b Bytes) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("convlog.Bytes.ReadAt: negative offset")
	}
	if off >= int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// memOf is src's bytes when it is Bytes of the given size.
func memOf(src io.ReaderAt, size int64) []byte {
	if b, ok := src.(Bytes); ok && int64(len(b)) == size {
		return b
	}
	return nil
}

// NewReader reads a log of the given size from src; path names it in
// errors, and its name (ParseName) gives the version and compression
// unless opts sets them.
func NewReader(src io.ReaderAt, size int64, path string, opts ReaderOptions) (*Reader, error) {
	if opts.Version == 0 {
		opts.Version = -1
		if n, ok := ParseName(filepath.Base(path)); ok {
			opts.Version = n.Version
			if opts.Compression == nil {
				opts.Compression = &n.Compression
			}
		}
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	mem := memOf(src, size)
	r := &Reader{source: source{path: path, src: src, mem: mem}, opts: opts}
	switch {
	case opts.MaxPlainBytes > 0:
		r.budget = opts.MaxPlainBytes
	case opts.MaxPlainBytes < 0:
		r.budget = 1<<63 - 1
	default:
		r.budget = max(DefaultMinPlainBytes, DefaultPlainRatio*size)
	}
	r.parser.own[0] = r.members[:0]
	r.stats.FileBytes = size
	if opts.Compression != nil {
		r.comp = *opts.Compression
	} else {
		var m [4]byte
		if n, _ := src.ReadAt(m[:], 0); n == 4 && binary.LittleEndian.Uint32(m[:]) == zstdMagic {
			r.comp = Zstd
		}
	}
	r.pipe = newPipeline(opts, r.comp, size)
	if r.comp == Zstd {
		r.scanner = NewFrameScanner(src, size)
	} else if mem != nil {
		// Lines are sliced out of the file's bytes, never copied.
		r.text = mem
	} else {
		r.in = io.NewSectionReader(src, 0, size)
	}
	if err := r.readHeader(); err != nil {
		r.release()
		return nil, err
	}
	if opts.WantID != "" {
		if err := checkIdentity(r.header, opts.WantType, opts.WantID, path); err != nil {
			r.release()
			return nil, err
		}
	}
	r.parser.version = r.header.Version
	return r, nil
}

func (r *Reader) Header() *Header { return r.header }

// Compression is how the file is stored.
func (r *Reader) Compression() Compression { return r.comp }

// Stats reports what has been read so far.
func (r *Reader) Stats() Stats {
	s := r.stats
	if !s.TornTail {
		s.CommittedBytes = s.FileBytes
	}
	s.TornBytes = s.FileBytes - s.CommittedBytes
	return s
}

// Close releases the file and the decoder.
func (r *Reader) Close() error {
	r.release()
	if r.closer != nil {
		err := r.closer.Close()
		r.closer = nil
		return err
	}
	return nil
}

func (r *Reader) release() {
	r.endStream()
	r.stopPrefetch()
	if r.frameIn != nil {
		r.frameIn.Reset(nil)
		bufioPool.Put(r.frameIn)
		r.frameIn = nil
	}
	if r.chunk != nil && cap(r.lineBuf) <= keepBufBytes {
		r.chunk.line = r.lineBuf[:0]
		chunkPool.Put(r.chunk)
	}
	r.chunk = nil
	if r.scanner != nil {
		r.scanner.release()
		r.scanner = nil
	}
	if r.dec != nil {
		if r.decBig {
			r.dec.Close()
		} else {
			r.dec.Reset(nil)
			decoderPool.Put(r.dec)
		}
		r.dec = nil
	}
	if r.cur != nil && !r.pipe.lowMemory {
		r.cur.recycle(r.mem != nil)
	}
	r.cur = nil
	r.plain.Reset(nil)
}

func (r *Reader) errorAt(pos Position, kind error, format string, args ...any) *FormatError {
	return &FormatError{Path: r.path, Pos: pos, Msg: fmt.Sprintf(format, args...), Kind: kind}
}

func (r *Reader) framePos(f Frame) Position {
	return Position{Frame: f.Index, FrameOffset: f.Offset, Offset: r.plainOff}
}

func (r *Reader) pos(lineStart int64) Position {
	p := Position{Line: r.line, Offset: lineStart}
	if r.comp == Zstd {
		p.Frame, p.FrameOffset = r.frame.Index, r.frame.Offset
	}
	return p
}

func (r *Reader) readHeader() error {
	line, start, err := r.nextLine()
	if err == io.EOF || (err == nil && line == nil) {
		return r.errorAt(Position{Offset: 0}, ErrCorrupt, "empty or header-less log: the first line must be a complete header line")
	}
	if err != nil {
		return err
	}
	if r.comp == Zstd && r.frame.Index != 1 && r.stats.Framing.Departures == 0 {
		// Frame 1 did not hold the whole header line: read, not canonical.
		r.noteFraming(fmt.Sprintf("the header line ends in frame %d at file byte %d, not in frame 1", r.frame.Index, r.frame.Offset))
	}
	h, perr := parseHeader(line, r.opts.Version, r.members[:0])
	if perr != nil {
		p := r.pos(start)
		p.Column = int64(perr.col) + 1
		return r.errorAt(p, perr.kind, "%s", perr.msg)
	}
	h.Raw = bytes.Clone(line)
	r.header = h
	if r.comp == Zstd && r.frame.Index == 1 && !r.frame.Torn {
		// More than the header line in frame 1 (the zstd tool's) is noted.
		var err error
		if r.tpos == len(r.text) && !r.fill() {
			err = cmp.Or(r.inErr, io.EOF)
		}
		switch {
		case err == nil:
			r.noteFraming("frame 1 holds more than the header line")
		case err != io.EOF:
			return r.errorAt(Position{Frame: 1, FrameOffset: 0, Line: 1}, ErrCorrupt, "header frame failed validation: %s", zstdFault(err))
		}
	}
	return nil
}

// RuleProblem is a Validator's refusal of the event yielded last as an
// ErrCorrupt *FormatError at its line; other errors are returned as they are.
func (r *Reader) RuleProblem(err error) error {
	re, ok := err.(*RuleError)
	if !ok {
		return err
	}
	return &FormatError{Path: r.path, Pos: r.pos(r.plainOff - int64(len(r.ev.Raw)) - 1), Msg: re.Error(), Kind: ErrCorrupt, cause: re}
}

// Stop ends an Events loop after the event it is at (OnProblem's way out).
func (r *Reader) Stop() { r.stopped = true }

// Events yields the events of the log, each valid until the loop body
// returns (Event.Clone keeps one), then an error once (again by a later
// Events); a loop left early leaves the reader at the next event.
func (r *Reader) Events() iter.Seq2[*Event, error] { return untilEOF(r.next) }

// untilEOF ranges over next's values up to io.EOF or an error, yielded once.
func untilEOF[T any](next func() (T, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			v, err := next()
			if err != nil {
				if err != io.EOF {
					var zero T
					yield(zero, err)
				}
				return
			}
			if !yield(v, nil) {
				return
			}
		}
	}
}

func (r *Reader) next() (*Event, error) {
	if r.err != nil {
		return nil, r.err
	}
	for {
		if r.stopped {
			return nil, io.EOF
		}
		line, start, err := r.nextLine()
		if err != nil {
			var fe *FormatError
			if errors.As(err, &fe) && r.opts.OnProblem != nil && fe.Pos.Line > 0 && fe.tooLong {
				r.opts.OnProblem(fe)
				r.resync = true
				continue
			}
			r.err = err
			return nil, err
		}
		expect := r.nextSeq
		if r.resync {
			// The next good row re-anchors the seq: one bad line, one problem.
			expect = -1
		}
		if r.lineK >= 0 && r.textPre != nil {
			r.parser.pre, r.parser.preK = r.textPre, r.lineK
		}
		prob := r.parser.parse(line, expect, &r.ev)
		if prob == nil && r.resync {
			switch {
			case r.ev.Seq < r.nextSeq:
				prob = &lineProblem{kind: ErrCorrupt, msg: fmt.Sprintf("seq %d repeats or goes back (the last good event was seq %d)", r.ev.Seq, r.nextSeq-1)}
			case r.header.Version >= 2 && r.ev.Seq > r.nextSeq+1:
				// One line is one event from v2 on: a damaged line hides
				// at most one seq, so a larger jump is a gap of its own.
				prob = &lineProblem{kind: ErrCorrupt, msg: fmt.Sprintf("seq gap (expected %d or %d after the damaged line, got %d)", r.nextSeq, r.nextSeq+1, r.ev.Seq)}
			}
		}
		if prob != nil {
			p := r.pos(start)
			p.Column = int64(prob.col) + 1
			fe := r.errorAt(p, prob.kind, "%s", prob.msg)
			if r.opts.OnProblem == nil {
				r.err = fe
				return nil, fe
			}
			r.opts.OnProblem(fe)
			if r.parser.seqKnown && r.ev.Seq >= r.nextSeq {
				// The row's own seq is readable: go on from it.
				r.nextSeq, r.resync = r.ev.Seq+1, false
			} else {
				r.resync = true
			}
			continue
		}
		r.resync = false
		n := r.ev.Packed
		if n == 0 {
			n = 1
		}
		r.nextSeq = r.ev.Seq + n
		r.stats.Events++
		return &r.ev, nil
	}
}

// nextLine returns the next complete line and its plain offset.
func (r *Reader) nextLine() ([]byte, int64, error) {
	for {
		if r.done || r.stopped {
			return nil, 0, io.EOF
		}
		if r.comp == Zstd && !r.inFrame {
			if err := r.openFrame(); err != nil {
				if err == io.EOF {
					r.done = true
				}
				return nil, 0, err
			}
		}
		start := r.plainOff
		line, complete, tooLong, err := r.readLine()
		if errors.Is(err, errDecodeBudget) {
			r.done = true
			why := fmt.Sprintf("%d times its %d bytes on disk, at least %s", DefaultPlainRatio, r.stats.FileBytes, humanBytes(DefaultMinPlainBytes))
			if r.opts.MaxPlainBytes > 0 {
				why = "the limit set"
			}
			return nil, 0, r.errorAt(r.framePos(r.frame), ErrCorrupt, "the log decodes to more than %d bytes (%s): refused as a decompression bomb", r.budget, why)
		}
		if tooLong && r.comp == Zstd {
			// The rest of the line is not decoded: a compressed line can
			// expand without end (zstd turns 4 bytes into 128 KiB).
			r.done = true
			r.line++
			return nil, start, r.errorAt(r.pos(start), ErrCorrupt, "line is longer than the limit of %d bytes (the log is not decoded past it)", r.opts.MaxLineBytes)
		}
		if complete {
			r.line++
			r.stats.Lines++
			n := int64(len(line)) + 1
			r.plainOff += n
			r.stats.PlainBytes += n
			if r.comp == Zstd {
				r.aligned.lines++
			}
			if tooLong {
				fe := r.errorAt(r.pos(start), ErrCorrupt, "line is longer than the limit of %d bytes", r.opts.MaxLineBytes)
				fe.tooLong = true
				return nil, start, fe
			}
			return line, start, nil
		}
		// The source ended: a plain file, or one frame's content.
		if r.comp == Plain {
			r.done = true
			if err != nil && err != io.EOF {
				return nil, 0, err
			}
			if len(line) > 0 || tooLong {
				r.stats.TornTail = true
				r.stats.CommittedBytes = start
			}
			return nil, 0, io.EOF
		}
		r.inFrame = false
		r.endStream()
		switch {
		case r.frame.Torn:
			// A torn final frame's complete lines count.
			r.tornAtAligned()
			return nil, 0, io.EOF
		case err != nil && err != io.EOF:
			r.done = true
			return nil, 0, r.errorAt(r.framePos(r.frame), ErrCorrupt, "frame failed validation: %s", zstdFault(err))
		case tooLong:
			r.done = true
			return nil, 0, r.errorAt(r.framePos(r.frame), ErrCorrupt, "complete frame contains a torn JSONL record")
		case len(line) > 0:
			// The line goes on in the next frame: not canonical, but read.
			r.noteFraming(fmt.Sprintf("frame %d at file byte %d ends inside line %d", r.frame.Index, r.frame.Offset, r.line+1))
			r.carry = append(r.carry[:0], line...)
		}
	}
}

// Small frames are decoded whole: checksum first, and no stream set up.
const (
	smallFrameBytes   = 1 << 20
	smallFrameContent = 4 << 20
)

// keepBufBytes bounds the buffers kept from one frame to the next, so a
// reader never holds a large frame's and a small one's at once.
const keepBufBytes = 2 << 20

// allDecoder decodes small frames whole (DecodeAll is concurrency-safe).
var allDecoder = func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxWindow(maxWindow),
		zstd.WithDecoderMaxMemory(2*smallFrameContent))
	if err != nil {
		panic(err)
	}
	return d
}()

// growBuf returns buf emptied with room for n bytes, a quarter to spare in
// one it makes: one made to each larger frame's size was most allocations.
func growBuf(buf []byte, n int64, limit int) []byte {
	if n <= int64(cap(buf)) {
		return buf[:0]
	}
	return make([]byte, 0, max(int(n), min(max(int(n+n/4), minFrameBuf), limit)))
}

// bufLimit is how far frame buffers grow ahead of need: not at all when a
// LowMemory reader's budget counts them.
func (r *Reader) bufLimit(limit int) int {
	if r.pipe.lowMemory {
		return 0
	}
	return limit
}

const minFrameBuf = 16 << 10

// decodeMargin is the room DecodeAll wants past a frame's text.
const decodeMargin = 32

// decodedFrame starts reading frame f, whose bytes in decoded to out (its
// lines parsed in pre), or failed to with err.
func (r *Reader) decodedFrame(f Frame, in, out []byte, pre *framePre, err error) error {
	if err != nil && f.ContentSize < 0 {
		// Unsized, it may be beyond DecodeAll: stream it for its lines.
		r.plain.Reset(in)
		return r.streamFrame(f, &r.plain)
	}
	if err != nil {
		return r.errorAt(r.framePos(f), ErrCorrupt, "frame failed validation: %s", zstdFault(err))
	}
	r.text, r.tpos, r.in, r.inErr, r.textPre, r.tline = out, 0, nil, nil, nil, 0
	if r.decoded += int64(len(out)); r.decoded > r.budget {
		r.text, r.inErr = nil, errDecodeBudget
	} else if len(pre.ends) > 0 {
		r.textPre = pre
	}
	r.inFrame = true
	return nil
}

func (r *Reader) openFrame() error {
	r.endStream()
	if r.pre == nil && r.stats.Frames > 0 && r.pipe.prefetch {
		r.startPrefetch()
	}
	var it *pitem
	if r.pre != nil {
		it = r.nextPrefetched()
	} else {
		if r.cur == nil {
			r.cur = newPframe(r.pipe.lowMemory)
		}
		limit := r.bufLimit(keepPframeBytes)
		r.cur.load(r.scanner, r.src, r.mem, r.pipe.wholeBytes, limit, false)
		if r.cur.decodes() {
			r.cur.decode(limit, false)
		}
		it = &r.cur.items[0]
	}
	pf := r.cur
	f, err := it.f, it.err
	if err == io.EOF {
		if r.stats.Frames == 0 {
			return r.errorAt(Position{}, ErrCorrupt, "empty or header-less log: no zstd frame")
		}
		if len(r.carry) > 0 {
			// The last complete frame ended inside a line: a torn line.
			r.tornAtAligned()
		}
		return io.EOF
	}
	if len(r.carry) == 0 {
		r.aligned = alignedMark{file: f.Offset, plain: r.plainOff}
	}
	if err != nil {
		var fe *FrameError
		if errors.As(err, &fe) {
			return r.errorAt(Position{Frame: fe.Frame, FrameOffset: fe.Offset, Offset: r.plainOff}, ErrCorrupt, "corrupt zstd log: %s", fe.Msg)
		}
		return fmt.Errorf("%s: %w", r.path, err)
	}
	r.frame = f
	r.stats.Frames++
	if !f.Checksum && !f.Torn {
		r.stats.FramesWithoutChecksum++
		if r.opts.OnProblem != nil {
			r.opts.OnProblem(r.errorAt(r.framePos(f), ErrCorrupt, "frame carries no content checksum"))
		}
	}
	if it.whole {
		if r.decBig && (f.ContentSize < 0 || f.ContentSize > keepBufBytes) && !r.keepHistory() {
			// Not a history of megabytes beside a whole frame's text.
			r.dec.Close()
			r.dec, r.decBig, r.decWin = nil, false, 0
		}
		r.curPre = pf.pre.view(it)
		return r.decodedFrame(f, it.in, pf.out[it.out[0]:it.out[1]], &r.curPre, it.derr)
	}
	if cap(pf.out) > keepBufBytes {
		// Nor megabytes of whole-frame text through a streamed frame.
		pf.out = nil
	}
	if f.Torn {
		return r.streamFrame(f, f.decodable(r.src))
	}
	// The decoder reads a block header at a time: buffered, few reads.
	sr := io.NewSectionReader(r.src, f.Offset, f.Size)
	if r.frameIn == nil {
		r.frameIn = bufioPool.Get().(*bufio.Reader)
	}
	r.frameIn.Reset(sr)
	return r.streamFrame(f, r.frameIn)
}

func (r *Reader) streamFrame(f Frame, in io.Reader) error {
	if r.dec == nil {
		// Taken only when a frame is streamed: most logs have none.
		r.dec = decoderPool.Get().(*zstd.Decoder)
	}
	// A single-segment frame's window is its content size.
	if f.fhd&0x20 == 0 || f.ContentSize > keepBufBytes {
		r.decBig = true
	}
	switch {
	case f.fhd&0x20 == 0 || f.ContentSize < 0:
		r.decWin = -1
	case r.pipe.lowMemory && r.decWin >= 0 && r.decWin < f.ContentSize && f.ContentSize > keepBufBytes && f.ContentSize <= keepHistBytes:
		r.sizeHistory()
		r.decWin = max(r.decWin, f.ContentSize)
	case r.decWin >= 0:
		r.decWin = max(r.decWin, f.ContentSize)
	}
	if err := r.dec.Reset(in); err != nil && !f.Torn {
		return r.errorAt(r.framePos(f), ErrCorrupt, "frame failed validation: %s", zstdFault(err))
	}
	r.text, r.tpos, r.in, r.inErr, r.textPre, r.tline = nil, 0, r.dec, nil, nil, 0
	if r.useStream(f) {
		r.stream = startStream(r.dec) // fill reads dec through it
	}
	r.inFrame = true
	return nil
}

// keepHistBytes bounds the history a LowMemory reader keeps through whole
// frames: remaking it was a quarter of a migration's allocations.
const keepHistBytes = 8 << 20

// keepHistory: r keeps its stream decoder's history through a whole frame.
func (r *Reader) keepHistory() bool {
	return r.pipe.lowMemory && r.decWin >= 0 && r.decWin <= keepHistBytes
}

// sizeHistory sizes r.dec's history for keepHistBytes by decoding histFrame.
func (r *Reader) sizeHistory() {
	if err := r.dec.Reset(bytes.NewReader(histFrame)); err == nil {
		var b [1]byte
		if n, err := r.dec.Read(b[:]); n == 0 && err == io.EOF {
			r.decWin = keepHistBytes
			return
		}
	}
	// Not as expected: the next frame makes its own.
	r.dec.Close()
	r.dec, r.decWin = decoderPool.Get().(*zstd.Decoder), 0
}

// histFrame is a zstd frame of no content (one empty last raw block) whose
// header declares a window of keepHistBytes (exponent 13: 1 KiB << 13).
var histFrame = []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 13 << 3, 0x01, 0x00, 0x00}

var errDecodeBudget = errors.New("decode limit reached")

// fill reads in's next chunk into text; false when in has no more (inErr
// says why). A compressed log's chunks are charged to the decode budget.
func (r *Reader) fill() bool {
	if r.in == nil || r.inErr != nil {
		return false
	}
	if r.comp == Zstd && r.decoded >= r.budget {
		r.inErr = errDecodeBudget
		return false
	}
	if r.chunk == nil {
		r.chunk = chunkPool.Get().(*readBufs)
		if r.lineBuf == nil {
			r.lineBuf = r.chunk.line
		}
	}
	var b []byte
	var err error
	if r.stream != nil {
		b, err = r.stream.next()
	} else {
		n := 0
		for n == 0 && err == nil {
			n, err = r.in.Read(r.chunk.chunk)
		}
		b = r.chunk.chunk[:n]
	}
	if r.comp == Zstd {
		// One byte past the budget at most: enough to see it passed.
		if left := r.budget - r.decoded; int64(len(b)) > left {
			b, err = b[:left+1], errDecodeBudget
		}
		r.decoded += int64(len(b))
	}
	r.text, r.tpos, r.textPre, r.tline = b, 0, nil, 0
	if err == io.EOF {
		r.in = nil
	} else if err != nil {
		r.inErr = err
	}
	return len(b) > 0 || r.fill()
}

// readLine returns the next line without its '\n' (complete), or what came
// before the end of the text (err says why). A tooLong line is passed over
// in a plain log; a compressed one is not decoded past it.
func (r *Reader) readLine() (line []byte, complete, tooLong bool, err error) {
	r.lineK = -1
	buf := append(r.lineBuf[:0], r.carry...)
	held := len(r.carry) > 0 // the line began in buf
	r.carry = r.carry[:0]
	for {
		rest := r.text[r.tpos:]
		var i int
		if p := r.textPre; p != nil && r.tline < len(p.ends) {
			// The line's end as the prefetcher found it.
			i = int(p.ends[r.tline]) - r.tpos
		} else {
			i = bytes.IndexByte(rest, '\n')
		}
		n := len(rest)
		if i >= 0 {
			n = i + 1
		}
		if tooLong || len(buf)+n > r.opts.MaxLineBytes+1 {
			if r.comp == Zstd {
				return nil, false, true, nil
			}
			tooLong, buf = true, buf[:0]
			r.tpos += n
			if i >= 0 {
				return nil, true, true, nil
			}
			if !r.fill() {
				return nil, false, true, cmp.Or(r.inErr, io.EOF)
			}
			continue
		}
		r.tpos += n
		if i < 0 {
			if len(rest) > 0 {
				buf, held = append(buf, rest...), true
			}
			if r.fill() {
				if !held {
					buf = r.lineBuf[:0]
				}
				continue
			}
			r.lineBuf = buf
			return buf, false, false, cmp.Or(r.inErr, io.EOF)
		}
		if !held {
			r.lineK = r.tline
		}
		r.tline++
		if !held {
			return rest[:i], true, false, nil
		}
		r.lineBuf = append(buf, rest[:i]...)
		return r.lineBuf, true, false, nil
	}
}
