package archive

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/convkit/convkit/internal/durable"
)

// ExtractOptions configure Extract.
type ExtractOptions struct {
	ReaderOptions
	// Sync makes everything extracted durable before Extract returns, with one
	// syncfs(2) on Linux (an fsync of each file took a third of an import's
	// time) and an fsync of each elsewhere; a throwaway extraction (verify)
	// skips it.
	Sync bool
	// Synced, with Sync, lets the caller go on while the last step (the syncfs
	// or the directory fsyncs) runs on its own goroutine, which sends
	// Extract's error or nil on Synced; nothing is durable before that is
	// received.
	Synced chan<- error
	// Progress, when set, is called with the bytes of each entry written.
	Progress func(n int64)
	// SpaceName names the file system in a refusal for lack of free space,
	// by a directory the user knows (the data directory, the restore
	// target): dir itself is a temporary name (default: dir).
	SpaceName string
	// OnFile, when set, is called with each file once written whole and
	// closed, so a caller may read it while the extraction goes on; it is
	// called from several writer goroutines in no order, and blocking it holds
	// the extraction back. data is the file's bytes when the extraction held
	// them whole (up to a megabyte), else nil.
	OnFile func(e Extracted, path string, data []byte)
}

// FreeReserve is the free space an extraction leaves on the file system
// it writes to: Extract refuses, at its header, an entry that would take
// the entries' total beyond the free space less this reserve.
const FreeReserve = 64 << 20

// space is the free-space budget of one extraction, measured once before
// the first entry: each entry's declared size, rounded up to whole file
// system blocks, is taken from it before a byte of the entry is written.
type space struct {
	dir          string // names the file system in a refusal
	avail, block int64  // avail: free space less FreeReserve (may be < 0)
	need         int64
}

func newSpace(dir, name string) *space {
	free, block, ok := freeSpace(dir)
	if !ok {
		return nil
	}
	if name == "" {
		name = dir
	}
	return &space{dir: name, avail: free - FreeReserve, block: max(block, 1)}
}

// take books an entry of size bytes, or says why it does not fit.
func (s *space) take(size int64) error {
	blocks := size / s.block
	if size%s.block != 0 {
		blocks++
	}
	need := s.need + blocks*s.block
	if need > s.avail || need < s.need {
		return fmt.Errorf("refused: extracting the archive up to this entry needs %d bytes; %d free after the %d MiB reserve on the file system of %s",
			need, max(s.avail, 0), FreeReserve>>20, s.dir)
	}
	s.need = need
	return nil
}

// Extracted is one entry Extract wrote.
type Extracted struct {
	Name   string
	Size   int64
	SHA256 [sha256.Size]byte
	// Offset is the byte offset of the entry's header in the tar stream.
	Offset int64
}

// Hex is the SHA-256 in lower-case hex.
func (e Extracted) Hex() string { return hex.EncodeToString(e.SHA256[:]) }

