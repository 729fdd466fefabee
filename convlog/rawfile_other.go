//go:build !linux

package convlog

import (
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/convkit/convkit/internal/durable"
)

// File is an os.File elsewhere; see rawfile_linux.go.
type File struct {
	f     *os.File
	size  int64
	mtime time.Time
}

func OpenFile(path string) (*File, error) {
	f, err := durable.OpenRegular(path, os.O_RDONLY)
	if err != nil {
		var mode fs.FileMode
		if errors.Is(err, durable.ErrNotRegular) {
			if fi, lerr := os.Lstat(path); lerr == nil {
				mode = fi.Mode()
			}
		}
		return nil, openError(path, err, mode)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &File{f: f, size: fi.Size(), mtime: fi.ModTime()}, nil
}

func (f *File) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }

func (f *File) Close() error { return f.f.Close() }

// writePadded writes b at off and zeros to end; see rawfile_linux.go.
// Here the zeros are further writes, each at most 4 MiB.
func writePadded(f *os.File, b []byte, off, end int64) error {
	if _, err := f.WriteAt(b, off); err != nil {
		return unwrapPath(err)
	}
	zero := make([]byte, max(0, min(end-off-int64(len(b)), 4<<20)))
	for p := off + int64(len(b)); p < end; p += int64(len(zero)) {
		if _, err := f.WriteAt(zero[:min(end-p, int64(len(zero)))], p); err != nil {
			return unwrapPath(err)
		}
	}
	return nil
}

// unwrapPath drops the file name a write error carries: the caller names it.
func unwrapPath(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}
