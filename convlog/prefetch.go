package convlog

import (
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// A compressed log's text is decoded ahead of the lines being read, on
// the reader's own goroutines, so that decoding (about 1.3 GB/s per core)
// and checking lines (about 1 GB/s) run side by side: small frames whole,
// a large frame a chunk at a time.

// prefetchFrameBytes bounds a frame the prefetcher decodes whole: most of
// migrate's (1 MiB of lines and the line across the mark) are within it.
const prefetchFrameBytes = 4 << 20

// prefetchMinFile: a log of a few frames gains nothing from a goroutine.
const prefetchMinFile = 1 << 20

// prefetchDecoders bounds the frames one reader decodes at once.
const prefetchDecoders = 2

// pframe is one frame as the prefetcher found it.
type pframe struct {
	f   Frame
	err error // from the scanner (io.EOF after the last frame)
	// whole: in holds the frame's bytes and out its text, or derr why not.
	whole   bool
	in, out []byte
	derr    error
	pre     framePre // out's lines as the decoder's goroutine parsed them
	// ready is signalled once the frame may be used (decoded, if whole).
	ready chan struct{}
}

// ahead fills a fixed set of buffers (frames, chunks) on a goroutine of
// its own and hands them over in the order filled.
type ahead[T any] struct {
	ready, free chan T
	stop, done  chan struct{}
	all         []T // every buffer, for the pool at the end
}

// startAhead fills all's buffers with fill until it reports the last;
// wait, when set, runs once the goroutine fills no more.
func startAhead[T any](all []T, fill func(T) (last bool), wait func()) *ahead[T] {
	a := &ahead[T]{ready: make(chan T, len(all)), free: make(chan T, len(all)),
		stop: make(chan struct{}), done: make(chan struct{}), all: all}
	for _, x := range all {
		a.free <- x
	}
	go func() {
		defer close(a.done)
		if wait != nil {
			defer wait()
		}
		for {
			var x T
			select {
			case x = <-a.free:
			case <-a.stop:
				return
			}
			last := fill(x)
			// ready has room for every buffer: the send never blocks.
			a.ready <- x
			if last {
				return
			}
		}
	}()
	return a
}

// end stops the goroutine and waits for it: the buffers are the caller's again.
func (a *ahead[T]) end() {
	close(a.stop)
	<-a.done
}

// newPframe is a frame's buffers, from the pool unless lowMemory.
func newPframe(lowMemory bool) *pframe {
	if !lowMemory {
		if pf, _ := pframePool.Get().(*pframe); pf != nil {
			return pf
		}
	}
	return &pframe{ready: make(chan struct{}, 1)}
}

// load sets pf to sc's next frame, its bytes read when it is decoded whole
// (at most whole bytes on disk).
func (pf *pframe) load(sc *FrameScanner, src io.ReaderAt, mem []byte, whole int64, limit int) {
	f, err := sc.next()
	pf.f, pf.err, pf.whole, pf.derr = f, err, false, nil
	pf.pre.lines, pf.pre.ends = pf.pre.lines[:0], pf.pre.ends[:0]
	if err != nil || f.Torn || f.Size > whole ||
		!(f.ContentSize >= 0 && f.ContentSize <= max(whole, smallFrameContent) || f.ContentSize < 0 && f.Size <= smallFrameBytes) {
		return
	}
	pf.whole = true
	if mem != nil {
		pf.in = mem[f.Offset : f.Offset+f.Size]
		return
	}
	pf.in = growBuf(pf.in, f.Size, limit)[:f.Size]
	// A small frame is mostly in the scanner's window already.
	if f.Size <= int64(cap(sc.win)) {
		if b, err := sc.read(f.Offset, int(f.Size)); err == nil {
			copy(pf.in, b)
			return
		}
	}
	if n, err := src.ReadAt(pf.in, f.Offset); n < len(pf.in) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		pf.err = fmt.Errorf("reading frame %d at byte %d: %w", f.Index, f.Offset, err)
	}
}

// decode decodes pf's frame whole, and parses its lines when check.
func (pf *pframe) decode(limit int, check bool) {
	pf.out, pf.derr = allDecoder.DecodeAll(pf.in, frameOut(pf.out, pf.f, limit))
	if check && pf.derr == nil {
		pf.pre.parse(pf.out)
	}
}

