package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/termtext"
)

// OpenOptions configure Open: the Lock taken, what to do with a directory
// that is not a store (Create), the Compression of new logs, and the clock
// (default time.Now), which must be safe for concurrent use.
type OpenOptions struct {
	Lock        LockOptions
	Create      Create
	Compression convlog.Compression
	Now         func() time.Time
}

// Create says what Open does with a directory that is not a store.
type Create int

const (
	// CreateNever refuses a directory that is not a store (ErrNoStore)
	// and creates nothing: a mistyped data directory must not become a store.
	CreateNever Create = iota
	// CreateAlways makes the directory a store, whatever it holds.
	CreateAlways
	// CreateIfEmpty makes the directory a store only when it does not exist or
	// holds nothing but config.toml and *.tmp files.
	CreateIfEmpty
)

// Store is an open data directory. Every change is one durable batch;
// calls on different conversations run in parallel, those of one in order,
// and every other change alone.
type Store struct {
	dataDir string
	lock    *Lock
	now     func() time.Time
	// online: opened LockIfFree without the lock, held by holder or not
	// takeable (lockErr).
	online  bool
	holder  *Holder
	lockErr error
	// mu is held by the Store's changes and read-locked by Session calls,
	// which also hold their openConv.mu; mapMu guards convs.
	mu       sync.RWMutex
	mapMu    sync.Mutex
	comp     convlog.Compression
	convs    map[string]*openConv
	sessions map[sessionKey]*Session
	keeper   IndexKeeper
}

type openConv struct {
	mu      *sync.Mutex // orders the Session calls on the conversation
	dir     string
	w       *convlog.Writer
	st      *convState
	pending pendingIndex // what its sessions appended since the keeper was told
}

// Open opens the store in dataDir, the only way to a store and the only
// place runtime.lock is taken. dataDir must be a store unless opts.Create
// allows it to become one, else ErrNoStore. LockExclusive waits up to
// opts.Lock.Timeout, else a *LockedError names the holder; LockIfFree opens
// read-only when the lock is not free, Online saying why.
func Open(ctx context.Context, dataDir string, opts OpenOptions) (*Store, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dataDir, err)
	}
	dataDir = abs
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	s := &Store{dataDir: dataDir, now: now, comp: opts.Compression, convs: map[string]*openConv{}, sessions: map[sessionKey]*Session{},
		lock: &Lock{path: lockPath(dataDir), mode: LockNone}}
	st, err := probe(dataDir)
	if err != nil {
		return nil, err
	}
	create := false
	if st.kind != isStore {
		switch {
		case opts.Create == CreateAlways && st.kind != notDir, opts.Create == CreateIfEmpty && st.kind == isEmpty:
			create = true
		default:
			return nil, &wordedError{err: ErrNoStore, msg: "no store at " + dataDir + ": " + st.why}
		}
	}
	switch opts.Lock.Mode {
	case LockNone:
		return s, nil
	case LockExclusive:
	case LockIfFree:
		if create {
			return nil, fmt.Errorf("open %s: a store is never created online", dataDir)
		}
		return s.openIfFree(ctx, opts.Lock)
	default:
		return nil, fmt.Errorf("open %s: unknown lock mode LockMode(%d)", dataDir, opts.Lock.Mode)
	}
	if create {
		if err := durable.MkdirAll(dataDir); err != nil {
			return nil, fmt.Errorf("create the store: %w", err)
		}
	}
	lock, err := acquireLock(ctx, dataDir, opts.Lock)
	if err != nil {
		return nil, err
	}
	s.lock = lock
	return s, nil
}

// openIfFree is Open's LockIfFree.
func (s *Store) openIfFree(ctx context.Context, opts LockOptions) (*Store, error) {
	opts.Timeout = 0
	lock, err := acquireLock(ctx, s.dataDir, opts)
	var locked *LockedError
	switch {
	case err == nil:
		s.lock = lock
		return s, nil
	case errors.As(err, &locked):
		s.online, s.holder = true, locked.Holder
		return s, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, durable.ErrSymlink) || errors.Is(err, durable.ErrNotRegular):
		return nil, err // a lock nobody can hold, refused as by every writer
	}
	// Free but not takeable (a read-only file system): reading committed
	// prefixes stays safe.
	s.online, s.lockErr = true, err
	return s, nil
}

