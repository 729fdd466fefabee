package reindex

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// UpdateOptions configure Update.
type UpdateOptions struct {
	// Machine checks whether the conversation will open here (nil: its
	// working directory and fork sources are checked, its agents and
	// models are not), as Options.Machine does for Run.
	Machine *store.Machine
	// Prereads are session logs read already, as Options.Prereads.
	Prereads Prereads
}

// UpdateResult is what Update did.
type UpdateResult struct {
	// FromPrereads counts the session logs written to the index from
	// their Preread rather than read again.
	FromPrereads int
}

// Update brings one conversation's rows in db up to date with its logs:
// the incremental update of the index after a flushed append, by the
// runtime and by every command that changes a conversation (import,
// rename, archive, delete). A conversation whose directory is gone, or
// that is being deleted, is removed from the index; one that cannot be
// read is recorded as skipped, with the reason; the row of one that is
// read records why it will not open on this machine.
func Update(ctx context.Context, db *index.DB, s *store.Store, convID string, opts UpdateOptions) (UpdateResult, error) {
	c, _, err := s.WalkConversation(convID)
	if err != nil {
		dir, perr := s.ConversationPath(convID)
		if perr != nil {
			return UpdateResult{}, perr
		}
		if _, serr := os.Lstat(dir); errors.Is(serr, fs.ErrNotExist) {
			return UpdateResult{}, db.Delete(ctx, convID)
		}
		return UpdateResult{}, err
	}
	present := func(id string) bool {
		p, err := s.ConversationPath(id)
		if err != nil {
			return false
		}
		_, err = os.Lstat(p)
		return err == nil
	}
	b := readConversationWith(ctx, c, readEnv{present: present, withText: true, machine: opts.Machine, prereads: opts.Prereads})
	if b.err != nil {
		return UpdateResult{}, b.err
	}
	w, err := db.Begin(ctx)
	if err != nil {
		return UpdateResult{}, err
	}
	var res UpdateResult
	switch {
	case b.deleting || b.empty:
		err = w.Remove(ctx, convID)
	case b.skip != nil:
		err = w.Skip(ctx, convID, filepath.Base(c.Path), b.fingerprint, storedReason(c.Path, b.skip))
	default:
		err = w.Put(ctx, b.conv, b.msgs)
		res.FromPrereads = b.fromPrereads
	}
	if err != nil {
		w.Rollback()
		return UpdateResult{}, fmt.Errorf("update %s in the index: %w", termtext.Quote(convID), interrupted(ctx, err))
	}
	return res, w.Commit()
}

// Stale lists the conversations of ids whose rows in db were not read from
// the logs they have now: a conversation with no row (unless it is being
// deleted), a row whose conversation directory is gone, or a row with
// another fingerprint (log names, sizes, modification times). Update
// brings each up to date. A writer that died between changing logs and
// updating their rows leaves such rows, which a rerun that finds nothing
// to write would otherwise keep.
func Stale(ctx context.Context, db *index.DB, s *store.Store, ids []string) ([]string, error) {
	fps, err := db.Fingerprints(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		fp, indexed := fps[id]
		c, _, err := s.WalkConversation(id)
		switch {
		case err != nil:
			// Only a directory that is gone is Update's to settle.
			dir, perr := s.ConversationPath(id)
			if _, serr := os.Lstat(dir); indexed && perr == nil && errors.Is(serr, fs.ErrNotExist) {
				out = append(out, id)
			}
		case !indexed:
			if !deleting(c) {
				out = append(out, id)
			}
		case fp != dirFingerprint(c):
			out = append(out, id)
		}
	}
	return out, nil
}
