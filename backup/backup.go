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
// Verify checks an archive as a restore would: every checksum, every log
// read as strictly as at backup time, and an index rebuilt in a temporary
// directory compared with the manifest. Restore verifies first, then puts
// the store (or one conversation and its fork ancestors) in place.
//
// Library code takes its streams, clock and temporary directory from the
// caller; it never writes to os.Stdout.
package backup

import (
	"bufio"
	"bytes"
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
	// Now is the clock (default time.Now): the manifest's createdAt, every
	// entry's modification time and ToDir's archive name.
	Now func() time.Time
	// ToolVersion is recorded in the manifest.
	ToolVersion string
	// TempDir holds the metadata.db snapshot while it is archived (default
	// os.TempDir(); ToDir uses the destination directory).
	TempDir string
	// Workers read and check logs, and compress frames, in parallel
	// (default GOMAXPROCS, at most archive.MaxWorkers).
	Workers int
	// Progress counts files archived; the total is set first.
	Progress progress.Progress
	// OnEvent receives each file left out, each log invalid and each entry
	// archived out of shape, as found (nil: nothing).
	OnEvent func(store.Item)
	// Strict reads every event of every session log as reindex does, so
	// invalid logs are found at backup time, at the CPU cost of compressing
	// the store again; without it session logs are checked by structure.
	Strict bool
	// Rsyncable lays the archive out for a deduplicating copier (restic,
	// borg, kopia; archive.WriterOptions.Rsyncable) and makes it
	// reproducible: the manifest's createdAt is the newest modification
	// time of what is archived, not the time of the backup, so two
	// backups of an unchanged store are the same bytes.
	Rsyncable bool
	// NoIndex leaves metadata.db out (IndexLeftOut): restore rebuilds it,
	// and in a deduplicating repository its pages are most of what each
	// backup adds.
	NoIndex bool
	// Archive tunes the container (tests and benchmarks).
	Archive archive.WriterOptions

	// spoolMemory is how much of each manifest list is held in memory
	// before it goes to its spool file (default defaultSpoolMemory).
	spoolMemory int
	// snapshotPath, when set, is where the metadata.db snapshot is made
	// (ToDir: beside its temporary archive, so a killed run's leftovers
	// are recognised).
	snapshotPath string
}

func (o *Options) defaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
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
	// Manifest is the archive's manifest without its lists of
	// conversations and files, which were streamed into the archive (read
	// them back with ReadManifest): its header, counts and problems.
	Manifest *Manifest
	// Invalid are the logs archived whole because their check failed
	// (entry name and error), in archive order.
	Invalid []store.Item
	// Vanished are logs deleted between the walk and their reading
	// (conversations deleted by the runtime during an online backup).
	Vanished []string
	// TarBytes is the size of the archive's tar stream; Bytes what was
	// written.
	TarBytes int64
	Bytes    int64
}

// Partial reports whether anything of the store is missing from the
// archive or failed the strict read: the caller's exit 3.
func (r *Result) Partial() bool {
	return len(r.Manifest.Problems) > 0 || r.Manifest.Counts.InvalidLogs > 0
}

// ErrNoStore reports a data directory that is not a store.
var ErrNoStore = store.ErrNoStore

