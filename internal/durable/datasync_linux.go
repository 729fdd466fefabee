//go:build linux

package durable

import (
	"os"

	"golang.org/x/sys/unix"
)

// DataSync makes f's data and size durable with fdatasync: the
// modification time, which nothing reads back, is not waited for.
func DataSync(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return f.Sync()
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = unix.Fdatasync(int(fd))
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return f.Sync()
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
