package convlog

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// How frames are compressed: a Writer's append batches (encodeFrame) and a
// whole log written at once (FrameWriter, an upgrade's successor).

var encoderPool = sync.Pool{New: func() any {
	// One goroutine: callers bound parallelism. Every frame carries its
	// content checksum, as the format requires.
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderCRC(true),
		zstd.WithEncoderConcurrency(1))
	if err != nil {
		panic(err)
	}
	return e
}}

// encodeFrame appends one zstd frame holding src to dst.
func encodeFrame(dst, src []byte) []byte {
	enc := encoderPool.Get().(*zstd.Encoder)
	dst = enc.EncodeAll(src, dst)
	encoderPool.Put(enc)
	return dst
}

// FrameBytes is the plain text size at which a FrameWriter's chunk is full.
const FrameBytes = 1 << 20

const (
	spareChunks    = 2                   // kept for the next frames beyond those in flight
	lineChunkCap   = FrameBytes + 64<<10 // a frame and the line that crosses it
	framesInFlight = 4                   // bounds a writer's memory; more gained nothing
)

// Chunks are pooled so a whole log does not allocate a megabyte per frame.
var lineChunks = sync.Pool{New: func() any { return make([]byte, 0, lineChunkCap) }}

func putLineChunk(b []byte) {
	if cap(b) >= FrameBytes && cap(b) <= lineChunkCap {
		lineChunks.Put(b[:0])
	}
}

// encoders holds an encoder (nil: not made yet) per frame the process may
// compress at once, one per core (each holds a 4 MiB window); with no
// FrameWriter running they go to idleEncoders, which an idle process lets
// go. SpeedFastest is a third faster than the default at the same size on
// 1 MiB frames; WithAllLitEntropyCompression keeps base64 as small as
// `zstd -3`.
var encoders = func() chan *zstd.Encoder {
	c := make(chan *zstd.Encoder, runtime.GOMAXPROCS(0))
	for range cap(c) {
		c <- nil
	}
	return c
}()

var (
	idleEncoders sync.Pool
	writersMu    sync.Mutex
	writers      int // frame writers running
)

// getEncoder waits for a free encoder; putEncoder gives it back.
func getEncoder() *zstd.Encoder {
	if e := <-encoders; e != nil {
		return e
	}
	if e, ok := idleEncoders.Get().(*zstd.Encoder); ok {
		return e
	}
	e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(true),
		zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true), zstd.WithAllLitEntropyCompression(true))
	if err != nil {
		panic(err)
	}
	return e
}

func putEncoder(e *zstd.Encoder) { encoders <- e }

// writersRunning counts frame writers (delta ±1); at none encoders go idle.
func writersRunning(delta int) {
	writersMu.Lock()
	defer writersMu.Unlock()
	if writers += delta; writers == 0 {
		for range cap(encoders) {
			if e := <-encoders; e != nil {
				idleEncoders.Put(e)
			}
			encoders <- nil
		}
	}
}

// roundTrip decodes the frames just compressed, to compare with their lines.
var roundTrip = func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<40))
	if err != nil {
		panic(err)
	}
	return d
}()

// frameTampered (a test hook) changes a frame, the log's from line
// firstLine on, after its compression.
var frameTampered func(firstLine int64, out []byte)

// FrameWriterOptions tune a FrameWriter.
type FrameWriterOptions struct {
	Compress bool
	// Parallel is how many frames are compressed at once (0: one); their
	// checks still run one at a time, in order.
	Parallel int
}

// FrameWriter writes a whole log in the canonical framing: frame 1 the
// header line, then a frame per chunk of whole lines added. Each chunk's
// check runs in order; each frame is decoded again to exactly its lines,
// then written in order, until the first error.
type FrameWriter struct {
	path     string
	compress bool
	work     chan *frameJob
	order    chan *frameJob
	slots    chan struct{} // one token per frame queued and not yet written
	// spare and spareOut keep the largest buffers of written frames, so
	// one grown for a long line is not grown again.
	spare       spareBufs
	spareOut    spareBufs
	done        chan error
	closed      bool
	wg          sync.WaitGroup
	failed      chan struct{}
	failErr     error
	lastChecked chan struct{}
}

// frameJob is one frame: the header line, or a chunk of event lines.
type frameJob struct {
	plain, out []byte
	firstLine  int64
	check      func([]byte) error
	err        error
	ready      chan struct{}
	// prev is closed once the frame before is checked, checked once this is.
	prev, checked chan struct{}
}

// NewFrameWriter starts writing the log at path (named in errors), whose
// frames go to write in order (write must not keep its argument), with its
// header h, which must be a valid current header.
func NewFrameWriter(write func([]byte) error, path string, h *Header, opts FrameWriterOptions) (*FrameWriter, error) {
	line := h.AppendJSON(nil)
	if _, err := ParseHeader(path, line, CurrentVersion); err != nil {
		return nil, err
	}
	par := max(opts.Parallel, 1)
	fw := &FrameWriter{path: path, compress: opts.Compress, work: make(chan *frameJob, framesInFlight), order: make(chan *frameJob, framesInFlight),
		slots: make(chan struct{}, framesInFlight), spare: spareBufs{n: spareChunks}, spareOut: spareBufs{n: par + 1},
		done: make(chan error, 1), failed: make(chan struct{}), lastChecked: make(chan struct{})}
	close(fw.lastChecked)
	writersRunning(1)
	for range par {
		fw.wg.Add(1)
		go fw.compressFrames()
	}
	go fw.writeFrames(write)
	fw.add(&frameJob{plain: append(line, '\n'), firstLine: 1}) // the first: it cannot fail
	return fw, nil
}

