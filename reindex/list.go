package reindex

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/contract"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// ListOptions select conversations for List.
type ListOptions struct {
	Archived    bool // archived conversations instead of the others
	All         bool // both
	Limit       int  // 0: all
	WillNotOpen bool // only those that will not open on this machine
	// Machine checks the conversations listed from the logs (nil: working
	// directories and fork sources only).
	Machine *store.Machine
}

// Listing is the result of List.
type Listing struct {
	SchemaVersion int `json:"schemaVersion"`
	// Source is "index", or "logs" when the index was not current
	// (FallbackReason says why).
	Source         string          `json:"source"`
	FallbackReason string          `json:"fallbackReason,omitempty"`
	Conversations  []index.Summary `json:"conversations"`
	Skipped        []store.Item    `json:"skipped"`
	Warnings       []string        `json:"warnings"`
}

// List lists conversations, newest first, from metadata.db when it is
// current, else from the conversation logs; it takes no lock.
func List(ctx context.Context, s *store.Store, o ListOptions) (*Listing, error) {
	tree, err := s.Walk()
	if err != nil {
		return nil, err
	}
	res := &Listing{SchemaVersion: contract.Version, Conversations: []index.Summary{}, Skipped: []store.Item{}, Warnings: []string{}}
	db, reason := indexCurrent(ctx, s, &tree)
	if db != nil {
		defer db.Close()
	}
	if reason == "" {
		rows, err := db.List(ctx, index.ListOptions{Archived: o.Archived, All: o.All, Limit: o.Limit, WillNotOpen: o.WillNotOpen})
		var skipped []index.SkippedRow
		if err == nil {
			skipped, err = db.Skipped(ctx)
		}
		if err == nil {
			res.Source, res.Conversations = "index", rows
			for _, sk := range skipped {
				p, err := s.ConversationPath(sk.ID)
				if err != nil {
					p = sk.Dir
				}
				res.Skipped = append(res.Skipped, indexedSkip(sk.ID, p, sk.Reason))
			}
			return res, nil
		}
		reason = err.Error()
	}
	res.Source, res.FallbackReason = "logs", reason
	if o.WillNotOpen && !o.Machine.Checked() {
		res.Warnings = (&Options{Machine: o.Machine}).warnings()
	}
	present := presentIn(tree)
	// Reported, or a linked conversations/ would list nothing silently.
	res.Skipped = walkSkips(tree)
	for _, c := range tree.Conversations {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// What reindex decides from the conversation log alone.
		f, info := foundConversation(c)
		if v := Accept(f); v.Kind == store.ItemSkipped {
			v.ID = c.ID
			res.Skipped = append(res.Skipped, v)
		}
		if info == nil || info.Deleting {
			continue
		}
		if !o.All && info.Archived != o.Archived {
			continue
		}
		reasons := o.Machine.Check(store.NeedsOf(info), func(id string) bool { return present[id] })
		if o.WillNotOpen && len(reasons) == 0 {
			continue
		}
		res.Conversations = append(res.Conversations, index.Summary{
			ID: info.ID, Title: info.Title, UpdatedAt: info.UpdatedAt.UnixMilli(), CreatedAt: info.CreatedAt.UnixMilli(),
			Archived: info.Archived, ForkedFrom: info.ForkedFrom, Cwd: info.Cwd, Sessions: len(info.Sessions),
			Turns: len(info.Turns), RunningTurn: info.RunningTurn, WillNotOpen: reasons,
		})
	}
	sort.Slice(res.Conversations, func(i, j int) bool {
		a, b := res.Conversations[i], res.Conversations[j]
		if a.UpdatedAt != b.UpdatedAt {
			return a.UpdatedAt > b.UpdatedAt
		}
		return a.ID < b.ID
	})
	if o.Limit > 0 && len(res.Conversations) > o.Limit {
		res.Conversations = res.Conversations[:o.Limit]
	}
	return res, nil
}

