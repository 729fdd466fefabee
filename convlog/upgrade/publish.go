package upgrade

import (
	"bytes"
	"cmp"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
)

// ErrSourceChanged: the source or its children changed during the upgrade;
// nothing was published, and a retry may succeed.
var ErrSourceChanged = errors.New("historical session generation changed during migration")

// SourceChangedError names the log that changed, and what changed.
type SourceChangedError struct {
	Path, What string
}

func (e *SourceChangedError) Error() string {
	return ErrSourceChanged.Error() + `: "` + e.Path + `": ` + e.What
}

func (e *SourceChangedError) Unwrap() error { return ErrSourceChanged }

// PublishOptions tune Stage.
type PublishOptions struct {
	// Compression of the successor; nil keeps the source's.
	Compression *convlog.Compression
	// Children, when non-nil, are used as given; else they are collected
	// from Finder (default DirChildren) and checked again before publication.
	Children []ChildFact
	Finder   ChildFinder
	// CheckHeader is a layout's rule that the header names the log's place.
	CheckHeader func(*convlog.Header) error
	// Warn receives warnings: children that could not be read.
	Warn func(string)
	// BeforePublish (a test hook) runs after the stage is verified, before
	// the source is checked again.
	BeforePublish func()
	// Publications, shared by a batch's jobs, lets a child replaced by the
	// batch's own successor count as unchanged.
	Publications *Publications

	afterLink func() // a test hook: after the link, before it is recorded
}

// Publications records the successors a batch published, with the
// identities of source and successor, by source path; safe for concurrent use.
type Publications struct {
	m sync.Map
}

type publication struct {
	src, dst fileIdentity
	dstPath  string
	id       string // the log id its header names
	// linking: dst is the staged file's, whose ctime the link alters.
	linking bool
}

// linking records, before the link, that the staged file becomes pub.dstPath.
func (p *Publications) linking(srcPath string, pub publication) {
	if p != nil {
		pub.linking = true
		p.m.Store(srcPath, pub)
	}
}

// linked settles what linking recorded: forgotten when the link failed, else
// kept with the linked file's identity if only its ctime changed.
func (p *Publications) linked(srcPath string, ok bool) {
	if p == nil {
		return
	}
	v, _ := p.m.Load(srcPath)
	pub, _ := v.(publication)
	dst, err := statIdentity(pub.dstPath)
	if !ok || err != nil {
		p.m.Delete(srcPath)
		return
	}
	staged := pub.dst
	if staged.ctime = dst.ctime; staged == dst {
		pub.dst, pub.linking = dst, false
		p.m.Store(srcPath, pub)
	}
}

// explains reports whether child a became b only by a successor published
// here, b unchanged since.
func (p *Publications) explains(a, b ChildFact) bool {
	if p == nil || a.ChildID != b.ChildID {
		return false
	}
	v, ok := p.m.Load(a.SourcePath)
	pub, _ := v.(publication)
	if !ok || pub.dstPath != b.SourcePath || pub.src != a.file || pub.id != b.ChildID {
		return false
	}
	if pub.linking {
		b.file.ctime = pub.dst.ctime
	}
	return pub.dst == b.file
}

// fileIdentity says a file is unchanged: device, inode, size, mtime, ctime.
type fileIdentity struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

func statIdentity(path string) (fileIdentity, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileIdentity{}, err
	}
	return identityOf(fi), nil
}

// change says how b, a file's identity now, differs from a ("" if not).
func (a fileIdentity) change(b fileIdentity) string {
	switch {
	case a == b:
		return ""
	case a.dev != b.dev || a.ino != b.ino:
		return "it was replaced by another file"
	case a.size != b.size:
		return fmt.Sprintf("its size went from %d to %d bytes", a.size, b.size)
	case a.mtime != b.mtime:
		return "its modification time changed (same size)"
	}
	return "its status changed (change time; same size and modification time)"
}

