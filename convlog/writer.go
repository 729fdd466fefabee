package convlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/convkit/convkit/internal/durable"
)

// WriterOptions tune a Writer.
type WriterOptions struct {
	// Compression of a new log (Create); OpenAppend keeps the file's own.
	Compression Compression
	// Observe sees each event OpenAppend reads, valid during the call.
	Observe func(*Event)
}

// Writer appends durable batches to a version 4 log. One writer per log at
// a time: the store's runtime.lock guarantees it.
type Writer struct {
	path    string
	f       *os.File
	comp    Compression
	size    int64 // committed length of the file
	nextSeq int64
	header  *Header
	parser  envelopeParser
	v       *Validator // the rules beyond one line, over every event so far
	buf     []byte     // the staged lines
	frame   []byte
	ev      Event
	// staged events wait in buf for Flush; mark is the state before them.
	staged int
	mark   validatorMark

	// a torn tail found at open, repaired before the first append
	tornAt    int64
	recovered []byte
	torn      bool
	// recoverHeader: the cut comes before the header line's end (a frame
	// of the zstd tool held it with the lines after it): the header is
	// written again first, as a frame of its own.
	recoverHeader bool
}

// Create publishes a new version 4 log at path holding the header and the
// first batch, without overwriting (an existing path: fs.ErrExist). The
// directory is created (0700) if missing.
func Create(path string, h *Header, first []Event, opts WriterOptions) (*Writer, error) {
	if h.Version != CurrentVersion {
		return nil, fmt.Errorf("%s: this build writes only format v%d, not v%d", path, CurrentVersion, h.Version)
	}
	if _, perr := parseHeader(h.AppendJSON(nil), CurrentVersion, nil); perr != nil {
		return nil, fmt.Errorf("%s: invalid header: %s", path, perr.msg)
	}
	w := newWriter(path, opts.Compression, h)
	dir := filepath.Dir(path)
	if err := durable.MkdirAll(dir); err != nil {
		return nil, err
	}
	tmp, err := durable.CreateTemp(dir, "."+filepath.Base(path))
	if err != nil {
		return nil, err
	}
	line := append(h.AppendJSON(nil), '\n')
	if w.comp == Zstd {
		line = encodeFrame(nil, line)
	}
	if err = w.encode(first); err == nil {
		line = append(line, w.batch()...)
		_, err = tmp.Write(line)
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := durable.Publish(tmp, path); err != nil {
		return nil, err
	}
	// Never through a link, and only the regular file just published.
	f, err := durable.OpenRegular(path, os.O_WRONLY)
	if err != nil {
		return nil, err
	}
	w.f = f
	w.size = int64(len(line))
	w.nextSeq += int64(len(first))
	return w, nil
}

func newWriter(path string, comp Compression, h *Header) *Writer {
	return &Writer{path: path, comp: comp, header: h,
		parser: envelopeParser{version: CurrentVersion}, v: newStrictValidator(h)}
}

// OpenAppend opens an existing version 4 log for appending. It reads the
// whole log strictly first. A torn tail is left as it is until the first
// Append, which replaces it with the complete lines recovered from a torn
// final frame, as a fresh frame (repairTornTail).
func OpenAppend(path string, opts WriterOptions) (*Writer, error) {
	// One descriptor is read and then written: the log checked is the log
	// appended to.
	f, err := durable.OpenRegular(path, os.O_RDWR)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	ropts := ReaderOptions{Version: -1}
	if n, ok := ParseName(filepath.Base(path)); ok {
		c := n.Compression
		ropts.Compression = &c
	}
	r, err := NewReader(f, fi.Size(), path, ropts)
	if err != nil {
		f.Close()
		return nil, err
	}
	defer r.Close()
	keep := false
	defer func() {
		if !keep {
			f.Close()
		}
	}()
	if v := r.Header().Version; v != CurrentVersion {
		return nil, fmt.Errorf("%s: log is format v%d; it must be upgraded to v%d before appending", path, v, CurrentVersion)
	}
	w := newWriter(path, r.Compression(), r.Header())
	for ev, err := range r.Events() {
		if err != nil {
			return nil, err
		}
		if err := w.v.Check(ev); err != nil {
			return nil, fmt.Errorf("%w; this log cannot be appended to", r.RuleProblem(err))
		}
		if opts.Observe != nil {
			opts.Observe(ev)
		}
		w.nextSeq = ev.Seq + 1
	}
	p := r.prefix()
	if p.RecoveredBytes > 0 {
		// The lines after the last frame start between two lines, the
		// header among them when the cut comes before its end.
		w.recoverHeader = p.Bytes == 0
		skip := int64(0)
		if w.recoverHeader {
			skip = int64(len(w.header.Raw)) + 1
		}
		if p.RecoveredBytes-skip > maxRecoveredBytes {
			return nil, fmt.Errorf("%s: the torn tail follows more than %d bytes of lines in frames that do not end between two lines (not the canonical framing); this build cannot append to it", path, maxRecoveredBytes)
		}
		if w.recovered, err = p.readTail(f); err != nil {
			return nil, fmt.Errorf("%s: the lines recovered from the torn tail at byte %d do not decode again: %w", path, p.Bytes, err)
		}
		w.recovered = w.recovered[skip:]
	}
	// Bytes is the file's size when the tail is not torn.
	w.size, w.torn, w.tornAt = p.Bytes, p.Torn, p.Bytes
	w.f, keep = f, true
	return w, nil
}

// maxRecoveredBytes bounds the lines OpenAppend keeps to rewrite after a
// torn tail: one frame's in the canonical framing.
const maxRecoveredBytes = 128 << 20

// Path is the file the writer appends to.
func (w *Writer) Path() string { return w.path }

// Header is the log's header.
func (w *Writer) Header() *Header { return w.header }

// Turn reports where the session's turn stands after what was written and
// staged.
func (w *Writer) Turn() TurnState { return w.v.Turn() }

// NextSeq is the seq the next staged or appended event gets.
func (w *Writer) NextSeq() int64 { return w.nextSeq + int64(w.staged) }

// Size is the committed length of the file.
func (w *Writer) Size() int64 { return w.size }

// encode assigns seqs after the staged events, validates each line as a
// reader would, and appends the lines to buf.
func (w *Writer) encode(events []Event) error {
	for i := range events {
		e := events[i]
		e.Seq = w.NextSeq() + int64(i)
		e.Raw = nil
		if d := e.Data; len(d) > 0 && (bytes.IndexByte(d, '\n') >= 0 || len(bytes.Trim(d, " \t\r")) != len(d)) {
			// A line holds no newline, and a reader hands back data
			// without the white space around it: store it compact, so
			// the log reads back and rewrites to the same bytes.
			var c bytes.Buffer
			if err := json.Compact(&c, d); err != nil {
				return fmt.Errorf("event %d of the batch (%s): data is not valid JSON: %v", i, e.Type, err)
			}
			e.Data = c.Bytes()
		}
		start := len(w.buf)
		w.buf = e.AppendJSON(w.buf)
		if prob := w.parser.parse(w.buf[start:], e.Seq, &w.ev); prob != nil {
			return fmt.Errorf("event %d of the batch (%s): %s", i, e.Type, prob.msg)
		}
		if err := w.v.Check(&w.ev); err != nil {
			return fmt.Errorf("event %d of the batch: %w", i, err)
		}
		w.buf = append(w.buf, '\n')
	}
	return nil
}

// batch is buf as written: one frame when compressed.
func (w *Writer) batch() []byte {
	if w.comp == Zstd && len(w.buf) > 0 {
		w.frame = encodeFrame(w.frame[:0], w.buf)
		return w.frame
	}
	return w.buf
}

// Append writes events as one durable batch (Stage, then Flush). The
// events' Seq and Raw fields are ignored.
func (w *Writer) Append(events []Event) error {
	if err := w.Stage(events); err != nil {
		return err
	}
	return w.Flush()
}

// Stage checks events against the log and what is staged, and holds them
// for Flush, so that several calls make one batch; a refused event drops
// the whole batch.
func (w *Writer) Stage(events []Event) error {
	if w.f == nil {
		return fmt.Errorf("%s: writer is closed", w.path)
	}
	if len(events) == 0 {
		return nil
	}
	if w.staged == 0 {
		w.buf, w.mark = w.buf[:0], w.v.mark(events)
	} else if m := w.v.mark(events); m.saved != nil && w.mark.saved == nil {
		// Only appends since the mark: its nodes are still the prefix.
		w.mark.saved = m.saved[:w.mark.nodes]
	}
	if err := w.encode(events); err != nil {
		w.drop()
		return fmt.Errorf("%s: %w", w.path, err)
	}
	w.staged += len(events)
	return nil
}

// drop forgets the staged batch.
func (w *Writer) drop() {
	w.v.reset(w.mark)
	w.staged, w.buf = 0, w.buf[:0]
}

// Flush writes the staged events (one zstd frame when compressed) and
// fsyncs; if the write fails the file is cut back and the batch dropped.
func (w *Writer) Flush() error {
	if w.staged == 0 {
		return nil
	}
	if w.torn {
		if err := w.repairTornTail(); err != nil {
			w.drop()
			return err
		}
	}
	if err := w.writeAt(w.batch()); err != nil {
		w.drop()
		return err
	}
	w.v.commit()
	w.nextSeq += int64(w.staged)
	w.staged = 0
	return nil
}

// writeAt writes b at the committed end and syncs its data (fdatasync: an
// append's size is synced with it), rolling back on failure.
func (w *Writer) writeAt(b []byte) error {
	_, err := w.f.WriteAt(b, w.size)
	if err == nil {
		err = durable.DataSync(w.f)
	}
	if err != nil {
		// Roll back to the committed length so no partial batch remains.
		terr := w.f.Truncate(w.size)
		if terr == nil {
			terr = w.f.Sync()
		}
		return fmt.Errorf("%s: append failed: %w", w.path, errors.Join(err, terr))
	}
	w.size += int64(len(b))
	return nil
}

// repairTornTail replaces the torn tail with the lines recovered from it.
// The fresh frames are written over the tail, NUL-padded to its end in one
// write (a reader takes the zeros as a torn frame), before the file is cut
// to their end: a process killed at any point leaves those lines readable,
// where cutting first would lose them until the rewrite.
func (w *Writer) repairTornTail() error {
	var tail []byte
	if w.recoverHeader {
		tail = encodeFrame(tail, append(w.header.AppendJSON(nil), '\n'))
	}
	if len(w.recovered) > 0 {
		tail = encodeFrame(tail, w.recovered)
	}
	end := w.tornAt + int64(len(tail))
	if len(tail) > 0 {
		fi, err := w.f.Stat()
		if err != nil {
			return err
		}
		if err := writePadded(w.f, tail, w.tornAt, max(fi.Size(), end)); err != nil {
			return fmt.Errorf("%s: rewriting the lines recovered from the torn tail at byte %d: %w", w.path, w.tornAt, err)
		}
		tornTailWritten()
	}
	if err := w.f.Truncate(end); err != nil {
		return fmt.Errorf("%s: cutting the torn tail at byte %d: %w", w.path, end, err)
	}
	if err := w.f.Sync(); err != nil {
		return err
	}
	w.size, w.torn, w.recoverHeader, w.recovered = end, false, false, nil
	return nil
}

// tornTailWritten runs between a repair's write and its cut (a test's
// crash point).
var tornTailWritten = func() {}

// Close closes the file. Every appended batch is already durable.
func (w *Writer) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return err
}