// Extract reads the archive from r and writes every entry under dir, an
// existing empty directory the caller made for it (NewStaging): files created
// exclusively with mode 0600 (so a name seen twice is refused as the
// second is created), directories 0700. It returns the entries in
// archive order with their sizes and SHA-256, for the caller to Close.
//
// The entries' declared sizes must fit in the free space of dir's file system
// less FreeReserve, checked at each header before its bytes are written, so a
// decompression bomb cannot fill the disk. Small entries are written by
// extractWriters goroutines, since creating files took most of an extraction.
// Extract stops at the first problem; what it wrote stays in dir for the
// caller to remove.
func Extract(ctx context.Context, r io.Reader, dir string, opts ExtractOptions) (_ *ExtractedList, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	if len(ents) > 0 {
		return nil, fmt.Errorf("extract into %s: the directory is not empty", dir)
	}
	ar, err := NewReader(r, opts.ReaderOptions)
	if err != nil {
		return nil, err
	}
	defer ar.Close()
	x := &extractor{dir: dir, opts: opts, made: map[string]*madeDir{}, queued: map[string]struct{}{}, buf: make([]byte, 256<<10), failedAt: -1}
	free := newSpace(dir, opts.SpaceName)
	jobs := make(chan writeJob, extractWriters)
	var wg sync.WaitGroup
	for range extractWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				x.write(j)
			}
		}()
	}
	out := newExtractedList(dir)
	defer func() {
		if err != nil {
			out.Close()
		}
	}()
	err = x.extract(ctx, ar, free, jobs, out)
	close(jobs)
	wg.Wait()
	// The first problem in archive order: a writer's (its entry comes
	// before any the reading stopped at), or the reading's.
	if x.failedAt >= 0 {
		return nil, x.failedErr
	}
	if err != nil {
		return nil, err
	}
	if opts.Sync {
		sync := func() error {
			if err := x.sync(); err != nil {
				return fmt.Errorf("%s: making the extraction durable: %w", dir, err)
			}
			return nil
		}
		if opts.Synced != nil {
			go func() { opts.Synced <- sync() }()
			return out, nil
		}
		if err := sync(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Bounds of the parallel writes of an extraction: entries of at most
// keepEntry bytes are read whole and handed to extractWriters goroutines,
// through a queue as long; so at most (2 × extractWriters + 1) ×
// keepEntry bytes are held.
const (
	extractWriters = 4
	keepEntry      = 1 << 20
)

// writeJob is one entry read whole, for a writer: its index in the
// archive's entries, its path relative to dir, what it is and its bytes.
type writeJob struct {
	i    int
	rel  string
	e    Extracted
	data []byte
}

// extract reads the entries in order into out, writing the larger ones
// itself and handing the others to the writers. It returns the reading's
// problem; it stops early, without one, when a writer failed.
func (x *extractor) extract(ctx context.Context, ar *Reader, free *space, jobs chan<- writeJob, out *ExtractedList) error {
	for !x.failed.Load() {
		if err := ctx.Err(); err != nil {
			return err
		}
		h, err := ar.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if free != nil {
			if err := free.take(h.Size); err != nil {
				return ar.errorf(h, true, nil, "%v", err)
			}
		}
		// A name whose file a writer has yet to create is not there to be
		// found twice.
		x.mu.Lock()
		_, queued := x.queued[h.Name]
		x.mu.Unlock()
		if queued {
			return ar.errorf(h, true, nil, "refused: duplicate name")
		}
		if h.Size <= keepEntry {
			e, data, err := x.read(ctx, ar, h)
			if err != nil {
				return err
			}
			x.mu.Lock()
			x.queued[h.Name] = struct{}{}
			x.mu.Unlock()
			jobs <- writeJob{i: out.Len(), rel: filepath.FromSlash(h.Name), e: e, data: data}
			if err := out.add(e); err != nil {
				return err
			}
			continue
		}
		e, err := x.file(ctx, ar, h)
		if err != nil {
			return err
		}
		if err := out.add(e); err != nil {
			return err
		}
		if x.opts.OnFile != nil {
			x.opts.OnFile(e, filepath.Join(x.dir, filepath.FromSlash(h.Name)), nil)
		}
	}
	return nil
}

// fail records a writer's problem with entry i; the first in archive
// order is kept.
func (x *extractor) fail(i int, err error) {
	x.mu.Lock()
	if x.failedAt < 0 || i < x.failedAt {
		x.failedAt, x.failedErr = i, err
	}
	x.mu.Unlock()
	x.failed.Store(true)
}

// read reads the entry h whole, as file copies it: its bytes, its size and
// SHA-256.
func (x *extractor) read(ctx context.Context, ar *Reader, h *Header) (Extracted, []byte, error) {
	e := Extracted{Name: h.Name, Offset: h.Offset}
	mem := make([]byte, 0, h.Size)
	err := x.copyEntry(ctx, ar, &e, func(b []byte) error {
		mem = append(mem, b...)
		return nil
	})
	if err != nil {
		var ae *Error
		if errors.As(err, &ae) || ctx.Err() != nil {
			return e, nil, err
		}
		return e, nil, fmt.Errorf("%s: %w", filepath.Join(x.dir, filepath.FromSlash(h.Name)), err)
	}
	return e, mem, nil
}

// copyEntry reads the current entry to its end, handing each piece to
// put, and records its size and SHA-256 in e.
func (x *extractor) copyEntry(ctx context.Context, ar *Reader, e *Extracted, put func([]byte) error) error {
	hs := sha256.New()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, rerr := ar.Read(x.buf)
		if n > 0 {
			if err := put(x.buf[:n]); err != nil {
				return err
			}
			hs.Write(x.buf[:n])
			e.Size += int64(n)
			if x.opts.Progress != nil {
				x.opts.Progress(int64(n))
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	hs.Sum(e.SHA256[:0])
	return nil
}

// write creates the file of a job and writes its bytes (a writer's part),
// then hands it to OnFile. After a writer's problem the jobs left are
// dropped: the extraction stops there.
func (x *extractor) write(j writeJob) {
	if x.failed.Load() {
		return
	}
	if err := x.mkdirs(filepath.Dir(j.rel)); err != nil {
		x.fail(j.i, fmt.Errorf("%s: %w", j.e.Name, err))
		return
	}
	p := filepath.Join(x.dir, j.rel)
	f, err := x.create(p, j.i+1, j.e)
	x.mu.Lock()
	delete(x.queued, j.e.Name)
	x.mu.Unlock()
	if err != nil {
		x.fail(j.i, err)
		return
	}
	err = f.Chmod(FileMode)
	if err == nil && len(j.data) > 0 {
		_, err = f.Write(j.data)
	}
	if err == nil && x.opts.Sync && !haveSyncFS {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		x.fail(j.i, fmt.Errorf("%s: %w", p, err))
		return
	}
	if x.opts.OnFile != nil {
		x.opts.OnFile(j.e, p, j.data)
	}
}

// sync makes the extraction durable: one syncfs where there is one, else
// the directories (the files were fsynced as they were written).
func (x *extractor) sync() error {
	if ok, err := syncFS(x.dir); ok {
		return err
	}
	return x.syncDirs()
}

type extractor struct {
	dir  string
	opts ExtractOptions
	buf  []byte // the reading goroutine's
	// failed is set once a writer failed: failedAt is the first entry in
	// archive order that failed, failedErr its problem.
	failed    atomic.Bool
	mu        sync.Mutex
	made      map[string]*madeDir // relative directories, created once
	queued    map[string]struct{} // names of files the writers have yet to create
	failedAt  int
	failedErr error
}

// madeDir is one directory of the extraction, made once by whichever
// goroutine needs it first; the others wait for it.
type madeDir struct {
	once sync.Once
	err  error
}

// madeDirs bounds the directories an extraction remembers as made: past
// it the memory starts afresh, and a directory made before is found there
// (EEXIST) and checked again.
const madeDirs = 4096

// mkdirs creates the directory rel (relative to dir) and its parents
// inside dir, 0700.
func (x *extractor) mkdirs(rel string) error {
	if rel == "." {
		return nil
	}
	x.mu.Lock()
	d := x.made[rel]
	if d == nil {
		if len(x.made) >= madeDirs {
			x.made = map[string]*madeDir{}
		}
		d = &madeDir{}
		x.made[rel] = d
	}
	x.mu.Unlock()
	d.once.Do(func() {
		if d.err = x.mkdirs(filepath.Dir(rel)); d.err != nil {
			return
		}
		p := filepath.Join(x.dir, rel)
		if d.err = os.Mkdir(p, durable.DirMode); d.err != nil && !errors.Is(d.err, fs.ErrExist) {
			return
		}
		// PrivateDir opens it without following a link: an entry's file
		// of that name is refused here.
		d.err = durable.PrivateDir(p)
	})
	return d.err
}

func (x *extractor) file(ctx context.Context, ar *Reader, h *Header) (Extracted, error) {
	rel := filepath.FromSlash(h.Name)
	if err := x.mkdirs(filepath.Dir(rel)); err != nil {
		return Extracted{}, fmt.Errorf("%s: %w", h.Name, err)
	}
	p := filepath.Join(x.dir, rel)
	e := Extracted{Name: h.Name, Offset: h.Offset}
	f, err := x.create(p, h.Index, e)
	if err != nil {
		return Extracted{}, err
	}
	err = func() error {
		if err := f.Chmod(FileMode); err != nil {
			return err
		}
		err := x.copyEntry(ctx, ar, &e, func(b []byte) error {
			_, err := f.Write(b)
			return err
		})
		if err != nil {
			return err
		}
		if x.opts.Sync && !haveSyncFS {
			return f.Sync()
		}
		return nil
	}()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		var ae *Error
		if errors.As(err, &ae) || errors.Is(err, context.Canceled) {
			return e, err
		}
		return e, fmt.Errorf("%s: %w", p, err)
	}
	return e, nil
}

// create creates the file at p of entry e, the index-th, exclusively: an
// earlier entry of the same name is there, and makes a duplicate.
func (x *extractor) create(p string, index int, e Extracted) (*os.File, error) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|durable.NoFollowFlags, FileMode) // O_EXCL never follows a link
	if err == nil {
		return f, nil
	}
	if fi, lerr := os.Lstat(p); errors.Is(err, fs.ErrExist) && lerr == nil && fi.Mode().IsRegular() {
		return nil, &Error{Archive: x.opts.Archive, Entry: index, Name: e.Name, Offset: e.Offset, Msg: "refused: duplicate name", Refused: true}
	}
	return nil, fmt.Errorf("%s: %w", e.Name, err)
}

// syncDirs fsyncs every directory of the tree, deepest first, and dir
// itself.
func (x *extractor) syncDirs() error {
	var dirs []string
	err := filepath.WalkDir(x.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := durable.SyncDir(dirs[i]); err != nil {
			return err
		}
	}
	return nil
}