// childrenDiff says how the children found later differ from those before
// ("" if not), matched by path, then by id; pubs' successors do not count.
func childrenDiff(before, later []ChildFact, pubs *Publications) string {
	byPath := map[string]int{}
	for j, c := range later {
		byPath[c.SourcePath] = j
	}
	matched := make([]bool, len(later))
	var unmatched []ChildFact
	for _, c := range before {
		j, ok := byPath[c.SourcePath]
		if !ok {
			unmatched = append(unmatched, c)
			continue
		}
		matched[j] = true
		b := later[j]
		if c.ChildID != b.ChildID || c.ChildCreatedAt != b.ChildCreatedAt {
			return fmt.Sprintf("child log %s now names session %s (created %d), not %s (created %d)", c.SourcePath, termtext.Quote(b.ChildID), b.ChildCreatedAt, termtext.Quote(c.ChildID), c.ChildCreatedAt)
		}
		if d := c.file.change(b.file); d != "" {
			return fmt.Sprintf("child session %s changed: %s: %s", termtext.Quote(c.ChildID), c.SourcePath, d)
		}
	}
	for _, c := range unmatched {
		j := -1
		for k, b := range later {
			if !matched[k] && b.ChildID == c.ChildID {
				j = k
				break
			}
		}
		if j < 0 {
			return fmt.Sprintf("child session %s is gone: %s", termtext.Quote(c.ChildID), c.SourcePath)
		}
		matched[j] = true
		if !pubs.explains(c, later[j]) {
			return fmt.Sprintf("child session %s moved from %s to %s", termtext.Quote(c.ChildID), c.SourcePath, later[j].SourcePath)
		}
	}
	for j, b := range later {
		if !matched[j] {
			return fmt.Sprintf("child session %s was added: %s", termtext.Quote(b.ChildID), b.SourcePath)
		}
	}
	return ""
}

// SuccessorPath is where Publish puts src's successor: <base>.v4.jsonl[.zst].
func SuccessorPath(src string, c convlog.Compression) (string, error) {
	n, ok := convlog.ParseName(filepath.Base(src))
	if !ok {
		return "", fmt.Errorf("%s: not a log generation name (<base>[.vN].jsonl[.zst|.zstd])", src)
	}
	next := convlog.Name{Base: n.Base, Version: convlog.CurrentVersion, Compression: c}
	if c == convlog.Zstd && n.Compression == convlog.Zstd {
		next.Suffix = n.Suffix
	}
	return filepath.Join(filepath.Dir(src), next.String()), nil
}

// Staged is a successor written and checked in its temporary file; exactly
// one of Publish or Discard must be called.
type Staged struct {
	src, dst string
	opts     PublishOptions
	tmp      *os.File
	st       *staged
	id0      fileIdentity
	id       string // the log id the source's header names
	// children were found before the upgrade among seen (nil: not watched).
	children []ChildFact
	seen     map[string]ChildFact
	finder   ChildFinder
	done     bool
}

// Stage upgrades the log at src into a temporary file beside it, checking
// every frame as it is written. On an error nothing is left behind.
func Stage(src string, opts PublishOptions) (*Staged, error) {
	id0, err := statIdentity(src)
	if err != nil {
		return nil, err
	}
	// LowMemory: a migration holds several.
	src0, err := convlog.Open(src, convlog.ReaderOptions{LowMemory: true})
	if err != nil {
		return nil, err
	}
	defer src0.Close()
	srcHeader := src0.Header()
	if opts.CheckHeader != nil {
		if err := opts.CheckHeader(srcHeader); err != nil {
			return nil, err
		}
	}
	if srcHeader.Version >= convlog.CurrentVersion {
		return nil, fmt.Errorf("%s: log is already at the current format version (v%d)", src, srcHeader.Version)
	}
	comp := src0.Compression()
	if opts.Compression != nil {
		comp = *opts.Compression
	}
	dst, err := SuccessorPath(src, comp)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(src)

	s := &Staged{src: src, dst: dst, opts: opts, id0: id0, id: srcHeader.ID, finder: cmp.Or[ChildFinder](opts.Finder, DirChildren(dir))}
	children := opts.Children
	if children == nil && srcHeader.Type == convlog.SessionLog {
		s.seen = map[string]ChildFact{}
		if s.children, err = findChildren(s.finder, s.id, s.seen); err != nil {
			return nil, err
		}
		for i := range s.children {
			c := &s.children[i]
			c.readDescriptors()
			if c.Warning != "" && opts.Warn != nil {
				opts.Warn(c.Warning)
			}
		}
		children = s.children
	}
	r, err := FromReader(src0, src, Options{Children: children})
	if err != nil {
		return nil, err
	}

	tmp, err := durable.CreateTemp(dir, "."+filepath.Base(dst))
	if err != nil {
		return nil, err
	}
	if s.st, err = writeStage(tmp, r, comp); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return nil, err
	}
	if stageWritten != nil {
		stageWritten(tmp.Name())
	}
	s.tmp = tmp
	return s, nil
}

