package archive

import (
	"archive/tar"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/termtext"
)

const (
	// DefaultChunkSize: 1 MiB frames cost 0.1-0.4 % of ratio against 4 MiB
	// ones and took a backup's heap from 80 MiB to 29 MiB.
	DefaultChunkSize = 1 << 20
	MaxWorkers       = 8       // parallel frame compressors
	WritebackBytes   = 8 << 20 // how often an archive file's writeback starts (durable.Writeback)
)

// Levels for frames of text and of already-compressed bytes, measured against
// `tar -cf - DIR | zstd -3 -T0` (docs/BACKUP.md): literal entropy coding on
// (off cost 7-20 % of ratio); SpeedFastest for zstd output (0.55 % larger, 15 %
// less CPU), without entropy coding for frames of almost nothing else.
const (
	TextLevel       = zstd.SpeedDefault
	CompressedLevel = zstd.SpeedFastest
)

// rawCompressedShare: a frame this share already-compressed skips entropy coding.
const rawCompressedShare = 7.0 / 8

// WriterOptions configure a Writer.
type WriterOptions struct {
	ModTime   time.Time // every entry's, from the caller's clock (zero: the Unix epoch)
	Workers   int       // default: GOMAXPROCS, at most MaxWorkers
	ChunkSize int       // default DefaultChunkSize
	// Zero: the package's TextLevel and CompressedLevel.
	TextLevel, CompressedLevel zstd.EncoderLevel
	// Rsyncable lays the archive out for a deduplicating copier (restic):
	// compressed content raw in frames cut every ChunkSize bytes from its
	// start, the rest cut by a rolling hash, so unchanged and append-grown
	// entries give the same bytes.
	Rsyncable bool
}

// Sum describes one entry as written.
type Sum struct {
	Size   int64
	SHA256 [sha256.Size]byte
}

// Hex is the SHA-256 in lower-case hex.
func (s Sum) Hex() string { return hex.EncodeToString(s.SHA256[:]) }

// Writer writes an archive as a stream, not safe for concurrent use; after
// an error every call returns it, and the caller should Abort.
type Writer struct {
	tw        *tar.Writer
	ch        *chunker
	modTime   time.Time
	entryTime time.Time
	names     *nameSet
	err       error
	closed    bool
}

// NewWriter starts an archive on w; its goroutines run until Close or Abort.
func NewWriter(w io.Writer, opts WriterOptions) *Writer {
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}
	opts.Workers = min(opts.Workers, MaxWorkers)
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	opts.TextLevel = cmp.Or(opts.TextLevel, TextLevel)
	opts.CompressedLevel = cmp.Or(opts.CompressedLevel, CompressedLevel)
	mt := opts.ModTime
	if mt.IsZero() {
		mt = time.Unix(0, 0)
	}
	ch := newChunker(w, opts)
	mt = mt.UTC().Truncate(time.Second)
	return &Writer{tw: tar.NewWriter(ch), ch: ch, modTime: mt, entryTime: mt, names: newNameSet()}
}

// SetModTime sets the time of the entries written from now on (zero: the
// writer's ModTime), so a file's entry header repeats across archives.
func (w *Writer) SetModTime(t time.Time) {
	if t.IsZero() {
		w.entryTime = w.modTime
		return
	}
	w.entryTime = t.UTC().Truncate(time.Second)
}

// WriteEntry writes one entry of exactly size bytes read from r; fewer is
// an error that breaks the archive.
func (w *Writer) WriteEntry(name string, kind Kind, size int64, r io.Reader) (Sum, error) {
	return w.write(name, kind, size, func() (s Sum, err error) {
		h := sha256.New()
		// Hidden ReaderFrom and WriterTo: the copy always uses the buffer given.
		n, err := io.CopyBuffer(struct{ io.Writer }{io.MultiWriter(w.tw, h)}, struct{ io.Reader }{io.LimitReader(r, size)}, w.ch.buf)
		if err == nil && n < size {
			err = fmt.Errorf("%s: short read: %d of %d bytes (the file shrank while it was archived)", name, n, size)
		}
		h.Sum(s.SHA256[:0])
		return s, err
	})
}

// WriteHashed writes one entry holding data, whose SHA-256 is sum.
func (w *Writer) WriteHashed(name string, kind Kind, data []byte, sum [sha256.Size]byte) (Sum, error) {
	return w.write(name, kind, int64(len(data)), func() (Sum, error) {
		_, err := w.tw.Write(data)
		return Sum{SHA256: sum}, err
	})
}