// DataDir is the store's directory.
func (s *Store) DataDir() string { return s.dataDir }

// Lock is the hold on runtime.lock (mode LockNone when nothing is held).
func (s *Store) Lock() *Lock { return s.lock }

// Writable reports whether the store holds runtime.lock, which every change
// needs.
func (s *Store) Writable() bool { return s.writable() == nil }

// Online reports whether a store opened LockIfFree went without the lock,
// held by holder (nil: unrecorded) or not takeable (why).
func (s *Store) Online() (online bool, holder *Holder, why error) {
	return s.online, s.holder, s.lockErr
}

// LockStatus reports whether the store's runtime.lock is held.
func (s *Store) LockStatus() (Status, error) { return LockStatus(s.dataDir) }

// SetCompression sets the compression of logs created from now on.
func (s *Store) SetCompression(c convlog.Compression) {
	s.mu.Lock()
	s.comp = c
	s.mu.Unlock()
}

// Close closes every open log and releases runtime.lock.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, se := range s.sessions {
		errs = append(errs, se.closeLocked())
	}
	for _, id := range slices.Sorted(maps.Keys(s.convs)) {
		errs = append(errs, s.convs[id].w.Close())
	}
	s.convs = map[string]*openConv{}
	errs = append(errs, s.lock.release())
	return errors.Join(errs...)
}

func (s *Store) nowMs() int64 { return s.now().UnixMilli() }

// lockSession read-locks the Store and locks se's conversation, so calls of
// different conversations proceed in parallel.
func (s *Store) lockSession(se *Session) func() {
	s.mu.RLock()
	se.cmu.Lock()
	return func() {
		se.cmu.Unlock()
		s.mu.RUnlock()
	}
}

func (s *Store) writable() error {
	if s.lock == nil || s.lock.Mode() != LockExclusive {
		return ErrReadOnly
	}
	return nil
}

// conv returns the open conversation, opening its log for appending.
func (s *Store) conv(convID string) (*openConv, error) {
	if oc := s.convs[convID]; oc != nil {
		return oc, nil
	}
	l, err := s.FindLog(convID, "")
	if err != nil {
		return nil, err
	}
	st, err := l.replay()
	if err != nil {
		return nil, err
	}
	w, err := convlog.OpenAppend(l.Path, convlog.WriterOptions{})
	if err != nil {
		return nil, err
	}
	oc := &openConv{mu: new(sync.Mutex), dir: filepath.Dir(l.Path), w: w, st: st}
	s.convs[convID] = oc
	return oc, nil
}

// liveConv is conv for a change: the conversation must not be deleting.
func (s *Store) liveConv(convID string) (*openConv, error) {
	if err := s.writable(); err != nil {
		return nil, err
	}
	oc, err := s.conv(convID)
	if err != nil {
		return nil, err
	}
	return oc, oc.live()
}

// live refuses a conversation being deleted.
func (oc *openConv) live() error {
	if oc.st.info.Deleting {
		return fmt.Errorf("conversation %s: %w", termtext.Quote(oc.st.info.ID), ErrDeleting)
	}
	return nil
}

// convEvent is a conversation log event of type typ with data v (nil: {});
// its payloads are strings and numbers, which always encode.
func (s *Store) convEvent(typ string, v any) convlog.Event {
	e := convlog.Event{Type: typ, Data: []byte("{}")}
	if v != nil {
		e = typed(typ, v)
	}
	e.Time = s.nowMs()
	return e
}

// appendEvents writes events as one durable batch and replays them.
func (oc *openConv) appendEvents(evs ...convlog.Event) error {
	seq := oc.w.NextSeq()
	if err := oc.w.Append(evs); err != nil {
		return err
	}
	for i := range evs {
		evs[i].Seq = seq + int64(i)
		if err := oc.st.apply(&evs[i]); err != nil {
			return err
		}
	}
	return nil
}

// Conversation returns a copy of conversation convID as this store sees it.
func (s *Store) Conversation(convID string) (*ConversationInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writable() != nil {
		return s.ReadConversation(convID)
	}
	oc, err := s.conv(convID)
	if err != nil {
		return nil, err
	}
	return oc.st.info.clone(), nil
}

// ErrLocked is wrapped by every error that reports runtime.lock held by
// another process (exit code 11).
var ErrLocked = errors.New("runtime.lock is held by another process")
