package convlog

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"time"

	"github.com/convkit/convkit/internal/durable"
)

// Size is the file's size when it was opened.
func (f *File) Size() int64 { return f.size }

// ModTime is the file's modification time when it was opened.
func (f *File) ModTime() time.Time { return f.mtime }

func notRegular(path string, mode fs.FileMode) error {
	return &FormatError{Path: path, Msg: "not a regular file (" + durable.Kind(mode) + ")", Kind: ErrCorrupt, cause: durable.ErrNotRegular}
}

// openError words a failed open: a symbolic link (ELOOP under O_NOFOLLOW)
// and special files (ENXIO for a socket) are refused as such; anything else
// keeps its cause.
func openError(path string, err error, mode fs.FileMode) error {
	var errno syscall.Errno
	switch {
	case errors.Is(err, durable.ErrSymlink) || (errors.As(err, &errno) && errno == syscall.ELOOP):
		return &FormatError{Path: path, Msg: "a symbolic link: symbolic links are never followed", Kind: ErrCorrupt, cause: durable.ErrSymlink}
	case errors.Is(err, durable.ErrNotRegular):
		return notRegular(path, mode)
	case errors.As(err, &errno) && (errno == syscall.ENXIO || errno == syscall.ENODEV || errno == syscall.EISDIR):
		if fi, lerr := os.Lstat(path); lerr == nil && !fi.Mode().IsRegular() {
			return notRegular(path, fi.Mode())
		}
	}
	if _, ok := err.(*fs.PathError); ok {
		return err
	}
	return &fs.PathError{Op: "open", Path: path, Err: err}
}
