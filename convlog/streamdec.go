package convlog

import (
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// A frame too large to decode whole is decoded ahead on a goroutine of its
// own, a chunk at a time, while the reader checks the lines of the chunk
// before, so that decoding and checking take a core each. The reader takes
// the chunks in order through Read: every byte and error reaches it where
// the decoder's own Read would have returned them.

// aheadChunkBytes and aheadChunks bound what a stream decodes ahead: a
// chunk being decoded, one ready and one being read.
const (
	aheadChunkBytes = 512 << 10
	aheadChunks     = 3
)

// streamMinFrame is the least a frame states (or, not stated, is on disk)
// for it to be decoded ahead: a smaller one is over before a goroutine
// pays. aheadChunkLen is how much of a chunk is filled at once. Tests
// lower both, to decode every frame ahead a few bytes at a time.
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
	ready chan *aheadChunk
	free  chan *aheadChunk
	stop  chan struct{}
	done  chan struct{}
	cur   *aheadChunk
	off   int
	// over: the chunk with the stream's end or error was handed over,
	// and the goroutine has ended.
	over bool
}

var aheadChunkPool = sync.Pool{New: func() any { return &aheadChunk{buf: make([]byte, aheadChunkBytes)} }}

// useStream reports whether frame f, about to be streamed, is decoded
// ahead.
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
	s := &streamDec{ready: make(chan *aheadChunk, aheadChunks), free: make(chan *aheadChunk, aheadChunks),
		stop: make(chan struct{}), done: make(chan struct{})}
	for range aheadChunks {
		s.free <- aheadChunkPool.Get().(*aheadChunk)
	}
	go func() {
		defer close(s.done)
		for {
			var c *aheadChunk
			select {
			case c = <-s.free:
			case <-s.stop:
				return
			}
			c.n, c.err = io.ReadFull(dec, c.buf[:min(len(c.buf), aheadChunkLen)])
			if c.err == io.ErrUnexpectedEOF {
				c.err = io.EOF
			}
			// ready has room for every chunk: the send never blocks.
			s.ready <- c
			if c.err != nil {
				return
			}
		}
	}()
	return s
}

// Read hands over the decoded text in order, then the stream's end or
// error, as the decoder's Read would.
func (s *streamDec) Read(p []byte) (int, error) {
	for s.cur == nil || s.off == s.cur.n {
		if s.cur != nil {
			if s.cur.err != nil {
				return 0, s.cur.err
			}
			s.free <- s.cur
		}
		s.cur, s.off = <-s.ready, 0
		if s.cur.err != nil {
			s.over = true
		}
	}
	n := copy(p, s.cur.buf[s.off:s.cur.n])
	s.off += n
	return n, nil
}

// end stops the goroutine if it still runs and waits for it: the
// decoder and the frame's input are the reader's again.
func (s *streamDec) end() {
	close(s.stop)
	<-s.done
	if s.cur != nil {
		aheadChunkPool.Put(s.cur)
	}
	for {
		select {
		case c := <-s.ready:
			aheadChunkPool.Put(c)
		case c := <-s.free:
			aheadChunkPool.Put(c)
		default:
			return
		}
	}
}

// endStream ends the frame's read-ahead, if any, before the reader uses
// its decoder or frame input again.
func (r *Reader) endStream() {
	if r.stream != nil {
		r.stream.end()
		r.stream = nil
	}
}