// Discard removes an unpublished stage's temporary file.
func (s *Staged) Discard() {
	if s.done {
		return
	}
	s.done = true
	s.tmp.Close()
	os.Remove(s.tmp.Name())
}

// Publish makes the successor durable, reads it back, checks the source and
// its children are unchanged since Stage, and links it without overwriting;
// an existing successor is accepted only if it begins with the staged bytes.
func (s *Staged) Publish() (dst string, err error) {
	if s.done {
		return "", fmt.Errorf("%s: stage already published or discarded", s.src)
	}
	tmp, tmpName, opts, src, st := s.tmp, s.tmp.Name(), s.opts, s.src, s.st
	defer s.Discard() // nothing once handed to durable.Publish
	// The stage is read back while it is fsynced: both must succeed before
	// anything is published, and the read no longer waits for the disk.
	synced := make(chan error, 1)
	go func() { synced <- tmp.Sync() }()
	n, same, verr := st.readBack(tmpName, true)
	if err := <-synced; err != nil {
		return "", fmt.Errorf("fsync %s: %w", tmpName, err)
	}
	if verr == nil && (n != st.size || !same) {
		verr = fmt.Errorf("staged session generation changed during verification (%d bytes read back, %d written)", n, st.size)
	}
	if verr != nil {
		return "", fmt.Errorf("%s: staged successor failed verification: %v", tmpName, verr)
	}
	if opts.BeforePublish != nil {
		opts.BeforePublish()
	}
	id1, err := statIdentity(src)
	if err != nil {
		return "", &SourceChangedError{Path: src, What: "it can no longer be read: " + err.Error()}
	}
	if d := s.id0.change(id1); d != "" {
		return "", &SourceChangedError{Path: src, What: d}
	}
	if s.seen != nil {
		later, err := findChildren(s.finder, s.id, s.seen)
		if err != nil {
			return "", &SourceChangedError{Path: src, What: "its child sessions could not be listed again: " + err.Error()}
		}
		if d := childrenDiff(s.children, later, opts.Publications); d != "" {
			return "", &SourceChangedError{Path: src, What: d}
		}
	}
	dst = s.dst
	// Recorded before the link: a parent may look at its children any time.
	pub := publication{src: s.id0, dstPath: dst, id: s.id}
	if fi, err := tmp.Stat(); err == nil {
		pub.dst = identityOf(fi)
	}
	opts.Publications.linking(src, pub)
	s.done = true
	if err := durable.Publish(tmp, dst); err != nil {
		opts.Publications.linked(src, false)
		if !errors.Is(err, durable.ErrExists) {
			return "", err
		}
		if why := sameStagedPrefix(dst, st); why != "" {
			return "", fmt.Errorf(`current session generation already exists at "%s": %s`, dst, why)
		}
		return dst, nil
	}
	if opts.afterLink != nil {
		opts.afterLink()
	}
	opts.Publications.linked(src, true)
	return dst, nil
}

// staged is each write's length and GMAC tag under a key only this Publish
// holds, for the read-back (GMAC: 2.7 times SHA-256's speed, and FIPS).
type staged struct {
	size    int64
	mac     cipher.AEAD
	writes  []stagedWrite
	longest int
}

type stagedWrite struct {
	n   int
	tag [12 + 16]byte // nonce and tag
}

func newStaged() (*staged, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	mac, err := cipher.NewGCMWithRandomNonce(b)
	if err != nil {
		return nil, err
	}
	return &staged{mac: mac}, nil
}