// indexCurrent opens metadata.db and says why it is not current for tree ("": it is).
func indexCurrent(ctx context.Context, s *store.Store, tree **store.Tree) (*index.DB, string) {
	db, err := index.OpenRead(ctx, s.IndexPath(), index.ReadOptions{})
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Sprintf("metadata.db does not exist (%s)", ReindexHint(s))
	}
	var ve *index.VersionError
	if errors.As(err, &ve) && ve.Older() {
		return nil, fmt.Sprintf("metadata.db was written by an older convkit (schema version %d; this one reads %d) (%s)", ve.Found, ve.Want, ReindexHint(s))
	}
	if err != nil {
		return nil, fmt.Sprintf("metadata.db is not usable: %v", err)
	}
	why := listingCurrent(ctx, db, *tree)
	if why != "" {
		// The runtime updates the index just after its logs: while it holds
		// runtime.lock, a mismatch is walked and read again a few times.
		if st, err := s.LockStatus(); err == nil && st.Held && !s.Writable() {
			for try := 1; try <= recheckTries && why != "" && ctx.Err() == nil; try++ {
				time.Sleep(time.Duration(try) * 20 * time.Millisecond)
				if t, err := s.Walk(); err == nil {
					*tree = t
				}
				why = listingCurrent(ctx, db, *tree)
			}
		}
	}
	if why != "" {
		return db, fmt.Sprintf("%s (%s)", why, ReindexHint(s))
	}
	return db, ""
}

// listingCurrent says why db's rows do not list tree as its logs would, or "".
func listingCurrent(ctx context.Context, db *index.DB, tree *store.Tree) string {
	stored, err := db.Stored(ctx)
	if err != nil {
		return fmt.Sprintf("metadata.db is not usable: %v", err)
	}
	for _, c := range tree.Conversations {
		st, ok := stored[c.ID]
		if !ok {
			if deleting(c) || c.ConversationLog() == nil {
				// Not listed from the logs either: the runtime writes the conversation
				// log just after the first session's.
				continue
			}
			return fmt.Sprintf("conversation %s is not indexed", termtext.Quote(c.ID))
		}
		if !st.Skipped {
			if st.LogIdentity != logIdentity(c) {
				return fmt.Sprintf("conversation %s changed since it was indexed", termtext.Quote(c.ID))
			}
		} else if st.Fingerprint != dirFingerprint(c) {
			return fmt.Sprintf("conversation %s changed since it was skipped", termtext.Quote(c.ID))
		}
		delete(stored, c.ID)
	}
	for id := range stored {
		return fmt.Sprintf("conversation %s is indexed but no longer exists", termtext.Quote(id))
	}
	return ""
}

// ReindexHint says how to update metadata.db, naming runtime.lock's holder.
func ReindexHint(s *store.Store) string {
	st, err := s.LockStatus()
	if err != nil || !st.Held || s.Writable() {
		return "run convkit reindex"
	}
	who := "another process"
	if h := st.Holder; h != nil {
		who = fmt.Sprintf("pid %d", h.PID)
		if h.Command != "" {
			who += fmt.Sprintf(" (%s)", termtext.Quote(h.Command))
		}
	}
	return fmt.Sprintf("runtime.lock is held by %s, which updates metadata.db as it writes when it runs with a reindex.Keeper; convkit reindex needs the lock: run it once that process stops", who)
}

// deleting reports a conversation whose delete is recorded.
func deleting(c store.ConversationDir) bool {
	if l := c.ConversationLog(); l != nil {
		info, err := l.ReadConversation()
		return err == nil && info.Deleting
	}
	return false
}

// indexedSkip is the skip the index records for dir (storedReason).
func indexedSkip(id, dir, reason string) store.Item {
	if name, rest, ok := strings.Cut(reason, ": "); ok {
		if _, isLog := convlog.ParseName(name); isLog && !strings.ContainsRune(name, filepath.Separator) {
			return store.Item{Kind: store.ItemSkipped, ID: id, Path: filepath.Join(dir, name), Reason: rest}
		}
	}
	return store.Item{Kind: store.ItemSkipped, ID: id, Path: dir, Reason: reason}
}

// Names lists the conversations of s for shell completion, with any index rows.
func Names(ctx context.Context, s *store.Store) ([]index.Summary, error) {
	ids, err := s.ConversationIDs()
	if err != nil {
		return nil, err
	}
	rows := map[string]index.Summary{}
	if db, err := index.OpenRead(ctx, s.IndexPath(), index.ReadOptions{}); err == nil {
		list, err := db.List(ctx, index.ListOptions{All: true})
		db.Close()
		if err == nil {
			for _, r := range list {
				rows[r.ID] = r
			}
		}
	}
	out := make([]index.Summary, len(ids))
	for i, id := range ids {
		out[i] = rows[id]
		out[i].ID = id
	}
	return out, nil
}
