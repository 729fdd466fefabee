package reindex

import (
	"context"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/store"
)

// Name is a conversation as shell completion offers it.
type Name struct {
	ID    string
	Title string // "" when the index does not know it
}

// Names lists the conversations of s, sorted by id, with their titles from
// metadata.db, for shell completion, which must answer at once: the ids are
// the conversation directories (store.ConversationIDs: one listing, no log
// read), and a title is the index's row for that id, current or not.
// Without a readable index the titles are empty. It takes no lock and
// writes nothing.
func Names(ctx context.Context, s *store.Store) ([]Name, error) {
	ids, err := s.ConversationIDs()
	if err != nil {
		return nil, err
	}
	titles := map[string]string{}
	if db, err := index.OpenRead(ctx, s.IndexPath(), index.ReadOptions{}); err == nil {
		rows, err := db.List(ctx, index.ListOptions{All: true})
		db.Close()
		if err == nil {
			for _, r := range rows {
				titles[r.ID] = r.Title
			}
		}
	}
	out := make([]Name, len(ids))
	for i, id := range ids {
		out[i] = Name{ID: id, Title: titles[id]}
	}
	return out, nil
}