func (st *staged) add(b []byte) {
	w := stagedWrite{n: len(b)}
	st.mac.Seal(w.tag[:0], nil, nil, b)
	st.writes = append(st.writes, w)
	st.size += int64(len(b))
	st.longest = max(st.longest, len(b))
}

// readBack reports how many bytes it read from the regular file at path and
// whether they are exactly those written; toEOF reads on (longer differs).
func (st *staged) readBack(path string, toEOF bool) (n int64, same bool, err error) {
	f, err := durable.OpenRegular(path, os.O_RDONLY)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	// A read per write: io.Copy's 32 KiB took a read per 32 KiB.
	buf := make([]byte, max(st.longest, 4<<10))
	same = true
	for i := range st.writes {
		w := &st.writes[i]
		m, err := io.ReadFull(f, buf[:w.n])
		n += int64(m)
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return n, false, nil
		}
		if err != nil {
			return n, false, err
		}
		if _, err := st.mac.Open(nil, nil, w.tag[:], buf[:m]); err != nil {
			same = false
		}
	}
	if toEOF {
		rest, err := io.Copy(io.Discard, f)
		return n + rest, same && rest == 0, err
	}
	return n, same, nil
}

const (
	// frameTarget is the plain text size of one zstd frame of a successor.
	frameTarget = 1 << 20
	// tailFrameMin is the length past which a successor's last line gets a
	// frame of its own: copiers and appenders decode the last frame.
	tailFrameMin = 64 << 10
	// writebackBytes is written before its writeback starts: the final
	// fsync waits for the last megabytes only.
	writebackBytes = 4 << 20
)

// writeStage writes the header line and the upgraded events to f in frames of
// about 1 MiB of whole lines, each checked as a read-back would check it; the
// MAC tags of the read-back prove the file holds exactly the checked frames.
func writeStage(f *os.File, r *Reader, comp convlog.Compression) (*staged, error) {
	st, err := newStaged()
	if err != nil {
		return nil, err
	}
	wb := durable.NewWriteback(f, writebackBytes)
	defer wb.Close()
	write := func(b []byte) error {
		if _, err := wb.Write(b); err != nil {
			return fmt.Errorf("write %s: %w", f.Name(), err)
		}
		st.add(b)
		return nil
	}
	header := r.Header()
	line := header.AppendJSON(nil)
	if _, err := convlog.ParseHeader(f.Name(), line, convlog.CurrentVersion); err != nil {
		return nil, fmt.Errorf("%s: staged successor failed verification: %w", f.Name(), err)
	}
	fw := newFrameWriter(write, comp == convlog.Zstd, r.path, f.Name(), header)
	defer fw.close()
	// Frame 1 is exactly the header line.
	if err := fw.add(&frameJob{plain: append(line, '\n'), header: true}); err != nil {
		return nil, err
	}
	job := &frameJob{firstLine: 2}
	emit := func() error {
		next := &frameJob{firstSeq: job.firstSeq + job.events, firstLine: job.firstLine + job.events}
		if err := fw.add(job); err != nil {
			return err
		}
		job = next
		return nil
	}
	// A lifted tool result's data is written where its line puts it.
	room := r.room
	if room != nil {
		room.grow = func(n int) []byte {
			job.plain = fw.grow(job.plain, n)
			return job.plain
		}
		defer func() { room.grow = nil }()
	}
	var around [256]byte
	// Where the chunk's last line and its message ids start (tailFrameMin).
	var lastLine, lastMsgs int
	for ev, err := range r.Events() {
		if err != nil {
			return nil, err
		}
		lastLine, lastMsgs = len(job.plain), len(job.msgs)
		inPlace := false
		if room.placed(ev.Data) {
			room.start = nil
			if ev.Raw == nil {
				job.plain, inPlace = lineInPlace(job.plain, ev, room.off, around[:0])
			}
			if !inPlace {
				// Out of the spare room the line is appended to.
				ev.Data = bytes.Clone(ev.Data)
			}
		}
		if !inPlace {
			job.plain = ev.AppendJSON(fw.grow(job.plain, eventSize(ev)+1))
		}
		job.plain = append(job.plain, '\n')
		job.events++
		job.msgs = noteMessage(job.msgs, ev)
		if len(job.plain) >= frameTarget {
			if err := emit(); err != nil {
				return nil, err
			}
		}
	}
	if comp == convlog.Zstd && job.events > 1 && len(job.plain) > tailFrameMin {
		// The last line in a frame of its own, after the rest.
		line, msgs := bytes.Clone(job.plain[lastLine:]), bytes.Clone(job.msgs[lastMsgs:])
		job.plain, job.msgs, job.events = job.plain[:lastLine], job.msgs[:lastMsgs], job.events-1
		if err := emit(); err != nil {
			return nil, err
		}
		job.plain, job.msgs, job.events = line, msgs, 1
	}
	if len(job.plain) > 0 {
		if err := emit(); err != nil {
			return nil, err
		}
	}
	if err := fw.close(); err != nil {
		return nil, err
	}
	if err := fw.rules.Finish(); err != nil {
		return nil, fw.refuse(err)
	}
	return st, nil
}