// Write streams a backup of the store s to w. s is opened with
// store.LockIfFree: holding runtime.lock, every log is copied whole; without
// it (the runtime holds it, or it could not be taken) the backup is online
// and copies each log's committed prefix, and the manifest says so. Files
// that cannot be read are left out and listed in the manifest's Problems;
// logs that fail the strict read are archived whole with their error:
// neither stops the backup (see Result.Partial). Write fails only when the
// archive cannot be written or the store cannot be walked.
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

	// The metadata.db snapshot is taken while the logs are read (VACUUM
	// INTO reads the database in one transaction of its own) and archived
	// after them. The index is derived: a restore rebuilds it from the logs.
	type snapResult struct {
		path, method string
		mtime        time.Time
		err          error
	}
	snapDone := make(chan snapResult, 1)
	go func() {
		if opts.NoIndex {
			snapDone <- snapResult{}
			return
		}
		// The index's modification time before the snapshot: a write
		// meanwhile makes it older than what the snapshot holds, never
		// newer.
		var mtime time.Time
		if fi, err := os.Lstat(s.IndexPath()); err == nil {
			mtime = fi.ModTime()
		}
		p, method, err := snapshotIndex(ctx, s.IndexPath(), opts.TempDir, opts.snapshotPath, !m.Online)
		snapDone <- snapResult{p, method, mtime, err}
	}()
	var snap *snapResult
	waitSnap := func() snapResult {
		if snap == nil {
			r := <-snapDone
			snap = &r
		}
		return *snap
	}
	defer func() {
		if r := waitSnap(); r.path != "" && r.method == IndexByVacuum {
			os.Remove(r.path)
		}
	}()

	// The store's walk, up front: the logs to archive (every generation),
	// and the total of the progress (each log, the index, the manifest).
	sw, err := walkStore(s, opts.Rsyncable)
	if err != nil {
		return nil, err
	}
	opts.Progress.SetTotal(int64(sw.logs) + 2)

	wopts := opts.Archive
	wopts.ModTime = now
	wopts.Rsyncable = wopts.Rsyncable || opts.Rsyncable
	// The newest modification time archived: an rsyncable archive's
	// createdAt.
	var newest time.Time
	seen := func(t time.Time) {
		if t.After(newest) {
			newest = t
		}
	}
	if wopts.Workers == 0 {
		wopts.Workers = opts.Workers
	}
	aw := archive.NewWriter(w, wopts)
	fail := func(err error) (*Result, error) {
		aw.Abort()
		return nil, err
	}

	// The manifest's conversations and files are spooled as they come
	// (see writeManifest), so memory does not grow with the store.
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
				res.Invalid = append(res.Invalid, store.Item{Kind: store.ItemInvalid, Path: f.Name, Reason: f.Log.Error})
			}
		}
		return fileSpool.add(f)
	}

	// Conversations in archive order, as their first archived log comes;
	// one with nothing archived (emptied by a delete, or every log
	// unreadable) is not in the archive. Logs come conversation by
	// conversation: each is finished (its expectation, with strict) when
	// the next one begins.
	var (
		cur       *Conversation
		curIdx    = -1
		curFacts  *convFacts
		curFiles  []File
		curSeen   = map[string]bool{} // bases whose current generation is archived
		expect    Counts
		conversed int
	)
	flush := func() error {
		if cur == nil {
			return nil
		}
		if opts.Strict {
			files := make([]*File, len(curFiles))
			for i := range curFiles {
				files[i] = &curFiles[i]
			}
			convs := []Conversation{*cur}
			c := expectations(convs, map[int]*convFacts{0: curFacts}, map[int][]*File{0: files}, false)
			*cur = convs[0]
			expect.Indexed += c.Indexed
			expect.Skipped += c.Skipped
			expect.Deleting += c.Deleting
			expect.IndexedSessions += c.IndexedSessions
			expect.Events += c.Events
		}
		conversed++
		if err := convSpool.add(cur); err != nil {
			return err
		}
		for _, f := range curFiles {
			if err := addFile(f); err != nil {
				return err
			}
		}
		cur, curFacts, curFiles = nil, nil, curFiles[:0]
		clear(curSeen)
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
		if cur == nil || curIdx != j.convIdx {
			if err := flush(); err != nil {
				return err
			}
			cur, curIdx = &Conversation{ID: j.convID, Dir: j.convDir}, j.convIdx
		}
		if !curSeen[j.base] {
			curSeen[j.base] = true
			l.info.Current = true
			if j.convLog && l.info.Strict {
				fc := l.conv
				curFacts = &fc
			}
		}
		aw.SetModTime(l.mtime)
		seen(l.mtime)
		sum, err := l.archive(aw, j.name)
		if err != nil {
			return fmt.Errorf("archive %s: %w", j.path, err)
		}
		if l.info.Error != "" {
			m.Counts.InvalidLogs++
			opts.OnEvent(store.Item{Kind: store.ItemInvalid, Path: j.path, Reason: l.info.Error})
		}
		m.LiveTailBytes += l.liveTail
		info := l.info
		curFiles = append(curFiles, File{Name: j.name, Size: sum.Size, SHA256: sum.Hex(), Log: &info})
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return fail(err)
	}
	// Entries left out are problems; a second spelling of a generation is
	// archived all the same, with a warning.
	for _, p := range sw.problems {
		if p.Listed {
			opts.OnEvent(store.Item{Kind: store.ItemWarning, Path: p.Path, Reason: p.Reason})
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
		// The index's own time, not the snapshot's: an unchanged index
		// keeps its header.
		aw.SetModTime(sr.mtime)
		seen(sr.mtime)
		f, err := archiveFile(aw, archive.IndexName, sr.path)
		if err == nil {
			err = addFile(f)
		}
		if err != nil {
			return fail(fmt.Errorf("archive the metadata.db snapshot: %w", err))
		}
	}
	opts.Progress.Add(1)

	counted := m.Counts
	if opts.Strict {
		m.Counts = expect
	} else {
		m.Counts = Counts{}
	}
	m.Counts.InvalidLogs = counted.InvalidLogs
	m.Counts.Conversations = conversed
	m.Counts.Files, m.Counts.Bytes, m.Counts.Logs, m.Counts.SessionLogs = counted.Files, counted.Bytes, counted.Logs, counted.SessionLogs
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
	st := aw.Stats()
	res.TarBytes, res.Bytes = st.TarBytes, st.Bytes
	return res, nil
}

