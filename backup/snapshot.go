package backup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/durable"
)

// Ways the metadata.db snapshot is taken (Manifest.IndexMethod).
const (
	IndexByVacuum = "vacuum-into"
	IndexByCopy   = "copy"
)

// snapshotIndex makes a consistent copy of metadata.db. It returns the
// path of the copy and how it was made, or "" when the store has no
// metadata.db.
//
// When nothing can write the index — this process holds runtime.lock
// (quiescent), or the index is on a read-only file system — and no
// write-ahead log or rollback journal is pending beside it, the database
// file itself is consistent: its own path is returned with IndexByCopy,
// and the caller archives it as it is (and must not remove it).
// Otherwise SQLite's VACUUM INTO writes a copy into a new private file in
// tmpDir (or at path, when set) in one read transaction, so the copy is
// the database as of one moment even while the runtime writes (in WAL mode
// a reader blocks no writer); the caller removes it. The index is read as
// index.OpenRead reads it, so a read-only medium (where a WAL reader
// cannot make its -shm file) is read too.
func snapshotIndex(ctx context.Context, src, tmpDir, path string, quiescent bool) (string, string, error) {
	fi, err := os.Lstat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	if !fi.Mode().IsRegular() {
		return "", "", errors.New("not a regular file (symbolic links are not followed)")
	}
	if (quiescent || index.ReadOnlyFS(filepath.Dir(src))) && !pending(src+"-wal") && !pending(src+"-journal") {
		return src, IndexByCopy, nil
	}
	var tmp *os.File
	if path != "" {
		tmp, err = durable.CreateExcl(path)
	} else {
		tmp, err = durable.CreateTemp(tmpDir, ".convkit-index-snapshot")
	}
	if err != nil {
		return "", "", fmt.Errorf("snapshot of %s: %w", src, err)
	}
	dst := tmp.Name()
	tmp.Close() // VACUUM INTO writes into an existing empty file, keeping its 0600
	ok := false
	defer func() {
		if !ok {
			os.Remove(dst)
		}
	}()
	if err := index.VacuumInto(ctx, src, dst, index.ReadOptions{TempDir: tmpDir}); err != nil {
		return "", "", err
	}
	ok = true
	return dst, IndexByVacuum, nil
}

// pending reports whether a journal file holds something: anything but a
// missing or empty file (an unreadable one counts as pending).
func pending(p string) bool {
	fi, err := os.Lstat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	return err != nil || fi.Size() > 0
}