// startPrefetch hands the frame scanner and frame buffers to a prefetcher.
func (r *Reader) startPrefetch() {
	decoders, whole := r.pipe.decoders, r.pipe.wholeBytes
	bufs := decoders + 1
	var all []*pframe
	if r.cur != nil {
		all = append(all, r.cur)
		r.cur = nil
	}
	for len(all) < bufs {
		all = append(all, newPframe(r.pipe.lowMemory))
	}
	sc, src, mem := r.scanner, r.src, r.mem
	check := r.pipe.checkAhead
	limit := r.bufLimit(keepPframeBytes)
	work := make(chan *pframe, bufs)
	var wg sync.WaitGroup
	wg.Add(decoders)
	r.pre = startAhead(all, func(pf *pframe) bool {
		pf.load(sc, src, mem, whole, limit)
		// work has a place for every buffer: the send never blocks.
		if pf.whole && pf.err == nil {
			work <- pf
		} else {
			pf.ready <- struct{}{}
		}
		return pf.err != nil || pf.f.Torn
	}, func() {
		close(work)
		wg.Wait()
	})
	stop := r.pre.stop
	for range decoders {
		go func() {
			defer wg.Done()
			for {
				select {
				case pf, ok := <-work:
					if !ok {
						return
					}
					pf.decode(limit, check)
					pf.ready <- struct{}{}
				case <-stop:
					return
				}
			}
		}()
	}
}

// stopPrefetch ends the prefetcher; the scanner is the reader's again.
func (r *Reader) stopPrefetch() {
	if r.pre == nil {
		return
	}
	r.pre.end()
	if !r.pipe.lowMemory {
		// Every goroutine has ended: the frames are no one's.
		for _, pf := range r.pre.all {
			pf.recycle(r.mem != nil)
		}
	}
	r.pre, r.cur = nil, nil
}

// pframePool keeps frames with their grown buffers for the next reader
// (not a LowMemory one's).
var pframePool sync.Pool

// keepPframeBytes bounds the buffers a pooled frame keeps: not a hostile frame's.
const keepPframeBytes = prefetchFrameBytes + 1<<20

// recycle puts pf in the pool unless its buffers grew too large.
func (pf *pframe) recycle(mem bool) {
	select {
	case <-pf.ready:
	default:
	}
	if mem {
		pf.in = nil
	}
	if cap(pf.in) > keepPframeBytes || cap(pf.out) > keepPframeBytes || pf.pre.parsedBytes() > keepPframeBytes {
		return
	}
	pf.f, pf.err, pf.whole, pf.derr = Frame{}, nil, false, nil
	pf.in, pf.out = pf.in[:0], pf.out[:0]
	pf.pre.lines, pf.pre.ends, pf.pre.spans = pf.pre.lines[:0], pf.pre.ends[:0], pf.pre.spans[:0]
	pframePool.Put(pf)
}

// nextPrefetched is the prefetcher's next frame; the previous one goes back.
func (r *Reader) nextPrefetched() *pframe {
	if r.cur != nil {
		r.cur.in = r.cur.in[:0]
		if r.mem != nil {
			r.cur.in = nil
		}
		r.pre.free <- r.cur
		r.cur = nil
	}
	pf := <-r.pre.ready
	<-pf.ready
	r.cur = pf
	return pf
}

// A stream decodes ahead a chunk being decoded, one ready and one being read.
const (
	aheadChunkBytes = 512 << 10
	aheadChunks     = 3
)

// streamMinFrame is the least content (a quarter of it on disk, when not
// stated) that pays for a goroutine; aheadChunkLen is what a chunk is
// filled with. Tests lower both.
var (
	streamMinFrame int64 = 4 << 20
	aheadChunkLen        = aheadChunkBytes
)

type aheadChunk struct {
	buf []byte
	n   int
	err error
}

// streamDec decodes one frame ahead of the reader; see above.
type streamDec struct {
	*ahead[*aheadChunk]
	cur *aheadChunk
}

var aheadChunkPool = sync.Pool{New: func() any { return &aheadChunk{buf: make([]byte, aheadChunkBytes)} }}

// useStream reports whether streamed frame f is decoded ahead.
func (r *Reader) useStream(f Frame) bool {
	if !r.pipe.streamAhead || f.Torn {
		return false
	}
	if f.ContentSize >= 0 {
		return f.ContentSize >= streamMinFrame
	}
	return f.Size >= streamMinFrame/4
}

// startStream decodes dec's frame ahead; the reader reads it through s.
func startStream(dec *zstd.Decoder) *streamDec {
	all := make([]*aheadChunk, aheadChunks)
	for i := range all {
		all[i] = aheadChunkPool.Get().(*aheadChunk)
	}
	return &streamDec{ahead: startAhead(all, func(c *aheadChunk) bool {
		c.n, c.err = io.ReadFull(dec, c.buf[:min(len(c.buf), aheadChunkLen)])
		if c.err == io.ErrUnexpectedEOF {
			c.err = io.EOF
		}
		return c.err != nil
	}, nil)}
}

// next hands over the next chunk of decoded text; the one before goes back.
func (s *streamDec) next() ([]byte, error) {
	if s.cur != nil {
		if s.cur.err != nil {
			return nil, s.cur.err
		}
		s.free <- s.cur
	}
	s.cur = <-s.ready
	return s.cur.buf[:s.cur.n], s.cur.err
}

// endStream ends the frame's read-ahead before the decoder is used again.
func (r *Reader) endStream() {
	if r.stream != nil {
		r.stream.end()
		for _, c := range r.stream.all {
			aheadChunkPool.Put(c)
		}
		r.stream = nil
	}
}
