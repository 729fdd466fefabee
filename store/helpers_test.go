package store

import (
	"context"
	"time"
)

// at is a read-only handle of dir for the reading methods, made without
// Open's check that dir is a store: these tests read layouts that are not
// all stores (a missing conversations directory, say).
func at(dir string) *Store {
	return &Store{dataDir: dir, lock: &Lock{path: LockPath(dir), mode: LockNone}, now: time.Now, exists: true,
		convs: map[string]*openConv{}}
}

// lockDir takes runtime.lock of dir (made a store if it is not one) through
// Open, and hands the hold back.
func lockDir(ctx context.Context, dir string, opts LockOptions) (*Lock, error) {
	s, err := Open(ctx, dir, OpenOptions{Lock: opts, Create: CreateAlways})
	if err != nil {
		return nil, err
	}
	return s.Lock(), nil
}
