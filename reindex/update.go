package reindex

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/store"
)

// Update brings one conversation's rows in db up to date with its logs:
// the runtime's incremental update after a flushed append. A conversation
// whose directory is gone, or that is being deleted, is removed from the
// index; one that cannot be read is recorded as skipped, with the reason.
func Update(ctx context.Context, db *index.DB, dataDir, convID string) error {
	c, _, err := store.WalkConversation(dataDir, convID)
	if err != nil {
		dir, perr := store.ConversationPath(dataDir, convID)
		if perr != nil {
			return perr
		}
		if _, serr := os.Lstat(dir); errors.Is(serr, fs.ErrNotExist) {
			return db.Delete(ctx, convID)
		}
		return err
	}
	present := func(id string) bool {
		p, err := store.ConversationPath(dataDir, id)
		if err != nil {
			return false
		}
		_, err = os.Lstat(p)
		return err == nil
	}
	b := readConversationWith(c, present, true)
	w, err := db.Begin(ctx)
	if err != nil {
		return err
	}
	switch {
	case b.deleting || b.empty:
		err = w.Remove(ctx, convID)
	case b.skip != nil:
		err = w.Skip(ctx, convID, filepath.Base(c.Path), dirFingerprint(c), b.skip.Reason)
	default:
		err = w.Put(ctx, b.conv, b.msgs)
	}
	if err != nil {
		w.Rollback()
		return fmt.Errorf("update %q in the index: %w", convID, err)
	}
	return w.Commit()
}