// write writes an entry's header, then its content by body.
func (w *Writer) write(name string, kind Kind, size int64, body func() (Sum, error)) (Sum, error) {
	if w.err != nil {
		return Sum{}, w.err
	}
	if w.closed {
		return Sum{}, errors.New("archive: write after Close")
	}
	err := CheckName(name)
	if err == nil {
		err = w.names.add(name)
	}
	if err == nil && size < 0 {
		err = errors.New("negative size")
	}
	if err != nil {
		return Sum{}, fmt.Errorf("archive entry %s: %w", termtext.Quote(name), err)
	}
	w.ch.kind, w.ch.header = Text, true
	// USTAR when the name fits, else PAX.
	hdr := &tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: FileMode, ModTime: w.entryTime, Format: tar.FormatUnknown}
	if err := w.tw.WriteHeader(hdr); err != nil {
		w.err = fmt.Errorf("archive entry %s: %w", termtext.Quote(name), err)
		return Sum{}, w.err
	}
	w.ch.kind, w.ch.header = kind, false
	s, err := body()
	if err == nil {
		err = w.ch.failed()
	}
	if err != nil {
		w.err = err
		return Sum{}, err
	}
	s.Size = size
	return s, nil
}

// nameSet refuses a name written twice without holding every name: a
// directory's entries come together, and one left is kept as a digest.
type nameSet struct {
	top  map[string]bool
	dir  string
	here map[string]bool // the names of dir's entries
	left map[uint64]bool // digests of the directories left
	seed maphash.Seed
}

func newNameSet() *nameSet {
	return &nameSet{top: map[string]bool{}, here: map[string]bool{}, left: map[uint64]bool{}, seed: maphash.MakeSeed()}
}

var errDirLeft = errors.New("its directory's entries ended before it (the entries of a directory are written one after the other)")

func (s *nameSet) add(name string) error {
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		if s.top[name] {
			return errors.New("written twice")
		}
		s.top[name] = true
		return nil
	}
	dir, base := name[:i], name[i+1:]
	if dir != s.dir {
		if s.left[maphash.String(s.seed, dir)] {
			return errDirLeft
		}
		if len(s.here) > 0 {
			s.left[maphash.String(s.seed, s.dir)] = true
		}
		clear(s.here)
		s.dir = dir
	}
	if s.here[base] {
		return errors.New("written twice")
	}
	s.here[base] = true
	return nil
}

// Written is the bytes written so far (it lags until Close).
func (w *Writer) Written() int64 { return w.ch.written.Load() }

// Close finishes the archive; it does not close the underlying writer.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err == nil {
		w.ch.kind, w.ch.header = Text, true // the trailer
		if err := w.tw.Close(); err != nil {
			w.err = err
		}
	}
	if err := w.ch.close(w.err != nil); w.err == nil {
		w.err = err
	}
	return w.err
}

// Abort stops without finishing the archive, for the caller to discard.
func (w *Writer) Abort() {
	if w.closed {
		return
	}
	w.closed = true
	if w.err == nil {
		w.err = errors.New("archive: aborted")
	}
	w.ch.close(true)
}

// chunker compresses the tar stream's chunks in parallel into zstd frames.
type chunker struct {
	out       io.Writer
	size      int
	textLevel zstd.EncoderLevel
	compLevel zstd.EncoderLevel

	cur  *chunk
	kind Kind
	// header: tar headers and padding, mostly zeros, count as neither
	// kind: they compress as well without entropy coding.
	header bool
	buf    []byte // copy buffer for WriteEntry

	rsync bool
	gear  uint64 // rolling hash of the last 64 text bytes

	jobs    chan *chunk
	order   chan *chunk
	free    chan *chunk
	workers sync.WaitGroup
	writer  chan struct{} // closed when the writing goroutine ends

	err     atomic.Pointer[error]
	written atomic.Int64
	aborted atomic.Bool
}

type chunk struct {
	in         []byte
	out        []byte
	text, comp int // bytes of each kind in in
	raw        bool
	enc        encoding
	ready      chan struct{}
}

func newChunker(out io.Writer, opts WriterOptions) *chunker {
	c := &chunker{
		out:       out,
		buf:       make([]byte, 256<<10),
		size:      opts.ChunkSize,
		textLevel: opts.TextLevel,
		compLevel: opts.CompressedLevel,
		rsync:     opts.Rsyncable,
		jobs:      make(chan *chunk),
		// At most one filling, one per worker, and a few waiting to be written.
		order:  make(chan *chunk, opts.Workers+1),
		free:   make(chan *chunk, opts.Workers+3),
		writer: make(chan struct{}),
	}
	window := 1 << 10
	for window < opts.ChunkSize && window < zstd.MaxWindowSize {
		window <<= 1
	}
	for range opts.Workers {
		c.workers.Add(1)
		go c.work(window)
	}
	go c.write()
	return c
}

func (c *chunker) fail(err error) {
	c.err.CompareAndSwap(nil, &err)
}

func (c *chunker) failed() error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

// frameBound is the most a zstd frame of n bytes takes.
func frameBound(n int) int { return n + n>>8 + 64 }

