package backup

import (
	"context"
	"io"
	"testing"

	"github.com/convkit/convkit/store"
)

// openOnline opens the store in dataDir as the backup command does: with
// runtime.lock when it is free, online when not (read-only for a dry run).
func openOnline(ctx context.Context, dataDir string, dryRun bool) (*store.Store, error) {
	mode := store.LockIfFree
	if dryRun {
		mode = store.LockNone
	}
	return store.Open(ctx, dataDir, store.OpenOptions{Lock: store.LockOptions{Mode: mode, Command: "convkit backup"}})
}

// writeBackup is Write of the store in dataDir, opened for it and closed
// after.
func writeBackup(ctx context.Context, dataDir string, w io.Writer, opts Options) (*Result, error) {
	s, err := openOnline(ctx, dataDir, false)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return Write(ctx, s, w, opts)
}

// toDir is ToDir of the store in dataDir, opened for it and closed after.
func toDir(ctx context.Context, dataDir, dir string, opts DirOptions) (*DirResult, error) {
	s, err := openOnline(ctx, dataDir, opts.DryRun)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return ToDir(ctx, s, dir, opts)
}

// reader opens the store in dir read-only for a test's reads.
func reader(t testing.TB, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), dir, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
