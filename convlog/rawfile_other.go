//go:build !linux

package convlog

import (
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/convkit/convkit/internal/durable"
)

// rawFile is an os.File elsewhere; see rawfile_linux.go.
type rawFile = os.File

func openRaw(path string) (f *rawFile, size int64, mtime time.Time, err error) {
	f, err = durable.OpenRegular(path, os.O_RDONLY)
	if err != nil {
		var mode fs.FileMode
		if errors.Is(err, durable.ErrNotRegular) {
			if fi, lerr := os.Lstat(path); lerr == nil {
				mode = fi.Mode()
			}
		}
		return nil, 0, time.Time{}, openError(path, err, mode)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, time.Time{}, err
	}
	return f, fi.Size(), fi.ModTime(), nil
}
