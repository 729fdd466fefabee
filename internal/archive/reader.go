package archive

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/convkit/convkit/internal/termtext"
)

// Limits bound what a Reader accepts, so that a hostile or damaged archive
// cannot exhaust memory or disk. Zero fields take the defaults.
type Limits struct {
	// MaxEntries bounds the number of entries (default 1,000,000).
	MaxEntries int
	// MaxEntryBytes bounds one entry's size (default 1 TiB).
	MaxEntryBytes int64
	// MaxTotalBytes bounds the sum of the entries' sizes (default 16 TiB).
	MaxTotalBytes int64
	// MaxWindow bounds a zstd frame's window, and so the decoder's memory
	// (default 32 MiB; convkit writes 4 MiB windows, zstd -19 uses 8 MiB).
	MaxWindow uint64
	// MaxTrailingBytes bounds what may follow the tar trailer inside the
	// zstd stream (default 1 MiB: tar's record padding is 10 KiB at most).
	MaxTrailingBytes int64
}

// DefaultLimits are the limits a zero Limits stands for.
var DefaultLimits = Limits{
	MaxEntries:       1_000_000,
	MaxEntryBytes:    1 << 40,
	MaxTotalBytes:    16 << 40,
	MaxWindow:        32 << 20,
	MaxTrailingBytes: 1 << 20,
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxEntries > 0 {
		d.MaxEntries = l.MaxEntries
	}
	if l.MaxEntryBytes > 0 {
		d.MaxEntryBytes = l.MaxEntryBytes
	}
	if l.MaxTotalBytes > 0 {
		d.MaxTotalBytes = l.MaxTotalBytes
	}
	if l.MaxWindow > 0 {
		d.MaxWindow = l.MaxWindow
	}
	if l.MaxTrailingBytes > 0 {
		d.MaxTrailingBytes = l.MaxTrailingBytes
	}
	return d
}

// ReaderOptions configure a Reader.
type ReaderOptions struct {
	Limits Limits
	// CheckName accepts or refuses an entry name (default CheckStoreName).
	// CheckName (the generic checks) always runs first.
	CheckName func(string) error
	// Archive names the archive in errors (a path, or "-").
	Archive string
}

// Header is one entry as the Reader accepted it.
type Header struct {
	// Index is 1-based.
	Index int
	Name  string
	Size  int64
	// Offset is the byte offset of the entry's header in the tar stream.
	Offset int64
}

// Reader reads an archive as a stream, entry by entry, checking every
// entry before handing it out (but for names seen twice, which Extract
// finds as it creates each file exclusively). Memory is bounded by the
// zstd window limit and fixed buffers, whatever the archive holds.
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

// Close releases the decoder. It does not close the underlying reader.
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

// Next checks and returns the next entry's header, or io.EOF after the
// last entry (and a clean end of the stream). Any error ends the reading.
func (r *Reader) Next() (*Header, error) {
	if r.err != nil {
		return nil, r.err
	}
	if r.done {
		return nil, io.EOF
	}
	if r.cur != nil {
		// Finish the previous entry: its bytes must all be there.
		if _, err := io.Copy(io.Discard, r.tr); err != nil {
			return nil, r.damage(r.cur, err)
		}
	}
	// The next header starts at the next 512-byte block: the previous
	// entry's padding is still unread (archive/tar skips it in Next), so
	// r.cnt.n alone named a byte inside the padding.
	off := (r.cnt.n + blockSize - 1) / blockSize * blockSize
	th, err := r.tr.Next()
	if err == io.EOF {
		return nil, r.end()
	}
	if errors.Is(err, tar.ErrHeader) {
		// The header of the next entry (or its PAX records, GNU long name
		// or sparse map) cannot be read: it has an index and an offset,
		// but no name.
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
	// archive/tar expands the GNU sparse formats kept in PAX records into a
	// regular entry of the declared size, holes as zeros: a few hundred
	// bytes of archive would write gigabytes.
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

// Entries yields the entries Next returns, in order; the body reads each
// one's content from r (or leaves it: the next entry skips what is left).
// A clean end of the archive ends the loop; an error is yielded once, as
// (nil, err), and ends it, as it ends the reading. A loop left early leaves
// the reader on the last entry yielded.
func (r *Reader) Entries() iter.Seq2[*Header, error] {
	return func(yield func(*Header, error) bool) {
		for {
			h, err := r.Next()
			if err != nil {
				if err != io.EOF {
					yield(nil, err)
				}
				return
			}
			if !yield(h, nil) {
				return
			}
		}
	}
}

// scan reads the archive from r to its end as Extract would into dir,
// checking every entry and the free space of dir's file system but writing
// nothing, and returns the number of entries and the last one's name. A
// name found twice is Extract's to refuse (its files are created
// exclusively). A spool, when given, receives every byte read from r,
// within the same free space.
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

// spoolWriter copies what a scan reads, its bytes booked in free.
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

// end checks what follows the tar trailer: only a bounded amount of
// padding, and intact zstd frames to the end.
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

// damage reports an error from the tar or zstd layer.
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

// sparseVersion names the GNU sparse format that PAX records declare ("1.0",
// "0.x"), or "" when they declare none. Any GNU.sparse record counts.
func sparseVersion(recs map[string]string) string {
	found := false
	for k := range recs {
		if strings.HasPrefix(k, "GNU.sparse.") {
			found = true
			break
		}
	}
	switch {
	case !found:
		return ""
	case recs["GNU.sparse.major"] != "" || recs["GNU.sparse.minor"] != "":
		return recs["GNU.sparse.major"] + "." + recs["GNU.sparse.minor"]
	}
	// 0.0 and 0.1 carry no version; archive/tar folds 0.0's records into
	// 0.1's map.
	return "0.x"
}

// nameSource says where an entry's name came from when a PAX record
// overrode the name in the tar header.
func nameSource(th *tar.Header) string {
	if _, ok := th.PAXRecords["path"]; ok {
		return " (the name comes from a PAX path record)"
	}
	return ""
}

func typeName(t byte) string {
	switch t {
	case tar.TypeLink:
		return "hard link"
	case tar.TypeSymlink:
		return "symbolic link"
	case tar.TypeChar:
		return "character device"
	case tar.TypeBlock:
		return "block device"
	case tar.TypeDir:
		return "directory entry"
	case tar.TypeFifo:
		return "FIFO"
	case tar.TypeCont:
		return "contiguous file"
	case tar.TypeXGlobalHeader:
		return "PAX global header"
	case tar.TypeGNUSparse:
		return "sparse file"
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
