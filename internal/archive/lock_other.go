//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd || windows)

package archive

import (
	"errors"
	"os"
)

// tryLock cannot lock here: stagings and temporary archives are made
// unlocked, and a sweep leaves every one with a lock file alone.
func tryLock(*os.File) (bool, error) { return false, errors.ErrUnsupported }
