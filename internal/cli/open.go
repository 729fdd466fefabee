package cli

import (
	"context"

	"github.com/convkit/convkit/store"
)

// openStore opens the store of the data directory (--data-dir, ...) for
// command: read-only (store.LockNone), exclusively for a writing command
// (store.LockExclusive: failing at once, or waiting up to --lock-timeout),
// or as online backup does (store.LockIfFree). A data directory that is not
// a store is refused, and nothing is created.
func (e *env) openStore(ctx context.Context, command string, mode store.LockMode) (*store.Store, error) {
	dir, err := e.g.dataDir()
	if err != nil {
		return nil, err
	}
	return e.openStoreAt(ctx, dir, command, mode, store.CreateNever)
}

// openStoreAt is openStore of the store in dir, created as create says.
func (e *env) openStoreAt(ctx context.Context, dir, command string, mode store.LockMode, create store.Create) (*store.Store, error) {
	return store.Open(ctx, dir, store.OpenOptions{Create: create, Lock: store.LockOptions{
		Mode: mode, Timeout: e.g.LockTimeout, Command: "convkit " + command}})
}
