package archive

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
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
	// Sync makes everything extracted durable, with one syncfs(2) on Linux
	// (an fsync of each file took a third of an import's time).
	Sync bool
	// Synced, with Sync, receives the sync's error from its own goroutine.
	Synced    chan<- error
	Progress  func(n int64) // bytes written
	SpaceName string        // names the file system in a refusal (default: dir)
	// OnFile is called with each file once written and closed, from several
	// goroutines in no order; data is its bytes when they were held whole.
	OnFile func(e Extracted, path string, data []byte)
}

// freeReserve is the free space an extraction leaves on its file system.
const freeReserve = 64 << 20

// space is an extraction's free-space budget, measured once: each entry's
// declared size, in whole blocks, is taken before it is written.
type space struct {
	dir          string // names the file system in a refusal
	avail, block int64  // avail: free space less freeReserve (may be < 0)
	need         int64
}

func newSpace(dir, name string) *space {
	free, block, ok := FreeSpace(dir)
	if !ok {
		return nil
	}
	return &space{dir: cmp.Or(name, dir), avail: free - freeReserve, block: max(block, 1)}
}

// take books an entry of size bytes, or says why it does not fit.
func (s *space) take(size int64) error {
	need := s.need + (size+s.block-1)/s.block*s.block
	if need > s.avail || need < s.need {
		return fmt.Errorf("refused: extracting the archive up to this entry needs %d bytes; %d free after the %d MiB reserve on the file system of %s",
			need, max(s.avail, 0), freeReserve>>20, s.dir)
	}
	s.need = need
	return nil
}

// Extracted is one entry Extract wrote.
type Extracted struct {
	Sum
	Name   string
	Offset int64 // of its header in the tar stream
}

// Extract writes every entry of the archive read from r under dir, an empty
// directory made for it (NewStaging): files created exclusively 0600 (a
// name seen twice is refused), directories 0700. Each header's declared
// size must fit in the free space less freeReserve, so a decompression
// bomb cannot fill the disk. Small entries are written by extractWriters
// goroutines, since creating files took most of an extraction. It stops at
// the first problem, leaving what it wrote for the caller to remove, and
// returns the entries in archive order, for the caller to Close.
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
	x := &extractor{dir: dir, opts: opts, made: map[string]bool{}, queued: map[string]struct{}{}, buf: make([]byte, 256<<10), failedAt: -1}
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
	// A writer's problem comes before the reading's in archive order.
	if x.failedAt >= 0 {
		err = x.failedErr
	}
	switch {
	case err != nil:
		return nil, err
	case opts.Sync && opts.Synced != nil:
		go func() { opts.Synced <- x.sync() }()
	case opts.Sync:
		if err := x.sync(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Entries of at most keepEntry bytes are read whole for the writers: at
// most (2 × extractWriters + 1) × keepEntry bytes are held.
const (
	extractWriters = 4
	keepEntry      = 1 << 20
)

type writeJob struct {
	i    int    // index in the archive
	rel  string // path relative to dir
	e    Extracted
	data []byte
}

// extract reads the entries into out, writing the larger ones itself; it
// stops early, without a problem, when a writer failed.
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
		// A queued file is not there yet to be found twice.
		x.mu.Lock()
		_, queued := x.queued[h.Name]
		x.mu.Unlock()
		if queued {
			return ar.errorf(h, true, nil, "refused: duplicate name")
		}
		e, rel, p := Extracted{Name: h.Name, Offset: h.Offset}, filepath.FromSlash(h.Name), ""
		var mem *bytes.Buffer
		if h.Size <= keepEntry {
			// Only the archive (an *Error) or ctx can fail it.
			mem = bytes.NewBuffer(make([]byte, 0, h.Size))
			err = x.copyEntry(ctx, ar, &e, mem)
		} else {
			p, err = x.fill(rel, h.Index, e, func(f *os.File) error { return x.copyEntry(ctx, ar, &e, f) })
		}
		if err != nil {
			return err
		}
		if mem != nil {
			x.mu.Lock()
			x.queued[h.Name] = struct{}{}
			x.mu.Unlock()
			jobs <- writeJob{i: out.Len(), rel: rel, e: e, data: mem.Bytes()}
		}
		if err := out.add(e); err != nil {
			return err
		}
		if mem == nil && x.opts.OnFile != nil {
			x.opts.OnFile(e, p, nil)
		}
	}
	return nil
}

