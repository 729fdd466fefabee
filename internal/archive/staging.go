package archive

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/convkit/convkit/internal/durable"
)

// Staging is a private directory where an archive is extracted and checked
// before anything reaches its destination:
//
//	<dir>/<name>-<12 hex>.lock.tmp   the lock: flock'ed by its process while the staging lives
//	<dir>/<name>-<12 hex>.tmp/       0700
//	└── tree/                        0700, where the archive is extracted (Tree)
//
// It is made on the destination's file system so its tree moves into place
// by rename. The kernel drops the flock when its holder dies, so
// SweepStaging removes a staging whose lock is free, never one in use; the
// lock file outlives its directory at both ends.
type Staging struct {
	dir, tree, lockPath string
	lock                *os.File
}

const (
	StagingSuffix = durable.TempSuffix
	// UnlockedStagingAge is how old a staging without a lock file (an
	// earlier build's) must be to count as a killed process's.
	UnlockedStagingAge = time.Hour

	stagingLockSuffix = ".lock" + durable.TempSuffix
	stagingTreeName   = "tree"
	// Earlier builds' locks: <staging>.lock (restore), <staging>/.lock (import).
	besideLockExt = ".lock"
	innerLockName = ".lock"
)

// errNameTaken: a sweep took the new file first (NewStaging draws another name).
var errNameTaken = errors.New("taken by a sweep")

