// Package durable publishes files so that a crash at any moment leaves either
// nothing or the complete file under its final name, never a partial one, and
// never overwrites an existing file. Every file it creates is 0600 and every
// directory 0700, whatever the process umask.
package durable

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Private permissions for everything the store holds.
const (
	FileMode os.FileMode = 0o600
	DirMode  os.FileMode = 0o700
)

// TempSuffix ends every temporary file's name, so walkers recognise
// leftovers of an interrupted write.
const TempSuffix = ".tmp"

// ErrExists is returned (wrapped) when the final name is already taken.
var ErrExists = os.ErrExist

// MkdirAll creates dir and any missing parents with mode 0700 (exactly, not
// filtered by the umask) and fsyncs each parent of a directory it created.
func MkdirAll(dir string) error {
	dir = filepath.Clean(dir)
	fi, err := os.Lstat(dir)
	if err == nil {
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link: %w; name the directory itself", dir, ErrSymlink)
		case !fi.IsDir():
			return fmt.Errorf("%s: exists and is not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAll(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, DirMode); err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil
		}
		return err
	}
	if err := PrivateDir(dir); err != nil {
		return err
	}
	return SyncDir(parent)
}

// SyncDir fsyncs a directory so that its entries survive a crash.
func SyncDir(dir string) error {
	// A link to a directory is followed: fsync writes nothing through it.
	d, err := os.OpenFile(dir, os.O_RDONLY|InputFlags|DirFlag, 0)
	if err != nil {
		return openError(dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// CreateTemp creates a new private file prefix.<16 hex>.tmp in dir.
func CreateTemp(dir, prefix string) (*os.File, error) {
	for range 100 {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, err
		}
		f, err := CreateExcl(filepath.Join(dir, prefix+"."+hex.EncodeToString(b[:])+TempSuffix))
		if !errors.Is(err, os.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("%s: could not create a unique temporary file", dir)
}

// Publish fsyncs and closes tmp, links it to final (never over a file:
// ErrExists), removes the temporary name and fsyncs the directory; on an
// error the temporary file is removed.
func Publish(tmp *os.File, final string) (err error) {
	tmpName := tmp.Name()
	defer func() {
		if err != nil {
			os.Remove(tmpName)
		}
	}()
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("fsync %s: %w", tmpName, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmpName, err)
	}
	if filepath.Dir(tmpName) != filepath.Dir(final) {
		return fmt.Errorf("publish %s: temporary file %s is in another directory", final, tmpName)
	}
	if err := os.Link(tmpName, final); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("publish %s: %w", final, ErrExists)
		}
		return fmt.Errorf("publish %s: %w", final, err)
	}
	if err := os.Remove(tmpName); err != nil {
		return fmt.Errorf("remove %s: %w", tmpName, err)
	}
	return SyncDir(filepath.Dir(final))
}

// WriteFile publishes data under name without overwriting, durably.
func WriteFile(name string, data []byte) error {
	tmp, err := CreateTemp(filepath.Dir(name), "."+filepath.Base(name))
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	return Publish(tmp, name)
}

// IsTemp reports whether name is a CreateTemp file's.
func IsTemp(name string) bool {
	return strings.HasSuffix(name, TempSuffix)
}

// Writeback writes to a file and starts the writeback of each range of
// every bytes on its own goroutine, so the final fsync waits for the last
// range only.
type Writeback struct {
	f       *os.File
	every   int64
	off     int64 // the file offset the next write starts at
	started int64 // the bytes before it have had their writeback started
	ranges  chan [2]int64
	done    chan struct{}
	close   sync.Once
}

// startWriteback is StartWriteback; a test records the ranges instead.
var startWriteback = StartWriteback

// NewWriteback writes to f at its current offset; Close it at the end.
func NewWriteback(f *os.File, every int64) *Writeback {
	off, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		off = 0
	}
	w := &Writeback{f: f, every: every, off: off, started: off, ranges: make(chan [2]int64, 1), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for r := range w.ranges {
			startWriteback(f, r[0], r[1])
		}
	}()
	return w
}

func (w *Writeback) Write(p []byte) (int, error) {
	n, err := w.f.Write(p)
	w.off += int64(n)
	if w.off-w.started >= w.every {
		select {
		case w.ranges <- [2]int64{w.started, w.off - w.started}:
			w.started = w.off
		default:
		}
	}
	return n, err
}

// Close waits for the writebacks started; it does not close the file.
func (w *Writeback) Close() {
	w.close.Do(func() {
		close(w.ranges)
		<-w.done
	})
}
