package convlog

import (
	"io"
	"io/fs"
	"syscall"
	"time"

	"github.com/convkit/convkit/internal/durable"
)

// rawFile is a log opened for reading without the os.File machinery: on
// Linux os.Open tries to register every file with the network poller (four
// fcntl calls and a failing epoll_ctl for a regular file) and sets a
// finalizer, which cost more than reading the typical 4 KB log. Reads are
// plain preads.
type rawFile struct {
	fd   int
	path string
}

// openRaw opens path as OpenFile describes: O_NOFOLLOW, O_NONBLOCK, the
// descriptor checked to be a regular file.
func openRaw(path string) (f *rawFile, size int64, mtime time.Time, err error) {
	var fd int
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|durable.NoFollowFlags, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, 0, time.Time{}, openError(path, err, fs.FileMode(0))
	}
	f = &rawFile{fd: fd, path: path}
	var st syscall.Stat_t
	for {
		err = syscall.Fstat(fd, &st)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, 0, time.Time{}, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		f.Close()
		mode, ok := fileTypes[st.Mode&syscall.S_IFMT]
		if !ok {
			mode = fs.ModeIrregular
		}
		return nil, 0, time.Time{}, notRegular(path, mode)
	}
	return f, st.Size, time.Unix(st.Mtim.Unix()), nil
}

// fileTypes are the fs.FileMode type bits of a stat mode's file types.
var fileTypes = map[uint32]fs.FileMode{syscall.S_IFDIR: fs.ModeDir, syscall.S_IFIFO: fs.ModeNamedPipe,
	syscall.S_IFSOCK: fs.ModeSocket, syscall.S_IFCHR: fs.ModeDevice | fs.ModeCharDevice, syscall.S_IFBLK: fs.ModeDevice,
	syscall.S_IFLNK: fs.ModeSymlink}

func (f *rawFile) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for n < len(p) {
		m, err := syscall.Pread(f.fd, p[n:], off+int64(n))
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return n, &fs.PathError{Op: "read", Path: f.path, Err: err}
		case m == 0:
			return n, io.EOF
		}
		n += m
	}
	return n, nil
}

// Close closes the file once.
func (f *rawFile) Close() error {
	if f.fd < 0 {
		return nil
	}
	err := syscall.Close(f.fd)
	f.fd = -1
	if err != nil {
		return &fs.PathError{Op: "close", Path: f.path, Err: err}
	}
	return nil
}
