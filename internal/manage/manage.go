// Package manage carries out the operator's edits of conversations (rename,
// archive, unarchive, delete) through the store's conversation API, then
// brings metadata.db up to date one conversation at a time with
// reindex.Update. The store must hold runtime.lock exclusively, and every id
// is checked before anything is written.
package manage

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/contract"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// Options configure every edit.
type Options struct {
	Machine *store.Machine      // for the index rows written (reindex.UpdateOptions)
	OnEvent func(store.Outcome) // each outcome as soon as it is done
}

// What an edit did to one conversation (store.Outcome.Action; Title after a rename).
const (
	ActionRenamed          = "renamed"
	ActionUnchanged        = "unchanged" // renamed to the title it has
	ActionArchived         = "archived"
	ActionAlreadyArchived  = "already-archived"
	ActionUnarchived       = "unarchived"
	ActionNotArchived      = "not-archived" // unarchive of one that is not archived
	ActionDeleted          = "deleted"
	ActionAlreadyDeleted   = "already-deleted" // a killed delete had removed it
	indexUpdated           = "updated"
	indexAbsent            = "absent"
	indexUnchanged         = "unchanged"
	indexNotUpdated        = "not-updated"
	indexNotUpdatedHintFmt = "metadata.db was not updated (%s): list reads the logs until it is brought up to date (%s)"
)

// Result is what an edit did.
type Result struct {
	SchemaVersion int             `json:"schemaVersion"`
	Conversations []store.Outcome `json:"conversations"`
	Index         string          `json:"index"` // updated, unchanged, absent or not-updated
	IndexError    string          `json:"indexError,omitempty"`
	Warnings      []string        `json:"warnings"`
}

func newResult() *Result {
	return &Result{SchemaVersion: contract.Version, Conversations: []store.Outcome{}, Index: indexUnchanged, Warnings: []string{}}
}

// Rename sets the title of conversation id (store.Rename).
func Rename(ctx context.Context, s *store.Store, id, title string, opts Options) (*Result, error) {
	title, err := store.CheckTitle(title)
	if err != nil {
		return nil, err
	}
	return edit(ctx, s, []string{id}, opts, func(id string, info *store.ConversationInfo) (store.Outcome, bool, error) {
		if info.Title == title && !info.TitleIsAuto {
			return store.Outcome{ID: id, Action: ActionUnchanged, Title: title}, false, nil
		}
		return store.Outcome{ID: id, Action: ActionRenamed, Title: title}, true, s.Rename(id, title)
	})
}

// SetArchived hides the conversations ids from the main list (archived) or
// brings them back.
func SetArchived(ctx context.Context, s *store.Store, ids []string, archived bool, opts Options) (*Result, error) {
	done, already, record := ActionArchived, ActionAlreadyArchived, s.Archive
	if !archived {
		done, already, record = ActionUnarchived, ActionNotArchived, s.Unarchive
	}
	return edit(ctx, s, ids, opts, func(id string, info *store.ConversationInfo) (store.Outcome, bool, error) {
		if info.Archived == archived {
			return store.Outcome{ID: id, Action: already}, false, nil
		}
		return store.Outcome{ID: id, Action: done}, true, record(id)
	})
}

// edit checks that every id names a live conversation, then applies do to
// each in turn, updating the index rows of those it changed.
func edit(ctx context.Context, s *store.Store, ids []string, opts Options, do func(string, *store.ConversationInfo) (store.Outcome, bool, error)) (*Result, error) {
	res := newResult()
	if err := writable(s); err != nil {
		return nil, err
	}
	ids = unique(ids)
	infos := make([]*store.ConversationInfo, len(ids))
	for i, id := range ids {
		info, err := s.Conversation(id)
		if err != nil {
			return nil, err
		}
		if info.Deleting {
			return nil, fmt.Errorf("conversation %s: %w (run convkit delete %s again, or convkit reindex, to finish it)", termtext.Quote(id), store.ErrDeleting, id)
		}
		infos[i] = info
	}
	ix := openIndex(s)
	defer ix.finish(res)
	for i, id := range ids {
		if err := ctx.Err(); err != nil && i > 0 { // between conversations
			return res, err
		}
		o, changed, err := do(id, infos[i])
		if err != nil {
			return res, err
		}
		if changed {
			ix.update(ctx, s, id, opts)
		}
		res.done(o, opts)
	}
	return res, ix.interrupted
}