// fail records a writer's problem with entry i, keeping the first.
func (x *extractor) fail(i int, err error) {
	x.mu.Lock()
	if x.failedAt < 0 || i < x.failedAt {
		x.failedAt, x.failedErr = i, err
	}
	x.mu.Unlock()
	x.failed.Store(true)
}

func (x *extractor) copyEntry(ctx context.Context, ar *Reader, e *Extracted, w io.Writer) error {
	hs := sha256.New()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		n, rerr := ar.Read(x.buf)
		if n > 0 {
			if _, err := w.Write(x.buf[:n]); err != nil {
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

// write writes a job's file for OnFile; after a writer's problem the jobs
// left are dropped.
func (x *extractor) write(j writeJob) {
	if x.failed.Load() {
		return
	}
	p, err := x.fill(j.rel, j.i+1, j.e, func(f *os.File) error {
		_, err := f.Write(j.data)
		return err
	})
	if err != nil {
		x.fail(j.i, err)
		return
	}
	if x.opts.OnFile != nil {
		x.opts.OnFile(j.e, p, j.data)
	}
}

// fill creates the file of entry e at rel under dir, writes it with put,
// fsyncs it when the extraction syncs file by file, and returns its path.
func (x *extractor) fill(rel string, index int, e Extracted, put func(*os.File) error) (string, error) {
	if err := x.mkdirs(filepath.Dir(rel)); err != nil {
		return "", fmt.Errorf("%s: %w", e.Name, err)
	}
	p := filepath.Join(x.dir, rel)
	f, err := x.create(p, index, e)
	x.mu.Lock()
	delete(x.queued, e.Name) // created, or found twice
	x.mu.Unlock()
	if err != nil {
		return p, err
	}
	err = f.Chmod(FileMode)
	if err == nil {
		err = put(f)
	}
	if err == nil && x.opts.Sync && !haveSyncFS {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	var ae *Error
	if err != nil && !errors.As(err, &ae) && !errors.Is(err, context.Canceled) {
		err = fmt.Errorf("%s: %w", p, err)
	}
	return p, err
}

// sync makes the extraction durable: one syncfs, else the directories.
func (x *extractor) sync() error {
	ok, err := syncFS(x.dir)
	if !ok {
		err = x.syncDirs()
	}
	if err != nil {
		return fmt.Errorf("%s: making the extraction durable: %w", x.dir, err)
	}
	return nil
}

type extractor struct {
	dir  string
	opts ExtractOptions
	buf  []byte // the reading goroutine's
	// failed: a writer failed; failedAt is the first entry that did.
	failed    atomic.Bool
	mu        sync.Mutex
	made      map[string]bool     // relative directories made
	queued    map[string]struct{} // names of files the writers have yet to create
	failedAt  int
	failedErr error
}

// madeDirs bounds the directories remembered; one forgotten is checked again.
const madeDirs = 4096

// mkdirs creates the directory rel and its parents inside dir, 0700; two
// writers may both make one, as Mkdir and PrivateDir allow.
func (x *extractor) mkdirs(rel string) error {
	x.mu.Lock()
	made := rel == "." || x.made[rel]
	x.mu.Unlock()
	if made {
		return nil
	}
	if err := x.mkdirs(filepath.Dir(rel)); err != nil {
		return err
	}
	p := filepath.Join(x.dir, rel)
	if err := os.Mkdir(p, durable.DirMode); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	// PrivateDir refuses a link, or an entry's file of that name.
	if err := durable.PrivateDir(p); err != nil {
		return err
	}
	x.mu.Lock()
	if len(x.made) >= madeDirs {
		clear(x.made)
	}
	x.made[rel] = true
	x.mu.Unlock()
	return nil
}

// create creates the file at p exclusively: one there is a duplicate.
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

// syncDirs fsyncs every directory of the tree, deepest first.
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
