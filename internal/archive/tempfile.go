package archive

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/convkit/convkit/internal/durable"
)

// TempFile is the file an archive is written to before publication, .<final
// name>.<16 hex>.tmp beside it (durable.CreateTemp), flock'ed by its writer so
// that SweepTemps removes the files of killed writers and never one being
// written.
type TempFile struct {
	*os.File
	// lock holds the flock on a descriptor of its own, so that it outlives
	// the close that durable.Publish does before it links the file.
	lock *os.File
}

// CreateTemp creates and locks a new temporary file for the archive to be
// published at final.
func CreateTemp(final string) (*TempFile, error) {
	f, err := durable.CreateTemp(filepath.Dir(final), "."+filepath.Base(final))
	if err != nil {
		return nil, err
	}
	t := &TempFile{File: f}
	if err := t.lockIt(); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return t, nil
}

func (t *TempFile) lockIt() error {
	l, err := lockOwn(t.File)
	if err != nil {
		return err
	}
	t.lock = l
	return nil
}

// lockOwn flocks f, a file this process just created, through a
// descriptor of its own (so that the lock outlives a close of f), opened
// without following a link and checked to be f's file.
func lockOwn(f *os.File) (*os.File, error) {
	l, err := durable.OpenRegular(f.Name(), os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	a, aerr := f.Stat()
	b, berr := l.Stat()
	if aerr != nil || berr != nil || !os.SameFile(a, b) {
		l.Close()
		return nil, fmt.Errorf("%s was replaced while it was created", f.Name())
	}
	ok, err := tryLock(l)
	switch {
	case errors.Is(err, errors.ErrUnsupported):
		// Unlocked: no sweep removes it (see lock_other.go).
	case err != nil:
		l.Close()
		return nil, err
	case !ok:
		l.Close()
		return nil, errors.New("locked by another process")
	}
	return l, nil
}

// LockTemp flocks f, a temporary file this process just created
// (durable.CreateTemp), as CreateTemp's files are locked while written:
// through a descriptor of its own, never through a link. Close the
// returned file to release the lock.
func LockTemp(f *os.File) (*os.File, error) {
	l, err := lockOwn(f)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return l, nil
}

// LockIfFree returns the temporary file at p held by this process when
// its lock was free (its writer is gone), else nil: a symbolic link, a
// FIFO or anything but a regular file is never opened through, nor waited
// on. Close it once the file is removed.
func LockIfFree(p string) *os.File { return lockFree(p) }

// Publish fsyncs the file, links it to final (never over an existing
// file), removes the temporary name and fsyncs the directory, as
// durable.Publish does; then it releases the lock. On any error the
// temporary file is removed.
func (t *TempFile) Publish(final string) error {
	err := durable.Publish(t.File, final)
	t.unlock()
	return err
}

// Discard closes and removes the temporary file, then releases its lock.
// It may follow Publish (it does nothing then).
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

// SweepTemps removes the temporary files CreateTemp made for final whose
// writers are gone (their lock is free). One being written, or whose lock
// cannot be tried, is left alone.
func SweepTemps(final string) []Swept {
	dir, base := filepath.Split(final)
	if dir == "" {
		dir = "."
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []Swept
	for _, e := range ents {
		if !e.Type().IsRegular() || !isTempOf(e.Name(), base) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if l := lockFree(p); l != nil {
			out = append(out, Swept{Path: p, Err: os.Remove(p)})
			l.Close()
		}
	}
	if len(out) > 0 {
		durable.SyncDir(dir)
	}
	return out
}

// isTempOf reports whether name is one durable.CreateTemp gives for base:
// .<base>.<16 hex>.tmp.
func isTempOf(name, base string) bool {
	rest, ok := strings.CutPrefix(name, "."+base+".")
	if !ok {
		return false
	}
	hexPart, ok := strings.CutSuffix(rest, durable.TempSuffix)
	if !ok || len(hexPart) != 16 {
		return false
	}
	for _, c := range hexPart {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