// compressFrames checks and compresses queued frames.
func (fw *FrameWriter) compressFrames() {
	defer fw.wg.Done()
	var back []byte
	for j := range fw.work {
		<-j.prev // a frame without a check still keeps the checks' order
		if j.check != nil {
			j.err = j.check(j.plain)
		}
		close(j.checked)
		if j.err == nil && fw.compress {
			// Room for the frame and a quarter more: growing while
			// encoding copied at each doubling.
			n := len(j.plain) + len(j.plain)>>10 + 64
			out := fw.spareOut.get(n)
			if out == nil {
				out = make([]byte, 0, n+n>>2)
			}
			enc := getEncoder()
			j.out = enc.EncodeAll(j.plain, out)
			if frameTampered != nil {
				frameTampered(j.firstLine, j.out)
			}
			// A quarter to spare serves the next frames too.
			if n := len(j.plain); cap(back) < n {
				back = make([]byte, 0, n+n>>2)
			}
			var err error
			back, err = roundTrip.DecodeAll(j.out, back[:0])
			putEncoder(enc)
			if err != nil || !bytes.Equal(back, j.plain) {
				j.err = fmt.Errorf("%s: the frame of lines %d on does not decode to the lines checked (%v)", fw.path, j.firstLine, err)
			}
			fw.recycle(j.plain)
			j.plain = nil
		} else if !fw.compress {
			j.out = j.plain
		}
		close(j.ready)
	}
}

// writeFrames writes the frames in order, until the first error.
func (fw *FrameWriter) writeFrames(write func([]byte) error) {
	var err error
	for j := range fw.order {
		<-j.ready
		if err == nil {
			if err = j.err; err == nil {
				err = write(j.out)
			}
			if err != nil { // only here, once: add returns it
				fw.failErr = err
				close(fw.failed)
			}
		}
		if fw.compress {
			fw.spareOut.put(j.out)
		} else {
			fw.recycle(j.out)
		}
		j.out, j.plain = nil, nil
		<-fw.slots
	}
	fw.done <- err
}

// recycle keeps a chunk for the log's next frame, or gives it back.
func (fw *FrameWriter) recycle(b []byte) {
	if cap(b) < FrameBytes { // the header line's
		return
	}
	if d := fw.spare.put(b); d != nil {
		putLineChunk(d)
	}
}

// Grow returns chunk with room for n more bytes: a chunk is taken only for
// a frame that gets lines (it is a megabyte), and a long line moves to a
// spare with room if any (the spare holding its bytes), else grows.
func (fw *FrameWriter) Grow(chunk []byte, n int) []byte {
	if chunk == nil {
		if chunk = fw.spare.get(0); chunk == nil {
			chunk = lineChunks.Get().([]byte)[:0]
		}
	}
	if cap(chunk)-len(chunk) >= n {
		return chunk
	}
	b := fw.spare.get(len(chunk) + n)
	if b == nil {
		// As append grows it: slices.Grow would clear n zeros too.
		b = make([]byte, 0, max(len(chunk)+n, cap(chunk)+cap(chunk)/4))
	}
	b = append(b, chunk...)
	fw.recycle(chunk)
	return b
}

// Add queues a frame of whole lines, the log's from line firstLine on,
// which the writer then owns; check (if any) runs on them in the order of
// Add, before compression. It waits while framesInFlight frames are unwritten,
// and returns the first error of an earlier frame.
func (fw *FrameWriter) Add(lines []byte, firstLine int64, check func([]byte) error) error {
	if len(lines) == 0 || lines[len(lines)-1] != '\n' {
		return fmt.Errorf("%s: the frame of lines %d on does not end with a whole line", fw.path, firstLine)
	}
	return fw.add(&frameJob{plain: lines, firstLine: firstLine, check: check})
}

func (fw *FrameWriter) add(j *frameJob) error {
	select { // a free slot must not hide a failure
	case <-fw.failed:
		return fw.failErr
	default:
	}
	select {
	case <-fw.failed:
		return fw.failErr
	case fw.slots <- struct{}{}:
	}
	j.ready, j.checked = make(chan struct{}), make(chan struct{})
	j.prev = fw.lastChecked
	fw.lastChecked = j.checked
	fw.order <- j
	fw.work <- j
	return nil
}

// Close waits for the queued frames to be written; it returns the first error.
func (fw *FrameWriter) Close() error {
	if fw.closed {
		return nil
	}
	fw.closed = true
	close(fw.work)
	close(fw.order)
	fw.wg.Wait()
	err := <-fw.done
	writersRunning(-1)
	// No goroutine of fw runs any more.
	for _, b := range fw.spare.bufs {
		putLineChunk(b)
	}
	fw.spare.bufs = nil
	return err
}

// spareBufs keeps up to n buffers, the largest offered; safe for concurrent use.
type spareBufs struct {
	mu   sync.Mutex
	n    int
	bufs [][]byte
}

// get returns the smallest buffer kept of capacity size or more, emptied, or nil.
func (s *spareBufs) get(size int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	best := -1
	for i, b := range s.bufs {
		if cap(b) >= size && (best < 0 || cap(b) < cap(s.bufs[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	b := s.bufs[best]
	last := len(s.bufs) - 1
	s.bufs[best] = s.bufs[last]
	s.bufs[last] = nil
	s.bufs = s.bufs[:last]
	return b[:0]
}

// put offers b; it returns the buffer not kept (b or one it replaced), or nil.
func (s *spareBufs) put(b []byte) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bufs) < s.n {
		s.bufs = append(s.bufs, b[:0])
		return nil
	}
	small := 0
	for i, k := range s.bufs {
		if cap(k) < cap(s.bufs[small]) {
			small = i
		}
	}
	if d := s.bufs[small]; cap(d) < cap(b) {
		s.bufs[small] = b[:0]
		return d
	}
	return b
}
