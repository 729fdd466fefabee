package convlog

import (
	"io"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// A frame too large to decode whole is decoded ahead on a goroutine of its
// own, a chunk at a time, while the reader checks the lines of the chunk
// before, so that decoding and checking take a core each. The reader takes
// the chunks themselves in order, and the error with the last.

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
	all   [aheadChunks]*aheadChunk
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
	for i := range s.all {
		s.all[i] = aheadChunkPool.Get().(*aheadChunk)
		s.free <- s.all[i]
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

// next hands over the next chunk of decoded text, the one before going
// back to be filled, and the stream's end or error with the last.
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

// end stops the goroutine if it still runs and waits for it: the
// decoder and the frame's input are the reader's again.
func (s *streamDec) end() {
	close(s.stop)
	<-s.done
	for _, c := range s.all {
		aheadChunkPool.Put(c)
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
