package archive

import (
	"archive/tar"
	"bufio"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/convkit/convkit/internal/termtext"
)

// Limits bound what a Reader accepts, so that a hostile or damaged archive
// cannot exhaust memory or disk; zero fields take defaultLimits.
type Limits struct {
	MaxEntries    int
	MaxEntryBytes int64
	MaxTotalBytes int64 // the entries' sizes summed
	// MaxWindow bounds the decoder's memory (convkit writes 4 MiB windows,
	// zstd -19 8 MiB).
	MaxWindow        uint64
	MaxTrailingBytes int64 // after the tar trailer (tar's padding is 10 KiB at most)
}

var defaultLimits = Limits{
	MaxEntries:       1_000_000,
	MaxEntryBytes:    1 << 40,
	MaxTotalBytes:    16 << 40,
	MaxWindow:        32 << 20,
	MaxTrailingBytes: 1 << 20,
}

func (l Limits) withDefaults() Limits {
	d := defaultLimits
	return Limits{cmp.Or(l.MaxEntries, d.MaxEntries), cmp.Or(l.MaxEntryBytes, d.MaxEntryBytes),
		cmp.Or(l.MaxTotalBytes, d.MaxTotalBytes), cmp.Or(l.MaxWindow, d.MaxWindow), cmp.Or(l.MaxTrailingBytes, d.MaxTrailingBytes)}
}

// ReaderOptions configure a Reader.
type ReaderOptions struct {
	Limits Limits
	// CheckName accepts or refuses an entry name (default CheckStoreName),
	// after the package's CheckName.
	CheckName func(string) error
	Archive   string // names the archive in errors (a path, or "-")
}

// Header is one entry as the Reader accepted it.
type Header struct {
	Index  int // 1-based
	Name   string
	Size   int64
	Offset int64 // of the header in the tar stream
}

// Reader reads an archive as a stream, checking every entry before handing
// it out (but for names seen twice, which Extract finds), in memory bounded
// by the zstd window limit.
type Reader struct {
	opts  ReaderOptions
	lim   Limits
	dec   *zstd.Decoder
	cnt   *countingReader
	tr    *tar.Reader
	n     int
	total int64
	cur   *Header
	done  bool
	err   error
}

// NewReader starts reading an archive from r.
func NewReader(r io.Reader, opts ReaderOptions) (*Reader, error) {
	lim := opts.Limits.withDefaults()
	if opts.CheckName == nil {
		opts.CheckName = CheckStoreName
	}
	dec, err := zstd.NewReader(bufio.NewReaderSize(r, 256<<10),
		zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderMaxWindow(lim.MaxWindow),
		zstd.WithDecoderMaxMemory(lim.MaxWindow))
	if err != nil {
		return nil, &Error{Archive: opts.Archive, Msg: "not a zstd stream", Err: err}
	}
	cnt := &countingReader{r: dec}
	return &Reader{opts: opts, lim: lim, dec: dec, cnt: cnt, tr: tar.NewReader(cnt)}, nil
}

// Close releases the decoder, not the underlying reader.
func (r *Reader) Close() {
	if r.dec != nil {
		r.dec.Close()
		r.dec = nil
	}
}

func (r *Reader) errorf(h *Header, refused bool, err error, format string, args ...any) error {
	e := &Error{Archive: r.opts.Archive, Msg: fmt.Sprintf(format, args...), Err: err, Refused: refused}
	if h != nil {
		e.Entry, e.Name, e.Offset = h.Index, h.Name, h.Offset
	} else {
		e.Offset = r.cnt.n
	}
	r.err = e
	return e
}

// Next checks and returns the next entry's header, or io.EOF after a clean
// end. Any error ends the reading.
func (r *Reader) Next() (*Header, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.done {
		return nil, io.EOF
	}
	if r.cur != nil {
		if _, err := io.Copy(io.Discard, r.tr); err != nil {
			return nil, r.damage(r.cur, err)
		}
	}
	// The header starts at the next block: archive/tar skips the previous
	// entry's padding in Next.
	off := (r.cnt.n + blockSize - 1) / blockSize * blockSize
	th, err := r.tr.Next()
	if err == io.EOF {
		return nil, r.end()
	}
	if errors.Is(err, tar.ErrHeader) {
		// An unreadable header has an index and an offset, but no name.
		r.cnt.n = off
		e := r.errorf(nil, false, err, "damaged archive (an unreadable tar header)").(*Error)
		e.Entry, e.Unnamed = r.n+1, true
		return nil, e
	}
	if err != nil {
		r.cnt.n = off
		return nil, r.damage(nil, err)
	}
	r.n++
	h := &Header{Index: r.n, Name: th.Name, Size: th.Size, Offset: off}
	r.cur = h
	if r.n > r.lim.MaxEntries {
		return nil, r.errorf(h, true, nil, "more than %d entries", r.lim.MaxEntries)
	}
	switch th.Typeflag {
	case tar.TypeReg, tar.TypeRegA: //nolint:staticcheck // old archivers write TypeRegA for regular files
	case tar.TypeGNUSparse:
		return nil, r.errorf(h, true, nil, "refused: sparse file (GNU old sparse format, type 'S', declaring %d bytes): sparse entries are never extracted", th.Size)
	default:
		return nil, r.errorf(h, true, nil, "refused: %s (only regular files are allowed)", typeName(th.Typeflag))
	}
	// archive/tar expands PAX-kept GNU sparse entries, holes as zeros: a
	// few hundred bytes of archive would write gigabytes.
	if v := sparseVersion(th.PAXRecords); v != "" {
		return nil, r.errorf(h, true, nil, "refused: sparse file (GNU sparse format %s in PAX records, declaring %d bytes): sparse entries are never extracted", v, th.Size)
	}
	if err := CheckName(th.Name); err != nil {
		return nil, r.errorf(h, true, nil, "refused: %v%s", err, nameSource(th))
	}
	if err := r.opts.CheckName(th.Name); err != nil {
		return nil, r.errorf(h, true, nil, "refused: %v%s", err, nameSource(th))
	}
	if th.Size > r.lim.MaxEntryBytes {
		return nil, r.errorf(h, true, nil, "refused: %d bytes exceeds the limit of %d per entry", th.Size, r.lim.MaxEntryBytes)
	}
	r.total += th.Size
	if r.total > r.lim.MaxTotalBytes {
		return nil, r.errorf(h, true, nil, "refused: the entries exceed the limit of %d bytes in all", r.lim.MaxTotalBytes)
	}
	return h, nil
}

