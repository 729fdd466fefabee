//go:build unix

package convlog

import "syscall"

// openFlags are added to the flags Open opens a log with: O_NONBLOCK, so
// that a FIFO put in a log's place between Open's Stat and its open does
// not block the open until a writer comes. It does not change reads of a
// regular file.
const openFlags = syscall.O_NONBLOCK
