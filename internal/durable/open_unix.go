//go:build unix

package durable

import (
	"errors"
	"syscall"
)

// NoFollowFlags make an open refuse a symbolic link in the last component
// and return at once on a FIFO or a device (O_NONBLOCK does not change a
// regular file).
const NoFollowFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK | syscall.O_CLOEXEC

// InputFlags open an input without waiting for a FIFO's writer.
const InputFlags = syscall.O_NONBLOCK | syscall.O_CLOEXEC

// DirFlag makes an open fail unless it names a directory.
const DirFlag = syscall.O_DIRECTORY

func isLoop(err error) bool { return errors.Is(err, syscall.ELOOP) }
