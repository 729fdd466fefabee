// Package backup takes, checks and restores backups of a convkit store.
//
// A backup is one archive (package archive: tar inside zstd) holding every
// log of the store, a consistent snapshot of metadata.db and, last, a
// manifest (MANIFEST.json) listing every file with its size and SHA-256,
// and for logs what the strict reader found: the committed length, the
// event count, a torn tail or the error.
//
// Write streams a backup to any io.Writer; ToDir publishes one into a
// directory under a temporary name, renames it to convkit-<UTC time>.tar.zst
// only when complete, and applies retention. When runtime.lock is free the
// backup holds it for the run and copies every log whole; when the runtime
// holds it, the backup does not wait: it copies each log's committed
// prefix (up to its last complete line or frame) while the runtime keeps
// appending, and the manifest says the backup was online.
//
// VerifyArchive checks an archive as a restore would: every checksum, every
// log read as strictly as at backup time, and an index rebuilt in a
// temporary directory compared with the manifest. Restore verifies first,
// then puts the store (or one conversation and its fork ancestors) in place.
//
// Library code takes its streams, clock and temporary directory from the
// caller; it never writes to os.Stdout.
package backup

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/progress"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// Options configure Write.
type Options struct {
	Now         func() time.Time // default time.Now
	ToolVersion string
	TempDir     string            // holds the metadata.db snapshot (default os.TempDir())
	Workers     int               // read, check and compress (default GOMAXPROCS, at most archive.MaxWorkers)
	Progress    progress.Progress // files archived
	OnEvent     func(store.Item)  // each file left out, log invalid or entry out of shape, as found
	Strict      bool              // session logs read event by event as reindex does, not by structure
	// Rsyncable lays the archive out for a deduplicating copier and makes
	// it reproducible: createdAt is the newest time archived.
	Rsyncable bool
	// NoIndex leaves metadata.db out: restore rebuilds it, and in a
	// deduplicating repository its pages are most of what a backup adds.
	NoIndex bool
	Archive archive.WriterOptions // tests and benchmarks

	spoolMemory  int    // of each manifest list before it spools (default defaultSpoolMemory)
	snapshotPath string // ToDir's, beside its temporary archive
}

func (o *Options) defaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	o.TempDir = cmp.Or(o.TempDir, os.TempDir())
	if o.Workers <= 0 {
		o.Workers = min(runtime.GOMAXPROCS(0), archive.MaxWorkers)
	}
	if o.Progress == nil {
		o.Progress = progress.Nop{}
	}
	o.OnEvent = emitter(o.OnEvent)
}

// Result is what Write did.
type Result struct {
	Manifest *Manifest    // without the lists streamed into the archive
	Invalid  []store.Item // logs archived whole because their check failed
	Vanished []string     // logs deleted between the walk and their reading
	Bytes    int64        // what was written
}

// Partial: something of the store is missing or failed its check (exit 3).
func (r *Result) Partial() bool {
	return len(r.Manifest.Problems) > 0 || r.Manifest.Counts.InvalidLogs > 0
}

