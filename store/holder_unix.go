//go:build unix

package store

import (
	"errors"
	"syscall"
)

// processAlive reports whether process pid exists (signal 0 checks without
// sending anything; EPERM is a process of another user). known is false
// when the answer is not clear.
func processAlive(pid int) (alive, known bool) {
	if pid <= 0 {
		return false, true
	}
	err := syscall.Kill(pid, 0)
	switch {
	case err == nil, errors.Is(err, syscall.EPERM):
		return true, true
	case errors.Is(err, syscall.ESRCH):
		return false, true
	}
	return false, false
}