// NewStaging makes a locked staging directory dir/<name>-<random>.tmp with
// an empty tree.
func NewStaging(dir, name string) (*Staging, error) {
	for range 100 {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		base := filepath.Join(dir, name+"-"+hex.EncodeToString(b[:]))
		s := &Staging{dir: base + StagingSuffix, tree: filepath.Join(base+StagingSuffix, stagingTreeName), lockPath: base + stagingLockSuffix}
		// A name a sweep took first is given up to it.
		f, err := durable.CreateExcl(s.lockPath)
		if err == nil {
			s.lock, err = lockNew(f)
			f.Close()
			if err == nil {
				err = s.makeDirs()
			} else if !errors.Is(err, errNameTaken) {
				os.Remove(s.lockPath)
				err = fmt.Errorf("lock %s: %w", s.lockPath, err)
			}
		}
		if errors.Is(err, errNameTaken) || errors.Is(err, os.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("staging directory %s: %w", s.dir, err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("%s: could not make a staging directory", dir)
}

// lockNew locks the file f just created through a descriptor of its own,
// which outlives f's close: errNameTaken when a sweep locked or removed it
// first. Where flock is unsupported it stays unlocked, and no sweep
// removes it (see lock_other.go).
func lockNew(f *os.File) (*os.File, error) {
	l, err := durable.OpenRegular(f.Name(), os.O_RDONLY)
	if errors.Is(err, os.ErrNotExist) {
		return nil, errNameTaken
	} else if err != nil {
		return nil, err
	}
	ok, err := tryLock(l)
	if errors.Is(err, errors.ErrUnsupported) {
		ok, err = true, nil
	}
	if fi, lerr := os.Lstat(f.Name()); err == nil && (!ok || lerr != nil || !sameFile(f, fi) || !sameFile(l, fi)) {
		err = errNameTaken
	}
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (s *Staging) makeDirs() error {
	if err := os.Mkdir(s.dir, durable.DirMode); err != nil {
		// Not ours: the lock goes, the directory stays.
		os.Remove(s.lockPath)
		s.lock.Close()
		s.lock = nil
		if errors.Is(err, os.ErrExist) {
			return errNameTaken
		}
		return err
	}
	err := durable.PrivateDir(s.dir)
	if err == nil {
		err = durable.MkdirAll(s.tree)
	}
	if err != nil {
		s.Remove()
	}
	return err
}

func sameFile(f *os.File, fi os.FileInfo) bool {
	ffi, err := f.Stat()
	return err == nil && os.SameFile(ffi, fi)
}

// Dir is the staging directory; what the caller puts there goes with it.
func (s *Staging) Dir() string { return s.dir }

// Tree is where the archive is extracted.
func (s *Staging) Tree() string { return s.tree }

// Remove removes the staging directory, then its lock file (kept while the
// directory stays, for a later sweep).
func (s *Staging) Remove() error {
	err := os.RemoveAll(s.dir)
	if s.lock != nil {
		if err == nil {
			os.Remove(s.lockPath)
		}
		s.lock.Close()
		s.lock = nil
	}
	return err
}

// Swept is a killed process's leftover a sweep removed, or failed to (Err).
type Swept struct {
	Path string
	Err  error
}

// SweepStaging removes the stagings dir/<name>-*.tmp of killed processes
// (earlier builds' layouts too): those whose lock is free, free lock files
// alone, and those without a lock file once unlockedAge old; never own.
func SweepStaging(dir, name string, own *Staging, unlockedAge time.Duration) []Swept {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	present := make(map[string]bool, len(ents))
	for _, e := range ents {
		present[e.Name()] = true
	}
	var out []Swept
	for _, e := range ents {
		n := e.Name()
		p := filepath.Join(dir, n)
		if own != nil && (p == own.dir || p == own.lockPath) {
			continue
		}
		if e.Type().IsRegular() { // a lock file alone: removed when free
			stage := ""
			if base, ok := strings.CutSuffix(n, stagingLockSuffix); ok {
				stage = base + StagingSuffix
			} else if base, ok := strings.CutSuffix(n, besideLockExt); ok {
				stage = base
			}
			if stage != "" && isStaging(stage, name) && !present[stage] {
				if st, l := probeLock(p); st == lockFreed {
					out = append(out, Swept{Path: p, Err: os.Remove(p)})
					l.Close()
				}
			}
			continue
		}
		if !e.IsDir() || !isStaging(n, name) {
			continue
		}
		st, l, beside := lockMissing, (*os.File)(nil), ""
		for _, c := range []string{strings.TrimSuffix(p, StagingSuffix) + stagingLockSuffix, p + besideLockExt, filepath.Join(p, innerLockName)} {
			if st, l = probeLock(c); st != lockMissing {
				if filepath.Dir(c) == dir {
					beside = c
				}
				break
			}
		}
		if st == lockHeld {
			continue
		}
		if l == nil {
			if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < unlockedAge {
				continue
			}
		}
		err := os.RemoveAll(p)
		if err == nil && beside != "" {
			err = os.Remove(beside)
		}
		if l != nil {
			l.Close()
		}
		out = append(out, Swept{Path: p, Err: err})
	}
	return out
}

func isStaging(n, name string) bool {
	rest, ok := strings.CutPrefix(n, name+"-")
	return ok && len(rest) > len(StagingSuffix) && strings.HasSuffix(rest, StagingSuffix) && !strings.HasSuffix(rest, stagingLockSuffix)
}

type lockState int

const (
	lockMissing lockState = iota // no lock file, or one that is not a regular file
	lockHeld                     // held by a live process, or cannot be tried
	lockFreed                    // free: now held by this process
)

// probeLock tries the lock file at p, returned held when it was free.
func probeLock(p string) (lockState, *os.File) {
	f, err := durable.OpenRegular(p, os.O_RDONLY)
	switch {
	case errors.Is(err, os.ErrNotExist), errors.Is(err, durable.ErrSymlink), errors.Is(err, durable.ErrNotRegular):
		return lockMissing, nil
	case err != nil:
		return lockHeld, nil
	}
	if ok, err := tryLock(f); err != nil || !ok {
		f.Close()
		return lockHeld, nil
	}
	return lockFreed, f
}

// TempFile is where a file is written before publication, .<final
// name>.<16 hex>.tmp beside it, flock'ed so that SweepTemps removes killed
// writers' files and never one being written.
type TempFile struct {
	*os.File
	lock *os.File // outlives the close before durable.Publish links the file
}

// CreateTemp creates a TempFile for final, flock'ed through a descriptor of
// its own, never through a link.
func CreateTemp(final string) (*TempFile, error) {
	f, err := durable.CreateTemp(filepath.Dir(final), "."+filepath.Base(final))
	if err != nil {
		return nil, err
	}
	l, err := lockNew(f)
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return &TempFile{File: f, lock: l}, nil
}

// Publish is durable.Publish, then it releases the lock.
func (t *TempFile) Publish(final string) error {
	err := durable.Publish(t.File, final)
	t.unlock()
	return err
}

// Discard removes the temporary file unless it was published.
func (t *TempFile) Discard() {
	if t.lock == nil {
		return
	}
	t.File.Close()
	os.Remove(t.Name())
	t.unlock()
}

func (t *TempFile) unlock() {
	if t.lock != nil {
		t.lock.Close()
		t.lock = nil
	}
}

// SweepTemps removes dir's unlocked TempFiles of the final names isFinal
// accepts.
func SweepTemps(dir string, isFinal func(string) bool) []Swept {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []Swept
	for _, e := range ents {
		if final, ok := TempOf(e.Name()); !ok || !isFinal(final) || !e.Type().IsRegular() {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if st, l := probeLock(p); st == lockFreed {
			out = append(out, Swept{Path: p, Err: os.Remove(p)})
			l.Close()
		}
	}
	if len(out) > 0 {
		durable.SyncDir(dir)
	}
	return out
}

// TempOf is the final name of a CreateTemp file, named .<final>.<16 hex>.tmp.
func TempOf(name string) (string, bool) {
	rest, ok := strings.CutSuffix(name, durable.TempSuffix)
	if !ok || len(rest) < 18 || rest[0] != '.' || rest[len(rest)-17] != '.' {
		return "", false
	}
	for _, c := range rest[len(rest)-16:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", false
		}
	}
	return rest[1 : len(rest)-17], true
}
