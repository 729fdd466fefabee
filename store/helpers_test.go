package store

import (
	"context"
)

// at is a read-only handle of dir for the reading methods. These tests
// read layouts that are not all stores yet (a missing conversations
// directory, say), so Open may take dir for a new store: read-only, that
// creates nothing.
func at(dir string) *Store {
	s, err := Open(context.Background(), dir, OpenOptions{Create: CreateAlways})
	if err != nil {
		panic(err)
	}
	return s
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
