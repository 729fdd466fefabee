//go:build !unix

package backup

import (
	"errors"
	"io"
	"os"
)

// openLog is open_unix.go's openLog with os.File: an Lstat first, and
// os.SameFile after the open, refuse a symbolic link.
func openLog(path string, max int64) (buf []byte, f *os.File, size int64, err error) {
	lfi, err := os.Lstat(path)
	if err != nil {
		return nil, nil, 0, err
	}
	if !lfi.Mode().IsRegular() {
		return nil, nil, 0, errNotRegular
	}
	f, err = os.Open(path)
	if err != nil {
		return nil, nil, 0, err
	}
	fi, err := f.Stat()
	if err != nil || !os.SameFile(lfi, fi) {
		f.Close()
		if err == nil {
			err = errNotRegular
		}
		return nil, nil, 0, err
	}
	size = fi.Size()
	if size > max {
		return nil, f, size, nil
	}
	defer f.Close()
	buf = getBuf(int(size))
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, nil, 0, err
	}
	return buf[:n], nil, int64(n), nil
}
