package backup

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gofrs/flock"

	"github.com/convkit/convkit/archive"
	"github.com/convkit/convkit/durable"
)

// A whole restore extracts into .<target>.restore-<random>.tmp beside the
// target and holds a flock on <staging>.lock, beside it (extraction needs
// the staging directory empty), until the staging directory is renamed
// into place or removed. A restore killed meanwhile leaves both, and the
// next restore into the same target removes them once the lock is free:
// a live restore's staging directory is never touched.
const (
	stagingTag     = "restore"
	stagingLockExt = ".lock"
	// staleStagingAge: a staging directory without its lock file (its
	// restore died between creating the one and the other, or an older
	// convkit made it) is removed only when this old, so that one whose
	// restore is about to lock it is not taken for a dead one.
	staleStagingAge = time.Hour
)

// lockStaging creates and locks the lock file of the staging directory.
func lockStaging(stage string) (*flock.Flock, error) {
	l := flock.New(stage + stagingLockExt)
	ok, err := l.TryLock()
	if err == nil && !ok {
		err = errors.New("locked by another process")
	}
	if err == nil {
		err = os.Chmod(l.Path(), durable.FileMode)
	}
	if err != nil {
		l.Close()
		return nil, fmt.Errorf("lock %s: %w", l.Path(), err)
	}
	return l, nil
}

// unlockStaging removes the lock file, then releases it; its staging
// directory is gone by then.
func unlockStaging(l *flock.Flock) {
	os.Remove(l.Path())
	l.Close()
}

// tryStagingLock locks an existing lock file, or returns nil when it is
// held (its restore runs) or cannot be opened.
func tryStagingLock(path string) *flock.Flock {
	l := flock.New(path, flock.SetFlag(os.O_RDONLY))
	if ok, err := l.TryLock(); err != nil || !ok {
		l.Close()
		return nil
	}
	return l
}

// removeStaleStaging removes what killed restores into target left beside
// it: staging directories whose lock is free (with their lock files), and
// lock files whose staging directory is gone. own is this restore's.
func removeStaleStaging(target, own string, log io.Writer) {
	parent, base := filepath.Split(filepath.Clean(target))
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		name := e.Name()
		stage := strings.TrimSuffix(name, stagingLockExt)
		p := filepath.Join(parent, name)
		if !archive.IsStagingDir(stage, base, stagingTag) || filepath.Join(parent, stage) == own {
			continue
		}
		if name != stage { // a lock file, removed here only without its directory
			if _, err := os.Lstat(filepath.Join(parent, stage)); err != nil {
				if l := tryStagingLock(p); l != nil {
					os.Remove(p)
					l.Close()
				}
			}
			continue
		}
		if !e.IsDir() {
			continue
		}
		var l *flock.Flock
		if fi, err := os.Lstat(p + stagingLockExt); err == nil && fi.Mode().IsRegular() {
			if l = tryStagingLock(p + stagingLockExt); l == nil {
				continue // a live restore
			}
		} else if fi, err := e.Info(); err != nil || time.Since(fi.ModTime()) < staleStagingAge {
			continue
		}
		if err := os.RemoveAll(p); err == nil {
			fmt.Fprintf(log, "removed %s, left by an interrupted restore\n", p)
		} else {
			fmt.Fprintf(log, "could not remove %s: %v\n", p, err)
		}
		if l != nil {
			os.Remove(l.Path())
			l.Close()
		}
	}
}
