//go:build linux

package upgrade

import (
	"os"

	"golang.org/x/sys/unix"
)

// startWriteback asks the kernel to start writing f's bytes [off, off+n)
// to the disk now, without waiting for it (sync_file_range, WRITE only),
// so that the fsync before publication has less left to write. It is a
// hint: an error is the fsync's to report.
func startWriteback(f *os.File, off, n int64) {
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
		})
	}
}