// archiveFile archives the file at p as name and returns its manifest
// entry. It never opens p through a symbolic link.
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

// snapshotIndex makes a consistent copy of metadata.db. It returns the
// path of the copy and how it was made, or "" when the store has no
// metadata.db.
//
// When nothing can write the index (quiescent, or a read-only file
// system) and no journal is pending, the file itself is consistent and is
// returned with IndexByCopy (the caller must not remove it); otherwise
// VACUUM INTO copies it in one read transaction into tmpDir (or path),
// which the runtime's WAL writes do not block, and the caller removes it.
func snapshotIndex(ctx context.Context, src, tmpDir, path string, quiescent bool) (string, string, error) {
	fi, err := os.Lstat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	if !fi.Mode().IsRegular() {
		return "", "", errors.New("not a regular file (symbolic links are not followed)")
	}
	if (quiescent || index.ReadOnlyFS(filepath.Dir(src))) && !pending(src+"-wal") && !pending(src+"-journal") {
		return src, IndexByCopy, nil
	}
	var tmp *os.File
	if path != "" {
		tmp, err = durable.CreateExcl(path)
	} else {
		tmp, err = durable.CreateTemp(tmpDir, ".convkit-index-snapshot")
	}
	if err != nil {
		return "", "", fmt.Errorf("snapshot of %s: %w", src, err)
	}
	dst := tmp.Name()
	tmp.Close() // VACUUM INTO writes into an existing empty file, keeping its 0600
	ok := false
	defer func() {
		if !ok {
			os.Remove(dst)
		}
	}()
	if err := index.VacuumInto(ctx, src, dst, index.ReadOptions{TempDir: tmpDir}); err != nil {
		return "", "", err
	}
	ok = true
	return dst, IndexByVacuum, nil
}

// pending reports whether a journal file holds something: anything but a
// missing or empty file (an unreadable one counts as pending).
func pending(p string) bool {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	return err != nil || fi.Size() > 0
}

// The manifest is written last but its conversation and file lists grow
// with the store, so they are spooled as JSON while the backup runs and
// joined at the end into exactly the bytes encoding the whole Manifest
// would give.

// spool is one list of the manifest, spooled: its elements' JSON, comma
// separated, held in memory up to memory bytes and beyond it in a file at
// path, removed as soon as it is made (where the system allows; else at
// close). A store of a few thousand files never writes one.
type spool struct {
	path    string
	memory  int
	mem     []byte
	f       *os.File
	w       *bufio.Writer
	buf     bytes.Buffer
	enc     *json.Encoder
	n, size int64
}