// lineInPlace writes ev's line into chunk around its data, already at off in
// the spare room; ok is false, chunk unchanged, when it does not fit.
func lineInPlace(chunk []byte, ev *convlog.Event, off int, tmp []byte) (_ []byte, ok bool) {
	around, p := lineAround(ev, tmp)
	n0 := len(chunk)
	at := n0 + p
	if p < 0 || at+len(ev.Data) > cap(chunk) {
		return chunk, false
	}
	line := chunk[:at+len(ev.Data)]
	if at != off {
		copy(line[at:], ev.Data)
		ev.Data = line[at:]
	}
	copy(line[n0:at], around[:p])
	return append(line, around[p+len("null"):]...), true
}

// eventSize is about the length of ev's line (exactly for one read).
func eventSize(ev *convlog.Event) int {
	if ev.Raw != nil {
		return len(ev.Raw)
	}
	return len(ev.Type) + len(ev.Data) + 96 + 12*len(ev.SourceEventSeqs)
}

const (
	spareChunks = 2                    // kept for the next frames beyond those in flight
	chunkCap    = frameTarget + 64<<10 // a frame and the line that crosses it
)

// Chunks are pooled so a migration does not allocate a megabyte per frame.
var chunkPool = sync.Pool{New: func() any { return make([]byte, 0, chunkCap) }}

func getChunk() []byte { return chunkPool.Get().([]byte)[:0] }

func putChunk(b []byte) {
	if cap(b) >= frameTarget && cap(b) <= chunkCap {
		chunkPool.Put(b[:0])
	}
}

// encoders holds an encoder (nil: not made yet) per frame the process may
// compress at once, one per core (each holds a 4 MiB window); with no frame
// writer running they go to idleEncoders, which an idle process lets go.
// SpeedFastest is a third faster than the default at the same size on 1 MiB
// frames; WithAllLitEntropyCompression keeps base64 as small as `zstd -3`.
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

const (
	frameEncoders  = 2 // frames of one log compressed at once: a second core
	framesInFlight = 4 // bounds a writer's memory; more gained nothing
)

// frameWriter checks chunks of whole lines, compresses each into a frame on
// frameEncoders goroutines and writes them in order, until the first error.
type frameWriter struct {
	compress bool
	work     chan *frameJob
	order    chan *frameJob
	slots    chan struct{} // one token per frame queued and not yet written
	// spare and spareOut keep the largest buffers of written frames, so
	// one grown for a long line is not grown again.
	spare    spareBufs
	spareOut spareBufs
	done     chan error
	closed   bool
	wg       sync.WaitGroup
	failed   chan struct{}
	failErr  error

	// rules checks the rules beyond one line on the goroutine that parsed
	// each chunk, in order; src is named in refusals.
	rules       *convlog.Validator
	src         string
	lastChecked chan struct{}
}

// frameJob is one frame: the header line alone, or a chunk of event lines.
type frameJob struct {
	plain     []byte
	header    bool
	firstSeq  int64
	firstLine int64
	events    int64
	msgs      []byte
	out       []byte
	err       error
	ready     chan struct{}
	// prev is closed once the frame before is checked, checked once this is.
	prev, checked chan struct{}
}