// Delete deletes the conversations ids through the tombstone, so a rerun
// finishes a killed delete; force breaks the forks that read from them.
func Delete(ctx context.Context, s *store.Store, ids []string, force bool, opts Options) (*Result, error) {
	res := newResult()
	if err := writable(s); err != nil {
		return nil, err
	}
	ix := openIndex(s)
	defer ix.finish(res)
	err := s.DeleteAll(ctx, ids, store.DeleteOptions{Force: force, Done: func(id string, already bool) error {
		o := store.Outcome{ID: id, Action: ActionDeleted}
		if already {
			// A kill before the index update left the row.
			o.Action = ActionAlreadyDeleted
			ix.settle(ctx, s, id, opts)
		} else {
			ix.update(ctx, s, id, opts)
		}
		res.done(o, opts)
		return nil
	}})
	if err != nil {
		if len(res.Conversations) == 0 {
			return nil, err
		}
		return res, err
	}
	return res, ix.interrupted
}

func (r *Result) done(o store.Outcome, opts Options) {
	r.Conversations = append(r.Conversations, o)
	if opts.OnEvent != nil {
		opts.OnEvent(o)
	}
}

func writable(s *store.Store) error {
	if !s.Writable() {
		return fmt.Errorf("%s: %w", s.DataDir(), store.ErrReadOnly)
	}
	return nil
}

func unique(ids []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// indexWriter updates metadata.db for each changed conversation once its
// change is durable; after the first failure the index is left for reindex.
type indexWriter struct {
	db          *index.DB
	state       string // indexUpdated, indexAbsent, indexUnchanged or indexNotUpdated
	why         string
	advice      string // index.UpdateAdvice
	changed     bool
	interrupted error // the context ended during an update, which was not made
}

func openIndex(s *store.Store) *indexWriter {
	ix := &indexWriter{state: indexUnchanged}
	db, err := index.Open(s.IndexPath())
	var ve *index.VersionError
	switch {
	case errors.Is(err, os.ErrNotExist):
		ix.state = indexAbsent
	case errors.As(err, &ve) && ve.Older():
		ix.state, ix.why = indexNotUpdated, fmt.Sprintf("it was written by an older convkit, schema version %d", ve.Found)
	case err != nil:
		ix.state, ix.why, ix.advice = indexNotUpdated, err.Error(), index.UpdateAdvice(err)
	default:
		ix.db = db
	}
	return ix
}

func (ix *indexWriter) update(ctx context.Context, s *store.Store, id string, opts Options) {
	ix.changed = true
	if ix.db == nil || ix.state == indexNotUpdated {
		return
	}
	if _, err := reindex.Update(ctx, ix.db, s, id, reindex.UpdateOptions{Machine: opts.Machine}); err != nil {
		ix.state, ix.why, ix.advice = indexNotUpdated, err.Error(), index.UpdateAdvice(err)
		if ctx.Err() != nil {
			ix.interrupted, ix.why = ctx.Err(), "interrupted"
		}
		return
	}
	ix.state = indexUpdated
}

// settle updates the rows of id only when they differ from its logs.
func (ix *indexWriter) settle(ctx context.Context, s *store.Store, id string, opts Options) {
	if ix.db != nil && ix.state != indexNotUpdated {
		stale, err := reindex.Stale(ctx, ix.db, s, []string{id})
		if err == nil && len(stale) == 0 {
			return
		}
	}
	ix.update(ctx, s, id, opts)
}

// finish closes the index and records its state in res.
func (ix *indexWriter) finish(res *Result) {
	if ix.db != nil {
		ix.db.Close()
	}
	if !ix.changed {
		res.Index = indexUnchanged
		return
	}
	res.Index = ix.state
	if ix.state == indexNotUpdated {
		res.IndexError = ix.why
		advice := ix.advice
		if advice == "" {
			advice = index.UpdateAdvice(nil)
		}
		res.Warnings = append(res.Warnings, fmt.Sprintf(indexNotUpdatedHintFmt, ix.why, advice))
	}
}
