package store

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/gofrs/flock"

	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/termtext"
)

// LockMode says what a process takes on runtime.lock.
type LockMode int

const (
	// LockNone takes nothing: readers never block the runtime or writers.
	LockNone LockMode = iota
	// LockExclusive is taken by the runtime and by every writing command.
	LockExclusive
	// LockIfFree takes the lock when it is free, else opens read-only
	// (Store.Online).
	LockIfFree
)

// Holder identifies the process holding runtime.lock, which writes it into
// the lock file as one JSON line for others to name.
type Holder struct {
	PID       int       `json:"pid"`
	Host      string    `json:"host"`
	Command   string    `json:"command"`
	StartedAt time.Time `json:"startedAt"`
}

// LockOptions say what Open takes on runtime.lock: Timeout is how long
// LockExclusive waits (0: fail fast), Command is recorded for others to read
// ("convkit reindex"); now (default time.Now) dates the record.
type LockOptions struct {
	Mode    LockMode
	Timeout time.Duration
	Command string
	now     func() time.Time
}

// LockedError reports runtime.lock held by another process, as LockStatus
// would describe it; it wraps ErrLocked.
type LockedError struct{ Status }

func (e *LockedError) Error() string {
	h := e.Holder
	if h == nil {
		return fmt.Sprintf("%s is %s (%s)", LockFileName, e.NoRecordText(), e.Path)
	}
	msg := LockFileName + " is held by pid " + strconv.Itoa(h.PID)
	if h.Command != "" {
		msg += fmt.Sprintf(" (%s)", termtext.Quote(h.Command))
	}
	if h.Host != "" {
		msg += " on host " + h.Host
	}
	if !h.StartedAt.IsZero() {
		msg += " since " + h.StartedAt.UTC().Format(time.RFC3339)
	}
	return msg + " (" + e.Path + ")"
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// Lock is a hold on runtime.lock, or nothing for LockNone.
type Lock struct {
	path string
	mode LockMode
	fl   *flock.Flock
}

// Path is the lock file's path.
func (l *Lock) Path() string { return l.path }

// Mode is the mode the lock was acquired in.
func (l *Lock) Mode() LockMode { return l.mode }

// release gives the lock up, safe on nil and more than once. The file
// stays: deleting it would let a waiter lock an inode a newcomer no longer
// finds at the path.
func (l *Lock) release() error {
	if l == nil || l.fl == nil {
		return nil
	}
	if err := l.fl.Unlock(); err != nil {
		return fmt.Errorf("unlock %s: %w", l.path, err)
	}
	return nil
}

// Retry delays while waiting, and how long a fail-fast attempt still retries:
// a writer must not fail because a LockStatus probe held the lock an instant.
const (
	retryFirst = 10 * time.Millisecond
	retryMax   = time.Second
	probeGrace = 50 * time.Millisecond
)

// acquireLock creates runtime.lock (0600) if missing, takes an exclusive
// flock, waiting up to opts.Timeout, and records this process; the kernel
// drops the lock on exit, so it is never stale.
func acquireLock(ctx context.Context, dataDir string, opts LockOptions) (*Lock, error) {
	path := lockPath(dataDir)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := createLockFile(dataDir, path); err != nil {
		return nil, err
	}
	// The record is written through a descriptor checked regular: a link
	// must never empty its target.
	rec, err := durable.OpenRegular(path, os.O_RDWR)
	if err != nil {
		return nil, lockFileError(path, err)
	}
	defer rec.Close()

	fl := flock.New(path, flock.SetFlag(os.O_RDWR|durable.NoFollowFlags))
	start := time.Now()
	wait := max(opts.Timeout, probeGrace)
	delay := retryFirst
	for {
		ok, err := fl.TryLock()
		if err != nil {
			return nil, lockFileError(path, err)
		}
		if ok {
			break
		}
		left := wait - time.Since(start)
		if left <= 0 {
			return nil, lockedError(path)
		}
		timer := time.NewTimer(min(delay, left))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, fmt.Errorf("%w (%w)", lockedError(path), ctx.Err())
		case <-timer.C:
		}
		delay = min(2*delay, retryMax)
	}

	l := &Lock{path: path, mode: LockExclusive, fl: fl}
	// A rename between the two opens would lock one file and write another.
	if err := sameFile(rec, fl); err != nil {
		l.release()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := writeHolder(rec, newHolder(opts)); err != nil {
		l.release()
		return nil, err
	}
	return l, nil
}

// lockedError names who holds the lock at path, as far as it is known.
func lockedError(path string) *LockedError {
	e := &LockedError{Status{Path: path, Held: true}}
	checkHolder(&e.Status)
	return e
}

// lockFileError words a failure to open or lock runtime.lock.
func lockFileError(path string, err error) error {
	switch {
	case errors.Is(err, durable.ErrSymlink):
		return &wordedError{msg: "refusing to lock " + path + ": it is a symbolic link, and convkit never follows links when writing or locking", err: err}
	case errors.Is(err, durable.ErrNotRegular):
		return fmt.Errorf("refusing to lock %w", err) // err names the path
	}
	return fmt.Errorf("lock %s: %w", path, err)
}

// sameFile checks that rec and the file fl locked are one regular file.
func sameFile(rec *os.File, fl *flock.Flock) error {
	a, err := rec.Stat()
	if err != nil {
		return err
	}
	b, err := fl.Stat()
	if err != nil {
		return err
	}
	if !b.Mode().IsRegular() {
		return durable.ErrNotRegular
	}
	if !os.SameFile(a, b) {
		return errors.New("the file was replaced while it was being locked; try again")
	}
	return nil
}

// createLockFile creates an empty lock file unless something is at path.
func createLockFile(dataDir, path string) error {
	f, err := durable.CreateExcl(path)
	if errors.Is(err, os.ErrExist) || errors.Is(err, durable.ErrSymlink) || errors.Is(err, durable.ErrNotRegular) {
		return nil
	}
	if err != nil {
		return err // an *os.PathError naming the path
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return durable.SyncDir(dataDir)
}

func newHolder(opts LockOptions) Holder {
	h := Holder{PID: os.Getpid(), Command: opts.Command}
	h.Host, _ = os.Hostname()
	now := opts.now
	if now == nil {
		now = time.Now
	}
	h.StartedAt = now().UTC()
	return h
}

// writeHolder replaces the lock file's content through rec: reopening the
// path could reach another file.
func writeHolder(rec *os.File, h Holder) error {
	path := rec.Name()
	line, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err = rec.Truncate(0); err == nil {
		if _, err = rec.WriteAt(append(line, '\n'), 0); err == nil {
			err = rec.Sync()
		}
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// readHolder parses the lock file's first line, or returns nil.
func readHolder(path string) *Holder {
	f, err := durable.OpenRegular(path, os.O_RDONLY)
	if err != nil {
		return nil
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, 64<<10)).ReadBytes('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil
	}
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	var h Holder
	if json.Unmarshal(line, &h) != nil || h.PID <= 0 {
		return nil
	}
	return &h
}

// Status describes runtime.lock as LockStatus found it. Holder is the lock
// file's record when it can be the holder's, else RecordIgnored says why
// not; KernelPIDs are the holders the kernel lists (nil: it does not say).
type Status struct {
	Path          string
	Held          bool
	Holder        *Holder
	RecordIgnored string
	KernelPIDs    []int
}

// LockStatus reports whether runtime.lock is held by probing with a shared
// flock released at once; a missing lock file means free.
func LockStatus(dataDir string) (Status, error) {
	path := lockPath(dataDir)
	st := Status{Path: path}
	// A link is not followed and a FIFO never blocks the probe's open.
	f, err := durable.OpenRegular(path, os.O_RDONLY)
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, lockStatusError(path, err)
	}
	f.Close()
	fl := flock.New(path, flock.SetFlag(os.O_RDONLY|durable.NoFollowFlags))
	ok, err := fl.TryRLock()
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, lockStatusError(path, err)
	}
	if ok {
		if err := fl.Unlock(); err != nil {
			return st, fmt.Errorf("lock status %s: %w", path, err)
		}
	}
	st.Held = !ok
	if st.Held {
		checkHolder(&st)
	} else {
		st.Holder = readHolder(path)
	}
	return st, nil
}

func lockStatusError(path string, err error) error {
	switch {
	case errors.Is(err, durable.ErrSymlink):
		return &wordedError{msg: "lock status: " + path + " is a symbolic link; convkit never follows links when locking", err: err}
	case errors.Is(err, durable.ErrNotRegular):
		return fmt.Errorf("lock status: %w", err)
	}
	return fmt.Errorf("lock status %s: %w", path, err)
}

// wordedError is a message written for the user that still wraps its cause.
type wordedError struct {
	msg string
	err error
}

func (e *wordedError) Error() string { return e.msg }
func (e *wordedError) Unwrap() error { return e.err }
