//go:build linux

package durable

import (
	"os"

	"golang.org/x/sys/unix"
)

// StartWriteback asks the kernel to start writing f's bytes [off, off+n)
// (n 0: to the end) without waiting, so the fsync that ends a write has
// less left; an error is the fsync's to report.
func StartWriteback(f *os.File, off, n int64) {
	if rc, err := f.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) {
			unix.SyncFileRange(int(fd), off, n, unix.SYNC_FILE_RANGE_WRITE)
		})
	}
}