// Write streams a backup of the store s (opened with store.LockIfFree) to
// w: holding runtime.lock, every log is copied whole; without it, each
// log's committed prefix (online). Unreadable files are left out and
// invalid logs archived whole (Result.Partial); Write fails only when the
// archive cannot be written or the store walked.
func Write(ctx context.Context, s *store.Store, w io.Writer, opts Options) (*Result, error) {
	opts.defaults()
	m := &Manifest{ManifestHeader: manifestFormat.Header(opts.ToolVersion, opts.Now()), LogCheck: LogCheckStructure,
		Problems: []store.Item{}}
	now := m.CreatedAt
	if !s.Writable() {
		// Online: copying committed prefixes is safe whoever writes.
		_, holder, why := s.Online()
		m.Online, m.Holder = true, holder
		if why != nil {
			m.LockError = termtext.Text(why)
			opts.OnEvent(store.Item{Kind: store.ItemNotLocked, Path: s.Lock().Path(), Reason: m.LockError})
		}
	}
	if opts.Strict {
		m.LogCheck = LogCheckStrict
	}
	res := &Result{Manifest: m, Invalid: []store.Item{}}
	problem := func(p, reason string) {
		it := store.Item{Kind: store.ItemUnreadable, Path: p, Reason: reason}
		m.Problems = append(m.Problems, it)
		opts.OnEvent(it)
	}

	// The metadata.db snapshot is taken while the logs are read.
	snapDone := make(chan snapshot, 1)
	go func() {
		var sn snapshot
		if !opts.NoIndex {
			sn = snapshotIndex(ctx, s.IndexPath(), opts.TempDir, opts.snapshotPath, !m.Online)
		}
		snapDone <- sn
	}()
	waitSnap := sync.OnceValue(func() snapshot { return <-snapDone })
	defer func() {
		if r := waitSnap(); r.method == IndexByVacuum {
			os.Remove(r.path)
		}
	}()

	// The progress counts each log, the index and the manifest.
	sw, err := walkStore(s, opts.Rsyncable)
	if err != nil {
		return nil, err
	}
	opts.Progress.SetTotal(int64(sw.logs) + 2)

	wopts := opts.Archive
	wopts.ModTime = now
	wopts.Rsyncable = wopts.Rsyncable || opts.Rsyncable
	wopts.Workers = cmp.Or(wopts.Workers, opts.Workers)
	aw := archive.NewWriter(w, wopts)
	var newest time.Time // an rsyncable archive's createdAt
	entryTime := func(t time.Time) {
		aw.SetModTime(t)
		if t.After(newest) {
			newest = t
		}
	}
	fail := func(err error) (*Result, error) {
		aw.Abort()
		return nil, err
	}

	// The manifest's lists are spooled, so memory does not grow with the store.
	spoolAt := func(what string) string {
		if opts.snapshotPath != "" {
			return strings.TrimSuffix(opts.snapshotPath, snapshotSuffix) + spoolSuffix + what
		}
		return filepath.Join(opts.TempDir, fmt.Sprintf(".convkit-manifest-%d-%s-%s.tmp", os.Getpid(), now.Format("20060102T150405Z"), what))
	}
	convSpool, fileSpool := newSpool(spoolAt("conversations"), opts.spoolMemory), newSpool(spoolAt("files"), opts.spoolMemory)
	defer convSpool.close()
	defer fileSpool.close()
	addFile := func(f File) error {
		m.Counts.Files++
		m.Counts.Bytes += f.Size
		if f.Log != nil {
			m.Counts.Logs++
			if f.Log.Current && f.Log.Session != "" {
				m.Counts.SessionLogs++
			}
			if f.Log.Error != "" {
				res.Invalid = append(res.Invalid, invalidLog(f.Name, f.Log.Error))
			}
		}
		return fileSpool.add(f)
	}

	// A conversation is finished (its expectation, with strict) when the
	// next begins; one with nothing archived is not in the archive.
	var cur *convLogs
	flush := func() error {
		if cur == nil {
			return nil
		}
		c := cur.Conversation
		if opts.Strict {
			c = expectations([]*convLogs{cur}, false, &m.Counts)[0]
		}
		m.Counts.Conversations++
		if err := convSpool.add(&c); err != nil {
			return err
		}
		for _, f := range cur.files {
			if err := addFile(f); err != nil {
				return err
			}
		}
		cur = nil
		return nil
	}
	err = loadAll(ctx, sw.jobs(), m.Online, opts.Strict, opts.Workers, 2*opts.Workers+2, func(l *loaded) error {
		defer l.close()
		defer opts.Progress.Add(1)
		j := l.job
		switch {
		case l.vanished:
			res.Vanished = append(res.Vanished, j.path)
			return nil
		case l.problem != "":
			problem(j.path, l.problem)
			return nil
		}
		if cur == nil || cur.idx != j.convIdx {
			if err := flush(); err != nil {
				return err
			}
			cur = &convLogs{Conversation: Conversation{ID: j.convID, Dir: j.convDir}, idx: j.convIdx}
		}
		entryTime(l.mtime)
		sum, err := l.archive(aw)
		if err != nil {
			return fmt.Errorf("archive %s: %w", j.path, err)
		}
		if l.info.Error != "" {
			m.Counts.InvalidLogs++
			it := invalidLog(j.name, l.info.Error) // the reason without the name Path holds
			it.Path = j.path
			opts.OnEvent(it)
		}
		m.LiveTailBytes += l.liveTail
		cur.add(l, File{Name: j.name, Size: sum.Size, SHA256: sum.Hex()})
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fail(err)
	}
	// A second spelling of a generation is archived, with a warning.
	for _, p := range sw.problems {
		if p.Kind == store.ItemWarning {
			opts.OnEvent(p)
		} else {
			problem(p.Path, p.Reason)
		}
	}
	sr := waitSnap()
	switch {
	case sr.err != nil && ctx.Err() != nil:
		return fail(ctx.Err())
	case sr.err != nil:
		m.Index = IndexUnreadable
		problem(s.IndexPath(), sr.err.Error())
	case opts.NoIndex:
		m.Index = IndexLeftOut
	case sr.path == "":
		m.Index = IndexAbsent
	default:
		m.Index, m.IndexMethod = IndexSnapshot, sr.method
		entryTime(sr.mtime)
		f, err := archiveFile(aw, archive.IndexName, sr.path)
		if err == nil {
			err = addFile(f)
		}
		if err != nil {
			return fail(fmt.Errorf("archive the metadata.db snapshot: %w", err))
		}
	}
	opts.Progress.Add(1)

	if opts.Rsyncable {
		if newest.IsZero() {
			newest = time.Unix(0, 0)
		}
		m.CreatedAt = newest.UTC().Truncate(time.Second)
	}
	aw.SetModTime(m.CreatedAt)
	if err := writeManifest(aw, m, convSpool, fileSpool); err != nil {
		return fail(err)
	}
	if err := aw.Close(); err != nil {
		return nil, err
	}
	opts.Progress.Add(1)
	res.Bytes = aw.Written()
	return res, nil
}

func archiveFile(aw *archive.Writer, name, p string) (File, error) {
	f, err := durable.OpenRegular(p, os.O_RDONLY)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return File{}, err
	}
	size := fi.Size()
	sum, err := aw.WriteEntry(name, archive.Text, size, bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 256<<10))
	if err != nil {
		return File{}, err
	}
	return File{Name: name, Size: sum.Size, SHA256: sum.Hex()}, nil
}

