package store

import "errors"

// ErrLocked is wrapped by every error that reports runtime.lock held by
// another process. The CLI maps it to exit code 11.
var ErrLocked = errors.New("runtime.lock is held by another process")
