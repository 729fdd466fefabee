//go:build !linux

package convlog

import (
	"os"
	"time"
)

// rawFile is an os.File elsewhere; see rawfile_linux.go.
type rawFile = os.File

func openFile(path string) (f *rawFile, size int64, mtime time.Time, err error) {
	f, err = os.OpenFile(path, os.O_RDONLY|openFlags, 0)
	if err != nil {
		return nil, 0, time.Time{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, time.Time{}, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, 0, time.Time{}, &FormatError{Path: path, Msg: "not a regular file", Kind: ErrCorrupt}
	}
	return f, fi.Size(), fi.ModTime(), nil
}