// Ways the metadata.db snapshot is taken (Manifest.IndexMethod).
const (
	IndexByVacuum = "vacuum-into"
	IndexByCopy   = "copy"
)

// snapshot is a copy of metadata.db (path "": none) and the file's time
// before the copy, never newer than what it holds.
type snapshot struct {
	path, method string
	mtime        time.Time
	err          error
}

// snapshotIndex makes a consistent copy of metadata.db: the file itself
// when nothing can write it and no journal is pending (IndexByCopy), else
// VACUUM INTO tmpDir (or path) in one read transaction, which WAL writers
// do not block.
func snapshotIndex(ctx context.Context, src, tmpDir, path string, quiescent bool) snapshot {
	fi, err := os.Lstat(src)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return snapshot{}
	case err != nil:
		return snapshot{err: err}
	case !fi.Mode().IsRegular():
		return snapshot{err: errors.New("not a regular file (symbolic links are not followed)")}
	}
	if (quiescent || index.ReadOnlyFS(filepath.Dir(src))) && !pending(src+"-wal") && !pending(src+"-journal") {
		return snapshot{src, IndexByCopy, fi.ModTime(), nil}
	}
	var tmp *os.File
	if path != "" {
		tmp, err = durable.CreateExcl(path)
	} else {
		tmp, err = durable.CreateTemp(tmpDir, ".convkit-index-snapshot")
	}
	if err != nil {
		return snapshot{err: fmt.Errorf("snapshot of %s: %w", src, err)}
	}
	tmp.Close() // VACUUM INTO writes into an existing empty file, keeping its 0600
	if err := index.VacuumInto(ctx, src, tmp.Name(), index.ReadOptions{TempDir: tmpDir}); err != nil {
		os.Remove(tmp.Name())
		return snapshot{err: err}
	}
	return snapshot{tmp.Name(), IndexByVacuum, fi.ModTime(), nil}
}

