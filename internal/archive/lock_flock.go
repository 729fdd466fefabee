//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package archive

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive flock on f without waiting: false when
// another open file holds one. The kernel drops it when the last
// descriptor of this open file is closed, or its process dies.
func tryLock(f *os.File) (bool, error) {
	sc, err := f.SyscallConn()
	if err != nil {
		return false, err
	}
	var lerr error
	if err := sc.Control(func(fd uintptr) {
		for {
			lerr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB)
			if !errors.Is(lerr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		return false, err
	}
	if errors.Is(lerr, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return lerr == nil, lerr
}
