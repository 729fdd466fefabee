package backup

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"

	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/convkit/convkit/durable"
	"github.com/convkit/convkit/store"
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
// With quiescent (this process holds runtime.lock, so nothing writes the
// index) and no pending write-ahead log or rollback journal beside it, the
// database file itself is consistent: its own path is returned with
// IndexByCopy, and the caller archives it as it is (and must not remove
// it). Otherwise SQLite's VACUUM INTO writes a copy into a new private file
// in tmpDir (or at path, when set) in one read transaction, so the copy is
// the database as of one moment even while the runtime writes (in WAL mode
// a reader blocks no writer); the caller removes it.
func snapshotIndex(ctx context.Context, dataDir, tmpDir, path string, quiescent bool) (string, string, error) {
	src := store.IndexPath(dataDir)
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
	if quiescent && !pending(src+"-wal") && !pending(src+"-journal") {
		return src, IndexByCopy, nil
	}
	var tmp *os.File
	if path != "" {
		tmp, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, durable.FileMode)
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
	if err := vacuumInto(ctx, src, dst, true); err != nil {
		// A read-only open of a WAL database needs its -shm file; without
		// one (no runtime running, and it was removed), open it as the
		// runtime does. VACUUM INTO still only reads it.
		if err2 := vacuumInto(ctx, src, dst, false); err2 != nil {
			return "", "", err
		}
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

func vacuumInto(ctx context.Context, src, dst string, readOnly bool) error {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	if readOnly {
		q.Set("mode", "ro")
	}
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: src}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if err := os.Truncate(dst, 0); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", dst); err != nil {
		return err
	}
	return nil
}
