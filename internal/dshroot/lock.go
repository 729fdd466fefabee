package dshroot

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gofrs/flock"

	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/termtext"
)

// ErrOwned is wrapped by an *OwnedError.
var ErrOwned = errors.New("session is already owned by another process")

// OwnedError: another process holds the session.lock (write_locked).
type OwnedError struct {
	ID   string
	Path string // the lock file
}

func (e *OwnedError) Error() string {
	return fmt.Sprintf("session %s is already owned: %s is locked by another process", termtext.Quote(e.ID), e.Path)
}

func (e *OwnedError) Unwrap() error { return ErrOwned }

// SessionLock is a hold on one session's session.lock.
type SessionLock struct {
	path string
	fl   *flock.Flock
}

const lockAttempts = 3 // locks of a replaced file, as the runtime's

// LockSession takes the session's session.lock as the runtime does: created
// if missing, never deleted, flocked without waiting (held: *OwnedError);
// a link or non-regular file is refused.
func (r *Root) LockSession(s *Session) (*SessionLock, error) {
	path := filepath.Join(s.Dir, LockFileName)
	for attempt := 1; ; attempt++ {
		l, retry, err := lockOnce(path, s.ID)
		if err == nil || !retry || attempt == lockAttempts {
			return l, err
		}
	}
}

func lockOnce(path, id string) (l *SessionLock, retry bool, err error) {
	if f, err := durable.CreateExcl(path); err == nil {
		f.Close()
	} else if !errors.Is(err, os.ErrExist) && !errors.Is(err, durable.ErrSymlink) && !errors.Is(err, durable.ErrNotRegular) {
		return nil, false, fmt.Errorf("lock %s: %w", path, termtext.Bare(err))
	}
	// What is checked is a descriptor opened without following a link;
	// what is locked must be that same file.
	rec, err := durable.OpenRegular(path, os.O_RDONLY)
	switch {
	case errors.Is(err, durable.ErrSymlink):
		return nil, false, &refusal{msg: "refusing to lock " + path + ": it is a symbolic link, and links are never followed when locking", err: err}
	case errors.Is(err, durable.ErrNotRegular):
		return nil, false, fmt.Errorf("refusing to lock %w", err) // err names the path
	case err != nil:
		return nil, false, fmt.Errorf("lock %s: %w", path, termtext.Bare(err))
	}
	defer rec.Close()
	fl := flock.New(path, flock.SetFlag(os.O_RDONLY|durable.NoFollowFlags))
	ok, err := fl.TryLock()
	if err != nil {
		return nil, false, fmt.Errorf("lock %s: %w", path, termtext.Bare(err))
	}
	if !ok {
		return nil, false, &OwnedError{ID: id, Path: path}
	}
	a, errA := rec.Stat()
	b, errB := fl.Stat()
	cur, errC := os.Lstat(path)
	if errA != nil || errB != nil || errC != nil || !os.SameFile(a, b) || !os.SameFile(b, cur) {
		fl.Unlock()
		return nil, true, fmt.Errorf("lock %s: the file was replaced while it was being locked", path)
	}
	return &SessionLock{path: path, fl: fl}, false, nil
}

// Release gives the lock up, the file staying; safe on nil and repeated.
func (l *SessionLock) Release() error {
	if l == nil {
		return nil
	}
	if err := l.fl.Unlock(); err != nil {
		return fmt.Errorf("unlock %s: %w", l.path, err)
	}
	return nil
}

// refusal is an error worded for the user that still wraps its cause.
type refusal struct {
	msg string
	err error
}

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return e.err }
