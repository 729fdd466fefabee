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

// pframe is a run of frames as the prefetcher found them, one after the
// other: a run's frames decoded whole are decoded together, their bytes and
// text each in one buffer, so that many small frames cost one handoff.
type pframe struct {
	items   []pitem
	in, out []byte
	pre     framePre // out's lines as the decoder's goroutine parsed them
	// ready is signalled once the run may be used (decoded, if whole).
	ready chan struct{}
}

// pitem is one frame of a run.
type pitem struct {
	f   Frame
	err error // from the scanner (io.EOF after the last frame)
	// whole: in holds the frame's bytes and out (of the run's) its text,
	// or derr why not; lines are its lines in the run's pre.
	whole      bool
	in         []byte
	out, lines [2]int
	derr       error
}

// A run is at most maxRun frames of at most runText bytes of text in all
// (each stating its size), and its frames' bytes at most one whole frame's.
const (
	maxRun  = 256
	runText = 256 << 10
)

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

// load sets pf to sc's next frame, or with run to a run of them; a frame
// is decoded whole when it is at most whole bytes on disk.
func (pf *pframe) load(sc *FrameScanner, src io.ReaderAt, mem []byte, whole int64, limit int, run bool) {
	clear(pf.items)
	pf.items, pf.in = pf.items[:0], pf.in[:0]
	var size, text int64
	for {
		f, err := sc.next()
		ok := err == nil && !f.Torn && f.Size <= whole &&
			(f.ContentSize >= 0 && f.ContentSize <= max(whole, smallFrameContent) || f.ContentSize < 0 && f.Size <= smallFrameBytes)
		joins := ok && f.ContentSize >= 0 && size+f.Size <= whole && text+f.ContentSize <= runText
		if len(pf.items) > 0 && !joins {
			if ok {
				// The next run's: scanned again there.
				sc.off, sc.n = f.Offset, f.Index-1
				break
			}
			if err != nil || f.Torn {
				pf.items = append(pf.items, pitem{f: f, err: err})
				break
			}
		}
		pf.items = append(pf.items, pitem{f: f, err: err, whole: ok})
		if !ok {
			break
		}
		it := &pf.items[len(pf.items)-1]
		size, text = size+f.Size, text+max(f.ContentSize, 0)
		if mem != nil {
			it.in = mem[f.Offset : f.Offset+f.Size]
		} else if it.err = pf.read(sc, src, f, whole, limit); it.err != nil {
			break
		}
		if !run || !joins || len(pf.items) == maxRun {
			break
		}
	}
	if mem == nil {
		off := 0
		for i := range pf.items {
			if it := &pf.items[i]; it.whole {
				it.in = pf.in[off : off+int(it.f.Size)]
				off += int(it.f.Size)
			}
		}
	}
}

// read appends frame f's bytes to pf.in.
func (pf *pframe) read(sc *FrameScanner, src io.ReaderAt, f Frame, whole int64, limit int) error {
	n := len(pf.in)
	if need := int64(n) + f.Size; need > int64(cap(pf.in)) {
		// Doubled within a whole frame's bytes: a run's frames come one by one.
		pf.in = append(growBuf(nil, max(need, min(2*int64(cap(pf.in)), whole)), limit), pf.in...)
	}
	pf.in = pf.in[:n+int(f.Size)]
	// A small frame is mostly in the scanner's window already.
	if f.Size <= int64(cap(sc.win)) {
		if b, err := sc.read(f.Offset, int(f.Size)); err == nil {
			copy(pf.in[n:], b)
			return nil
		}
	}
	if m, err := src.ReadAt(pf.in[n:], f.Offset); m < int(f.Size) {
		if err == nil || err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("reading frame %d at byte %d: %w", f.Index, f.Offset, err)
	}
	return nil
}

// decodes reports whether pf has a frame to decode.
func (pf *pframe) decodes() bool {
	for _, it := range pf.items {
		if it.whole && it.err == nil {
			return true
		}
	}
	return false
}

// decode decodes pf's whole frames, and parses their lines when check.
func (pf *pframe) decode(limit int, check bool) {
	var need int64
	for _, it := range pf.items {
		if it.whole && it.err == nil && it.f.ContentSize >= 0 {
			need += min(it.f.ContentSize, it.f.Size*(128<<10)/4) + decodeMargin
		}
	}
	pf.out = growBuf(pf.out, need, limit)
	pf.pre.reset()
	for i := range pf.items {
		it := &pf.items[i]
		if !it.whole || it.err != nil {
			continue
		}
		n := len(pf.out)
		// Decoded as into a buffer of its own, the limits the same.
		got, err := allDecoder.DecodeAll(it.in, pf.out[n:n])
		switch {
		case err != nil:
		case n == 0:
			pf.out = got
		case len(got) > 0 && cap(pf.out)-n >= len(got) && &pf.out[n : n+1][0] == &got[0]:
			pf.out = pf.out[:n+len(got)]
		default:
			pf.out = append(pf.out, got...)
		}
		it.derr, it.out = err, [2]int{n, len(pf.out)}
	}
	// Once pf.out moves no more: the members kept alias the lines.
	for i := range pf.items {
		it := &pf.items[i]
		it.lines[0] = len(pf.pre.lines)
		if check && it.whole && it.err == nil && it.derr == nil {
			pf.pre.parse(pf.out[it.out[0]:it.out[1]])
		}
		it.lines[1] = len(pf.pre.lines)
	}
}

// view is it's lines in p, as a framePre of its own text.
func (p *framePre) view(it *pitem) framePre {
	a, b := it.lines[0], it.lines[1]
	return framePre{lines: p.lines[a:b:b], ends: p.ends[a:b:b]}
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
		pf.load(sc, src, mem, whole, limit, true)
		// Read before pf is handed over.
		last := pf.items[len(pf.items)-1]
		// work has a place for every buffer: the send never blocks.
		if pf.decodes() {
			work <- pf
		} else {
			pf.ready <- struct{}{}
		}
		return last.err != nil || last.f.Torn
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
	if cap(pf.in) > keepPframeBytes || cap(pf.out) > keepPframeBytes || pf.pre.parsedBytes() > keepPframeBytes || cap(pf.items) > maxRun {
		return
	}
	clear(pf.items)
	pf.items, pf.in, pf.out = pf.items[:0], pf.in[:0], pf.out[:0]
	pf.pre.reset()
	pframePool.Put(pf)
}

// nextPrefetched is the prefetcher's next frame; a run's last done, the
// run goes back.
func (r *Reader) nextPrefetched() *pitem {
	if r.cur != nil && r.curK < len(r.cur.items) {
		r.curK++
		return &r.cur.items[r.curK-1]
	}
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
	r.cur, r.curK = pf, 1
	return &pf.items[0]
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
