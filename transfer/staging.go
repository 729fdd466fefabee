package transfer

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/gofrs/flock"

	"github.com/convkit/convkit/archive"
	"github.com/convkit/convkit/store"
)

func cpus() int { return runtime.NumCPU() }

// staging is import's private directory inside the data directory:
//
//	<data-dir>/.conversations.import-<random>.tmp/
//	├── .lock   flocked while the import runs
//	└── tree/   the archive, extracted: MANIFEST.json, conversations/…
//
// It is on the store's file system, so conversation directories move
// from tree/conversations/ into the store by rename. The lock tells a
// live import's staging directory from a killed one's, which the next
// import removes.
type staging struct {
	dir  string
	tree string
	lock *flock.Flock
}

const stagingLockName = ".lock"

func newStaging(dataDir string) (*staging, error) {
	dir, err := archive.NewStagingDir(store.ConversationsDir(dataDir), stagingTag)
	if err != nil {
		return nil, err
	}
	s := &staging{dir: dir, tree: filepath.Join(dir, "tree")}
	s.lock = flock.New(filepath.Join(dir, stagingLockName))
	ok, err := s.lock.TryLock()
	if err == nil && !ok {
		err = errors.New("staging directory locked by another process")
	}
	if err == nil {
		err = os.Mkdir(s.tree, 0o700)
	}
	if err == nil {
		err = os.Chmod(s.tree, 0o700)
	}
	if err != nil {
		s.remove()
		return nil, fmt.Errorf("staging directory %s: %w", dir, err)
	}
	return s, nil
}

// remove deletes the staging directory and what is left in it.
func (s *staging) remove() {
	os.RemoveAll(s.dir)
	if s.lock != nil {
		s.lock.Close()
	}
}

// staleAge is how old a staging directory without its lock file must be
// to count as left by a killed import (one that died before locking).
const staleAge = time.Hour

// removeStaleStaging removes the staging directories of imports that are
// no longer running (killed): their lock file is not locked. The caller
// holds runtime.lock.
func removeStaleStaging(dataDir, own string, log io.Writer) {
	ents, err := os.ReadDir(dataDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() || !archive.IsStagingDir(e.Name(), store.ConversationsDirName, stagingTag) {
			continue
		}
		p := filepath.Join(dataDir, e.Name())
		if p == own {
			continue
		}
		lp := filepath.Join(p, stagingLockName)
		if fi, err := os.Lstat(lp); err != nil || !fi.Mode().IsRegular() {
			if di, err := e.Info(); err != nil || time.Since(di.ModTime()) < staleAge {
				continue
			}
		} else {
			l := flock.New(lp)
			ok, err := l.TryLock()
			if err != nil || !ok {
				l.Close()
				continue // a live import
			}
			defer l.Close()
		}
		if err := os.RemoveAll(p); err == nil {
			fmt.Fprintf(log, "convkit: removed %s, left by an interrupted import\n", p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(log, "convkit: could not remove %s: %v\n", p, err)
		}
	}
}