func pending(p string) bool {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	return err != nil || fi.Size() > 0
}

// spool is one list of the manifest as comma-separated JSON, in memory up
// to memory bytes, beyond in an unlinked file.
type spool struct {
	path    string
	memory  int
	mem     bytes.Buffer
	f       *os.File
	w       *bufio.Writer
	item    bytes.Buffer
	enc     *json.Encoder // onto item
	n, size int64
}

const defaultSpoolMemory = 1 << 20

func newSpool(path string, memory int) *spool {
	s := &spool{path: path, memory: cmp.Or(memory, defaultSpoolMemory)}
	s.enc = newEncoder(&s.item)
	return s
}

// newEncoder keeps <, > and & as they are.
func newEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

func (s *spool) add(v any) error {
	s.item.Reset()
	if s.n > 0 {
		s.item.WriteByte(',')
	}
	if err := s.enc.Encode(v); err != nil {
		return err
	}
	b := bytes.TrimSuffix(s.item.Bytes(), []byte{'\n'})
	var err error
	if s.f == nil && s.mem.Len()+len(b) > s.memory {
		if s.f, err = os.OpenFile(s.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, durable.FileMode); err == nil {
			os.Remove(s.path)
			s.w = bufio.NewWriterSize(s.f, 256<<10)
			_, err = s.mem.WriteTo(s.w)
		}
	}
	if s.f == nil {
		s.mem.Write(b)
	} else if err == nil {
		_, err = s.w.Write(b)
	}
	if err != nil {
		return fmt.Errorf("spooling the manifest: %w", err)
	}
	s.n++
	s.size += int64(len(b))
	return nil
}

func (s *spool) reader() (io.Reader, error) {
	if s.f == nil {
		return bytes.NewReader(s.mem.Bytes()), nil
	}
	if err := s.w.Flush(); err != nil {
		return nil, fmt.Errorf("spooling the manifest: %w", err)
	}
	return io.NewSectionReader(s.f, 0, s.size), nil
}

func (s *spool) close() {
	if s.f != nil {
		s.f.Close()
		os.Remove(s.path) // if unlinking it failed before
	}
}

// writeManifest writes m with the spooled lists in place of its own: the
// bytes encoding the whole Manifest would give.
func writeManifest(aw *archive.Writer, m *Manifest, convs, files *spool) error {
	var whole, probs bytes.Buffer
	lists := *m
	lists.Conversations, lists.Files, lists.Problems = nil, nil, nil
	if err := newEncoder(&whole).Encode(&lists); err != nil {
		return fmt.Errorf("encode the manifest: %w", err)
	}
	if err := newEncoder(&probs).Encode(m.Problems); err != nil {
		return fmt.Errorf("encode the manifest: %w", err)
	}
	head, ok := bytes.CutSuffix(whole.Bytes(), []byte(`"conversations":null,"files":null,"problems":null}`+"\n"))
	if !ok {
		return errors.New("encode the manifest: conversations, files and problems are not its last members")
	}
	cr, err := convs.reader()
	if err != nil {
		return err
	}
	fr, err := files.reader()
	if err != nil {
		return err
	}
	head = append(head, `"conversations":[`...)
	mid := []byte(`],"files":[`)
	tail := append(append([]byte(`],"problems":`), bytes.TrimSuffix(probs.Bytes(), []byte{'\n'})...), "}\n"...)
	size := int64(len(head)+len(mid)+len(tail)) + convs.size + files.size
	r := io.MultiReader(bytes.NewReader(head), cr, bytes.NewReader(mid), fr, bytes.NewReader(tail))
	if _, err := aw.WriteEntry(archive.ManifestName, archive.Text, size, r); err != nil {
		return fmt.Errorf("archive the manifest: %w", err)
	}
	return nil
}
