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
	for {
		// Fd's switch to blocking mode is nothing to a regular file.
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		}
		return err == nil, err
	}
}
