package convlog

import (
	"fmt"
	"io"
	"sync"
)

// A compressed log's frames are decoded ahead of the lines being read, on
// goroutines of the reader's own, so that decoding (about 1.3 GB/s per
// core) and checking lines (about 1 GB/s) run side by side. The prefetcher
// owns the frame scanner; it decodes small frames whole, up to
// prefetchDecoders at once, and hands them to the reader in file order;
// larger ones the reader streams. Each decoder holds one frame's buffers,
// and the reader one more.

// prefetchFrameBytes bounds a frame the prefetcher decodes whole; the
// frames migrate writes (1 MiB of lines, and the line that crosses the
// mark) are mostly within it.
const prefetchFrameBytes = 4 << 20

// prefetchMinFile is the size from which a compressed log is prefetched:
// a log of a few frames gains nothing from a goroutine.
const prefetchMinFile = 1 << 20

// prefetchDecoders bounds the frames one reader decodes at once.
const prefetchDecoders = 2

// pframe is one frame as the prefetcher found it.
type pframe struct {
	f   Frame
	err error // from the scanner (io.EOF after the last frame)
	// whole: in holds the frame's bytes and out its text, or derr why they
	// did not decode.
	whole   bool
	in, out []byte
	derr    error
	// pre: out's lines as the decoder's goroutine parsed them
	// (preparse.go).
	pre framePre
	// ready is signalled once the frame may be used (decoded, if whole).
	ready chan struct{}
}

type prefetcher struct {
	// frames are in file order, ready or being decoded.
	frames chan *pframe
	free   chan *pframe
	all    []*pframe // the frames above, for the pool at the end
	work   chan *pframe
	stop   chan struct{}
	done   chan struct{}
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

// startPrefetch hands the frame scanner to a prefetcher, and the reader's
// frame buffers with it.
func (r *Reader) startPrefetch() {
	decoders, whole := r.pipe.decoders, r.pipe.wholeBytes
	bufs := decoders + 1
	p := &prefetcher{frames: make(chan *pframe, bufs), free: make(chan *pframe, bufs), work: make(chan *pframe, bufs),
		stop: make(chan struct{}), done: make(chan struct{})}
	if r.cur != nil {
		p.all = append(p.all, r.cur)
		r.cur = nil
	}
	for len(p.all) < bufs {
		p.all = append(p.all, newPframe(r.pipe.lowMemory))
	}
	for _, pf := range p.all {
		p.free <- pf
	}
	r.pre = p
	sc, src, mem := r.scanner, r.src, r.mem
	check := r.pipe.checkAhead
	limit := r.bufLimit(keepPframeBytes)
	var wg sync.WaitGroup
	for range decoders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case pf, ok := <-p.work:
					if !ok {
						return
					}
					pf.decode(limit, check)
					pf.ready <- struct{}{}
				case <-p.stop:
					return
				}
			}
		}()
	}
	go func() {
		defer close(p.done)
		defer wg.Wait()
		defer close(p.work)
		for {
			var pf *pframe
			select {
			case pf = <-p.free:
			case <-p.stop:
				return
			}
			pf.load(sc, src, mem, whole, limit)
			// Both channels have a place for every buffer: neither blocks.
			p.frames <- pf
			if pf.whole && pf.err == nil {
				p.work <- pf
			} else {
				pf.ready <- struct{}{}
			}
			if pf.err != nil || pf.f.Torn {
				return // the last
			}
		}
	}()
}

// stopPrefetch ends the prefetcher (its scanner is the reader's to
// release afterwards).
func (r *Reader) stopPrefetch() {
	if r.pre == nil {
		return
	}
	close(r.pre.stop)
	<-r.pre.done
	if !r.pipe.lowMemory {
		// Every goroutine has ended: the frames are no one's.
		for _, pf := range r.pre.all {
			pf.recycle(r.mem != nil)
		}
	}
	r.pre, r.cur = nil, nil
}

// pframePool holds the frames of finished prefetchers, with their grown
// buffers, for the next reader; a LowMemory reader neither takes nor gives.
var pframePool sync.Pool

// keepPframeBytes bounds the buffers a frame keeps in the pool: those of
// frames decoded whole, not of a hostile frame's.
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

// nextPrefetched is the next frame from the prefetcher; the frame the
// reader was on goes back to it, its buffers to be filled again.
func (r *Reader) nextPrefetched() *pframe {
	if r.cur != nil {
		r.cur.in = r.cur.in[:0]
		if r.mem != nil {
			r.cur.in = nil
		}
		r.pre.free <- r.cur
		r.cur = nil
	}
	pf := <-r.pre.frames
	<-pf.ready
	r.cur = pf
	return pf
}
