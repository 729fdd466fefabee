package reindex

import (
	"context"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/store"
)

// Names lists the conversations of s, sorted by id, for shell completion,
// which must answer at once: the ids are the conversation directories
// (store.ConversationIDs: one listing, no log read), and each summary is
// the index's row for that id, current or not. A conversation the index
// does not know (every one, without a readable index) has its ID alone.
// It takes no lock and writes nothing.
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