// refuse words a rule the successor would break: a reader would refuse it.
func (fw *frameWriter) refuse(err error) error {
	return fmt.Errorf("%s: not converted: its successor would break a rule that reindex and inspect --validate check: %w (inspect --validate lists the source's problems)", fw.src, err)
}

// roundTrip decodes the frames just compressed, to compare with those checked.
var roundTrip = func() *zstd.Decoder {
	d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(1<<40))
	if err != nil {
		panic(err)
	}
	return d
}()

// Test hooks: stageWritten gets the stage's path before its fsync;
// linesTampered and frameTampered change a chunk before its check and a
// frame after its compression.
var (
	stageWritten                 func(path string)
	linesTampered, frameTampered func(j *frameJob)
)

// newFrameWriter starts writing the successor of src at path, with header h.
func newFrameWriter(write func([]byte) error, compress bool, src, path string, h *convlog.Header) *frameWriter {
	fw := &frameWriter{compress: compress, rules: convlog.NewValidator(h), src: src, work: make(chan *frameJob, framesInFlight), order: make(chan *frameJob, framesInFlight),
		slots: make(chan struct{}, framesInFlight), spare: spareBufs{n: spareChunks}, spareOut: spareBufs{n: frameEncoders + 1},
		done: make(chan error, 1), failed: make(chan struct{}), lastChecked: make(chan struct{})}
	close(fw.lastChecked)
	writersRunning(1)
	for i := 0; i < frameEncoders; i++ {
		fw.wg.Add(1)
		check := convlog.NewLineChecker(path, h)
		go func() {
			defer fw.wg.Done()
			var back []byte
			for j := range fw.work {
				if !j.header {
					if linesTampered != nil {
						linesTampered(j)
					}
					<-j.prev
					j.err = fw.checkChunk(check, j)
				}
				close(j.checked)
				if j.err == nil && compress {
					// Room for the frame and a quarter more: growing
					// while encoding copied at each doubling.
					n := len(j.plain) + len(j.plain)>>10 + 64
					out := fw.spareOut.get(n)
					if out == nil {
						out = make([]byte, 0, n+n>>2)
					}
					enc := getEncoder()
					j.out = enc.EncodeAll(j.plain, out)
					if frameTampered != nil {
						frameTampered(j)
					}
					// A quarter to spare serves the next frames too.
					if n := len(j.plain); cap(back) < n {
						back = make([]byte, 0, n+n>>2)
					}
					var err error
					back, err = roundTrip.DecodeAll(j.out, back[:0])
					putEncoder(enc)
					if err != nil || !bytes.Equal(back, j.plain) {
						j.err = fmt.Errorf("staged successor failed verification: frame of lines %d on does not decode to the lines checked (%v)", j.firstLine, err)
					}
					fw.recycle(j.plain)
					j.plain = nil
				} else if !compress {
					j.out = j.plain
				}
				close(j.ready)
			}
		}()
	}
	go func() {
		var err error
		for j := range fw.order {
			<-j.ready
			if err == nil {
				err = j.err
				if err == nil {
					err = write(j.out)
				}
				if err != nil { // only here, once: add returns it
					fw.failErr = err
					close(fw.failed)
				}
			}
			if compress {
				fw.spareOut.put(j.out)
			} else {
				fw.recycle(j.out)
			}
			j.out, j.plain = nil, nil
			<-fw.slots
		}
		fw.done <- err
	}()
	return fw
}