func (c *chunker) newChunk() *chunk {
	select {
	case ch := <-c.free:
		ch.in, ch.out, ch.text, ch.comp, ch.raw = ch.in[:0], ch.out[:0], 0, 0, false
		ch.ready = make(chan struct{})
		return ch
	default:
		// out fits any frame: EncodeAll growing it allocated 4 MiB per frame.
		return &chunk{in: make([]byte, 0, c.size), out: make([]byte, 0, frameBound(c.size)), ready: make(chan struct{})}
	}
}

// Write takes tar bytes.
func (c *chunker) Write(p []byte) (int, error) {
	if err := c.failed(); err != nil {
		return 0, err
	}
	n := len(p)
	for len(p) > 0 {
		raw := c.rsync && c.kind == Compressed
		if c.cur != nil && c.rsync && c.cur.raw != raw {
			c.submit() // compressed content starts and ends a frame
		}
		if c.cur == nil {
			c.cur = c.newChunk()
			c.cur.raw = raw
		}
		m := min(len(p), c.size-len(c.cur.in))
		cut := false
		if c.rsync && !raw {
			m, cut = c.textCut(p[:m])
		}
		c.cur.in = append(c.cur.in, p[:m]...)
		switch {
		case c.header:
		case c.kind == Compressed:
			c.cur.comp += m
		default:
			c.cur.text += m
		}
		p = p[m:]
		if cut || len(c.cur.in) == c.size {
			c.submit()
		}
	}
	return n, nil
}

// Rsyncable text frames are cut where the top textCutBits bits of the gear
// hash are zero (every 128 KiB on average), past minTextFrame.
const (
	minTextFrame = 64 << 10
	textCutBits  = 17
)

// textCut returns how much of p goes into the chunk and whether it ends.
func (c *chunker) textCut(p []byte) (int, bool) {
	h, have := c.gear, len(c.cur.in)
	for i, b := range p {
		h = h<<1 + gearTable[b]
		if have+i+1 >= minTextFrame && h>>(64-textCutBits) == 0 {
			c.gear = h
			return i + 1, true
		}
	}
	c.gear = h
	return len(p), false
}

// gearTable is fixed (splitmix64 from a seed): a change would cut every
// rsyncable archive's frames elsewhere once.
var gearTable = func() (t [256]uint64) {
	x := uint64(0x636f6e766b6974) // "convkit"
	for i := range t {
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		t[i] = z ^ z>>31
	}
	return t
}()

func (c *chunker) submit() {
	ch := c.cur
	c.cur = nil
	ch.enc = c.encodingOf(ch.text, ch.comp)
	c.order <- ch
	c.jobs <- ch
}

func (c *chunker) work(window int) {
	defer c.workers.Done()
	encs := map[encoding]*zstd.Encoder{}
	defer func() {
		for _, e := range encs {
			e.Close()
		}
	}()
	for ch := range c.jobs {
		if c.aborted.Load() || c.failed() != nil {
			close(ch.ready)
			continue
		}
		if ch.raw {
			ch.out = convlog.AppendRawFrame(ch.out[:0], ch.in)
			close(ch.ready)
			continue
		}
		e := encs[ch.enc]
		if e == nil {
			var err error
			if e, err = ch.enc.encoder(window); err != nil {
				c.fail(err)
				close(ch.ready)
				continue
			}
			encs[ch.enc] = e
		}
		ch.out = e.EncodeAll(ch.in, ch.out[:0])
		close(ch.ready)
	}
}

type encoding struct {
	level     zstd.EncoderLevel
	noEntropy bool
}

func (c *chunker) encodingOf(text, comp int) encoding {
	if comp <= text {
		return encoding{level: c.textLevel}
	}
	return encoding{level: c.compLevel, noEntropy: float64(comp) >= rawCompressedShare*float64(comp+text)}
}

func (e encoding) encoder(window int) (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderLevel(e.level), zstd.WithEncoderConcurrency(1),
		zstd.WithWindowSize(window), zstd.WithEncoderCRC(true), zstd.WithAllLitEntropyCompression(true),
		zstd.WithNoEntropyCompression(e.noEntropy))
}

func (c *chunker) write() {
	defer close(c.writer)
	for ch := range c.order {
		<-ch.ready
		if !c.aborted.Load() && c.failed() == nil {
			n, err := c.out.Write(ch.out)
			c.written.Add(int64(n))
			if err == nil && n < len(ch.out) {
				err = io.ErrShortWrite
			}
			if err != nil {
				c.fail(err)
			}
		}
		select {
		case c.free <- ch:
		default:
		}
	}
}

func (c *chunker) close(abort bool) error {
	if abort {
		c.aborted.Store(true)
	} else if c.cur != nil && len(c.cur.in) > 0 && c.failed() == nil {
		c.submit()
	}
	close(c.order)
	close(c.jobs)
	<-c.writer
	c.workers.Wait()
	return c.failed()
}
