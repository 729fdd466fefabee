//go:build unix

package backup

import (
	"os"
	"syscall"
)

// openLog opens a log for reading, refusing a symbolic link in its last
// component (ELOOP) in the same system call, and reads it whole when it is
// a regular file of at most max bytes (buf, and f nil). A larger regular
// file is returned open (f) with its size. Small logs are read with bare
// system calls: os.File's poller registration costs five more per file,
// which for thousands of small logs is a third of the read time.
func openLog(path string, max int64) (buf []byte, f *os.File, size int64, err error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, nil, 0, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		syscall.Close(fd)
		return nil, nil, 0, errNotRegular
	}
	size = st.Size
	if size > max {
		return nil, os.NewFile(uintptr(fd), path), size, nil
	}
	defer syscall.Close(fd)
	buf = getBuf(int(size))
	n := 0
	for n < len(buf) {
		m, err := syscall.Pread(fd, buf[n:], int64(n))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, nil, 0, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m == 0 {
			break // the file shrank: take what is there
		}
		n += m
	}
	return buf[:n], nil, int64(n), nil
}