// defaultSpoolMemory is how much of one list is held in memory.
const defaultSpoolMemory = 1 << 20

// newSpool makes a spool that writes to path, which must not exist (a
// private file), once its list outgrows memory bytes (0: the default).
func newSpool(path string, memory int) *spool {
	if memory <= 0 {
		memory = defaultSpoolMemory
	}
	s := &spool{path: path, memory: memory}
	s.enc = json.NewEncoder(&s.buf)
	s.enc.SetEscapeHTML(false)
	return s
}

// add appends one element.
func (s *spool) add(v any) error {
	s.buf.Reset()
	if s.n > 0 {
		s.buf.WriteByte(',')
	}
	if err := s.enc.Encode(v); err != nil {
		return err
	}
	b := bytes.TrimSuffix(s.buf.Bytes(), []byte{'\n'})
	if s.f == nil && len(s.mem)+len(b) > s.memory {
		if err := s.toFile(); err != nil {
			return err
		}
	}
	if s.f == nil {
		s.mem = append(s.mem, b...)
	} else if _, err := s.w.Write(b); err != nil {
		return fmt.Errorf("spooling the manifest: %w", err)
	}
	s.n++
	s.size += int64(len(b))
	return nil
}

// toFile moves the list to the spool's file.
func (s *spool) toFile() error {
	f, err := os.OpenFile(s.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, durable.FileMode)
	if err != nil {
		return fmt.Errorf("spooling the manifest: %w", err)
	}
	if os.Remove(s.path) == nil {
		s.path = ""
	}
	s.f, s.w = f, bufio.NewWriterSize(f, 256<<10)
	if _, err := s.w.Write(s.mem); err != nil {
		return fmt.Errorf("spooling the manifest: %w", err)
	}
	s.mem = nil
	return nil
}

// reader is the spooled elements.
func (s *spool) reader() (io.Reader, error) {
	if s.f == nil {
		return bytes.NewReader(s.mem), nil
	}
	if err := s.w.Flush(); err != nil {
		return nil, fmt.Errorf("spooling the manifest: %w", err)
	}
	return io.NewSectionReader(s.f, 0, s.size), nil
}

func (s *spool) close() {
	if s.f == nil {
		return
	}
	s.f.Close()
	if s.path != "" {
		os.Remove(s.path)
	}
}

// writeManifest writes m as the archive's manifest entry, with the
// conversations and files spooled in place of its own (empty) lists.
func writeManifest(aw *archive.Writer, m *Manifest, convs, files *spool) error {
	encode := func(v any) ([]byte, error) {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return nil, fmt.Errorf("encode the manifest: %w", err)
		}
		return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
	}
	lists := *m
	lists.Conversations, lists.Files = []Conversation{}, []File{}
	whole, err := encode(&lists)
	if err != nil {
		return err
	}
	probs, err := encode(m.Problems)
	if err != nil {
		return err
	}
	// The lists are the manifest's last members: what follows the header
	// and counts is exactly this.
	tail := append([]byte(`"conversations":[],"files":[],"problems":`), probs...)
	tail = append(tail, '}')
	if !bytes.HasSuffix(whole, tail) {
		return errors.New("encode the manifest: conversations, files and problems are not its last members")
	}
	head := whole[:len(whole)-len(tail)]
	cr, err := convs.reader()
	if err != nil {
		return err
	}
	fr, err := files.reader()
	if err != nil {
		return err
	}
	parts := []io.Reader{bytes.NewReader(head), bytes.NewReader([]byte(`"conversations":[`)), cr,
		bytes.NewReader([]byte(`],"files":[`)), fr, bytes.NewReader([]byte(`],"problems":`)), bytes.NewReader(probs),
		bytes.NewReader([]byte("}\n"))}
	size := int64(len(head)+len(`"conversations":[`)+len(`],"files":[`)+len(`],"problems":`)+len(probs)+2) + convs.size + files.size
	if _, err := aw.WriteEntry(archive.ManifestName, archive.Text, size, io.MultiReader(parts...)); err != nil {
		return fmt.Errorf("archive the manifest: %w", err)
	}
	return nil
}