// checkChunk checks j's lines with c and the rules, and their count and
// message ids against the events produced.
func (fw *frameWriter) checkChunk(c *convlog.LineChecker, j *frameJob) error {
	// want is what is left of j.msgs, the ids produced, in order.
	want, idsDiffer := j.msgs, false
	rest := j.plain
	seq, line := j.firstSeq, j.firstLine
	for len(rest) > 0 {
		k := bytes.IndexByte(rest, '\n')
		if k < 0 {
			return fmt.Errorf("staged successor failed verification: line %d is not complete", line)
		}
		ev, err := c.Check(rest[:k], seq, line)
		if err != nil {
			return fmt.Errorf("staged successor failed verification: %w", err)
		}
		if err := fw.rules.Check(ev); err != nil {
			return fw.refuse(err)
		}
		if typ, id, ok := messageID(ev); ok && !idsDiffer {
			n := len(typ) + len(id) + 2
			idsDiffer = len(want) < n || string(want[:len(typ)]) != typ || want[len(typ)] != 0 ||
				!bytes.Equal(want[len(typ)+1:n-1], id) || want[n-1] != '\n'
			if !idsDiffer {
				want = want[n:]
			}
		}
		rest = rest[k+1:]
		seq++
		line++
	}
	if n := seq - j.firstSeq; n != j.events {
		return fmt.Errorf("staged successor failed verification: current session generation contains %d events from line %d, expected %d", n, j.firstLine, j.events)
	}
	if idsDiffer || len(want) > 0 {
		return fmt.Errorf("staged successor failed verification: the message ids of lines %d to %d differ from the events produced", j.firstLine, line-1)
	}
	return nil
}

// recycle keeps a chunk for the log's next frame, or gives it back.
func (fw *frameWriter) recycle(b []byte) {
	if cap(b) < frameTarget { // the header line's
		return
	}
	if d := fw.spare.put(b); d != nil {
		putChunk(d)
	}
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

// grow returns chunk with room for n more bytes: a chunk is taken only for
// a frame that gets lines (it is a megabyte), and a long line moves to a
// spare with room if any (the spare holding its bytes), else grows.
func (fw *frameWriter) grow(chunk []byte, n int) []byte {
	if chunk == nil {
		if chunk = fw.spare.get(0); chunk == nil {
			chunk = getChunk()
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

// add queues a job, whose chunk the writer then owns; it waits while
// framesInFlight frames are unwritten.
func (fw *frameWriter) add(j *frameJob) error {
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

// close waits for the queued frames to be written; it returns the first error.
func (fw *frameWriter) close() error {
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
		putChunk(b)
	}
	fw.spare.bufs = nil
	return err
}

// noteMessage appends a surface event's type and message id to b (checkChunk).
func noteMessage(b []byte, ev *convlog.Event) []byte {
	typ, id, ok := messageID(ev)
	if !ok {
		return b
	}
	b = append(b, typ...)
	b = append(b, 0)
	b = append(b, id...)
	return append(b, '\n')
}

// messageID is a surface event's message id (ok false: not one), from the
// members a LineChecker kept.
func messageID(ev *convlog.Event) (typ string, id []byte, ok bool) {
	inMsg := true
	switch ev.Type {
	case convlog.TypeUserMessage:
		inMsg = false
	case convlog.TypeSystemMessage, convlog.TypeDeveloperMessage, convlog.TypeAssistantMessage, convlog.TypeToolResult:
	default:
		return "", nil, false
	}
	if id, ok = ev.CheckedMember(inMsg, "id"); !ok {
		msg := ev.Data
		if inMsg {
			msg = rawjson.GetFrom(msg, "message")
		}
		id = rawjson.Get(msg, "id")
	}
	return ev.Type, id, true
}

// sameStagedPrefix returns "" when an existing successor is a regular file
// beginning with exactly the staged bytes, else why not.
func sameStagedPrefix(path string, st *staged) string {
	n, same, err := st.readBack(path, false)
	switch {
	case errors.Is(err, durable.ErrSymlink) || errors.Is(err, durable.ErrNotRegular):
		return "it is not a regular file"
	case err != nil:
		return err.Error()
	case n < st.size:
		return "it is shorter than the staged successor"
	case !same:
		return "its content differs from the staged successor"
	}
	return ""
}

// OpenAppend opens a log for appending as the runtime does: an older log's
// successor is published first and appended to.
func OpenAppend(path string, wopts convlog.WriterOptions) (w *convlog.Writer, current string, err error) {
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		return nil, "", err
	}
	version := r.Header().Version
	r.Close()
	current = path
	if version < convlog.CurrentVersion {
		s, err := Stage(path, PublishOptions{})
		if err == nil {
			current, err = s.Publish()
		}
		if err != nil {
			return nil, "", fmt.Errorf("upgrading %s before writing: %w", path, err)
		}
	}
	w, err = convlog.OpenAppend(current, wopts)
	if err != nil {
		return nil, "", err
	}
	return w, current, nil
}
