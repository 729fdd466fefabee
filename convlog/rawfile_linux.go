package convlog

import (
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/convkit/convkit/internal/durable"
)

// File is a log file open for reading: an io.ReaderAt of Size bytes, read
// by plain preads, not through os.File, whose open registers every file
// with the network poller (four fcntl calls and a failing epoll_ctl) and
// sets a finalizer, which cost more than reading a 4 KB log.
type File struct {
	fd    int
	path  string
	size  int64
	mtime time.Time
}

// OpenFile opens the log file at path the one way convkit opens a log:
// never through a symbolic link, never blocking (a FIFO in its place does
// not wait for a writer), and only a regular file, checked on the opened
// descriptor. A symbolic link, a FIFO, a socket, a device or a directory
// is refused with a *FormatError naming it (it wraps durable.ErrSymlink or
// durable.ErrNotRegular, and ErrCorrupt); a missing file gives an error
// wrapping fs.ErrNotExist.
func OpenFile(path string) (*File, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|durable.NoFollowFlags, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, openError(path, err, fs.FileMode(0))
	}
	f := &File{fd: fd, path: path}
	var st syscall.Stat_t
	for {
		err = syscall.Fstat(fd, &st)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		f.Close()
		mode, ok := fileTypes[st.Mode&syscall.S_IFMT]
		if !ok {
			mode = fs.ModeIrregular
		}
		return nil, notRegular(path, mode)
	}
	f.size, f.mtime = st.Size, time.Unix(st.Mtim.Unix())
	return f, nil
}

// fileTypes are the fs.FileMode type bits of a stat mode's file types.
var fileTypes = map[uint32]fs.FileMode{syscall.S_IFDIR: fs.ModeDir, syscall.S_IFIFO: fs.ModeNamedPipe,
	syscall.S_IFSOCK: fs.ModeSocket, syscall.S_IFCHR: fs.ModeDevice | fs.ModeCharDevice, syscall.S_IFBLK: fs.ModeDevice,
	syscall.S_IFLNK: fs.ModeSymlink}

func (f *File) ReadAt(p []byte, off int64) (int, error) {
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
func (f *File) Close() error {
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

// writePadded writes b at off followed by zeros to end in one pwritev (up
// to the kernel's 2 GiB a call), so a process killed at a torn-tail repair
// never sees the frames without the padding; the zeros come from one
// buffer of at most 4 MiB, so memory does not grow with the tail. Its
// errors do not name the file: the caller's do.
func writePadded(f *os.File, b []byte, off, end int64) error {
	pad := end - off - int64(len(b))
	zero := make([]byte, max(0, min(pad, 4<<20)))
	iov := [][]byte{b}
	for ; pad > 0; pad -= int64(len(zero)) {
		iov = append(iov, zero[:min(pad, int64(len(zero)))])
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	for len(iov) > 0 {
		var n int
		var werr error
		batch := iov[:min(len(iov), 1024)] // IOV_MAX
		if cerr := rc.Write(func(fd uintptr) bool {
			n, werr = unix.Pwritev(int(fd), batch, off)
			return werr != unix.EAGAIN
		}); cerr != nil {
			return cerr
		}
		if werr == unix.EINTR {
			continue
		}
		if werr != nil {
			return werr
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		off += int64(n)
		for n > 0 { // drop what was written
			k := min(n, len(iov[0]))
			if iov[0] = iov[0][k:]; len(iov[0]) == 0 {
				iov = iov[1:]
			}
			n -= k
		}
	}
	return nil
}
