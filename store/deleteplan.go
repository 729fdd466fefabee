package store

import (
	"os"
	"path/filepath"
)

// What DeleteAll would do with a conversation (DeletePlanItem.Action).
const (
	DeleteActionDelete      = "delete"          // record the tombstone, then remove the directory
	DeleteActionFinish      = "finish-deletion" // its deletion was recorded: remove the directory
	DeleteActionRemoveEmpty = "remove-empty"    // a killed delete left its directory empty
	DeleteActionAlready     = "already-deleted" // gone, and a killed delete's journal names it
)

// DeletePlanItem is what DeleteAll would do with one conversation, and
// what its directory holds now.
type DeletePlanItem struct {
	ID     string `json:"id"`
	Action string `json:"action"`
	Title  string `json:"title"`
	Path   string `json:"path"`
	// Files and Bytes are the regular files in its directory and their
	// size: what the delete would remove.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
}

// PlanDelete checks convIDs exactly as DeleteAll does and returns what it
// would do with each, in order, writing nothing; a store opened read-only will
// do.
func (s *Store) PlanDelete(convIDs []string, force bool) ([]DeletePlanItem, error) {
	ids, states, _, err := s.checkDeleteAll(convIDs, force)
	if err != nil {
		return nil, err
	}
	out := make([]DeletePlanItem, len(ids))
	for i, id := range ids {
		it := DeletePlanItem{ID: id}
		switch states[i] {
		case deleteLive:
			it.Action = DeleteActionDelete
		case deleteTombstoned:
			it.Action = DeleteActionFinish
		case deleteEmpty:
			it.Action = DeleteActionRemoveEmpty
		case deleteAlready:
			it.Action = DeleteActionAlready
		}
		if it.Path, err = s.conversationDir(id); err != nil {
			return nil, err
		}
		if states[i] == deleteLive || states[i] == deleteTombstoned {
			info, err := s.Conversation(id)
			if err != nil {
				return nil, err
			}
			it.Title = info.Title
			if it.Files, it.Bytes, err = filesIn(it.Path); err != nil {
				return nil, err
			}
		}
		out[i] = it
	}
	return out, nil
}

// filesIn counts the regular files directly in dir and their bytes; a
// conversation directory holds no subdirectory. Links are not followed.
func filesIn(dir string) (int, int64, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	n, size := 0, int64(0)
	for _, ent := range ents {
		fi, err := os.Lstat(filepath.Join(dir, ent.Name()))
		if err != nil {
			return 0, 0, err
		}
		if fi.Mode().IsRegular() {
			n++
			size += fi.Size()
		}
	}
	return n, size, nil
}