// scan reads the archive from r as Extract would into dir, writing nothing
// (but every byte read to spool, within the same free space), and returns
// the number of entries and the last one's name.
func scan(ctx context.Context, r io.Reader, dir string, spool io.Writer, opts ExtractOptions) (n int, last string, err error) {
	free := newSpace(dir, opts.SpaceName)
	var sw *spoolWriter
	if spool != nil {
		sw = &spoolWriter{w: spool, free: free}
		r = io.TeeReader(r, sw)
	}
	ar, err := NewReader(r, opts.ReaderOptions)
	if err != nil {
		return 0, "", err
	}
	defer ar.Close()
	for {
		if err := ctx.Err(); err != nil {
			return ar.n, last, err
		}
		h, err := ar.Next()
		if sw != nil && sw.err != nil {
			return ar.n, last, ar.errorf(h, true, nil, "%v", sw.err)
		}
		if err == io.EOF {
			return ar.n, last, nil
		}
		if err != nil {
			return ar.n, last, err
		}
		last = h.Name
		if free != nil {
			if err := free.take(h.Size); err != nil {
				return ar.n, last, ar.errorf(h, true, nil, "%v", err)
			}
		}
	}
}

type spoolWriter struct {
	w    io.Writer
	free *space
	err  error
}

func (s *spoolWriter) Write(p []byte) (int, error) {
	if s.err == nil && s.free != nil {
		s.err = s.free.take(int64(len(p)))
	}
	if s.err == nil {
		_, s.err = s.w.Write(p)
	}
	if s.err != nil {
		return 0, s.err
	}
	return len(p), nil
}

// Read reads the current entry's content; io.EOF at its end.
func (r *Reader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.cur == nil {
		return 0, io.EOF
	}
	n, err := r.tr.Read(p)
	if err != nil && err != io.EOF {
		return n, r.damage(r.cur, err)
	}
	return n, err
}

// end checks that bounded padding in intact frames follows the trailer.
func (r *Reader) end() error {
	n, err := io.Copy(io.Discard, io.LimitReader(r.cnt, r.lim.MaxTrailingBytes+1))
	if err != nil {
		return r.damage(nil, err)
	}
	if n > r.lim.MaxTrailingBytes {
		return r.errorf(nil, true, nil, "more than %d bytes after the end of the tar stream", r.lim.MaxTrailingBytes)
	}
	r.done = true
	r.cur = nil
	return io.EOF
}

func (r *Reader) damage(h *Header, err error) error {
	msg := "damaged archive"
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		msg = "truncated archive (it ends inside an entry or a frame)"
	case errors.Is(err, zstd.ErrWindowSizeExceeded), errors.Is(err, zstd.ErrDecoderSizeExceeded):
		msg = fmt.Sprintf("refused: a zstd frame needs a window over the limit of %d bytes", r.lim.MaxWindow)
		return r.errorf(h, true, err, "%s", msg)
	}
	return r.errorf(h, false, err, "%s", msg)
}

// sparseVersion names the GNU sparse format PAX records declare ("0.x"
// for 0.0 and 0.1, which carry no version), or "" for none.
func sparseVersion(recs map[string]string) string {
	if maj, mnr := recs["GNU.sparse.major"], recs["GNU.sparse.minor"]; maj != "" || mnr != "" {
		return maj + "." + mnr
	}
	for k := range recs {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return "0.x"
		}
	}
	return ""
}

// nameSource says when a PAX record overrode the tar header's name.
func nameSource(th *tar.Header) string {
	if _, ok := th.PAXRecords["path"]; ok {
		return " (the name comes from a PAX path record)"
	}
	return ""
}

var typeNames = map[byte]string{tar.TypeLink: "hard link", tar.TypeSymlink: "symbolic link", tar.TypeChar: "character device",
	tar.TypeBlock: "block device", tar.TypeDir: "directory entry", tar.TypeFifo: "FIFO", tar.TypeCont: "contiguous file",
	tar.TypeXGlobalHeader: "PAX global header", tar.TypeGNUSparse: "sparse file"}

func typeName(t byte) string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("entry type %s", termtext.Quote(string(t)))
}

// blockSize is tar's block: every header starts at a multiple of it.
const blockSize = 512

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}
