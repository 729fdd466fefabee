package migrate

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/convkit/convkit/store"
)

// Layout names how a sessions root is laid out.
type Layout string

// LayoutConvkit is a store's conversations directory:
// <data-dir>/conversations/<conversation>/<log>, locked by the store's
// runtime.lock.
const LayoutConvkit Layout = "convkit"

// Root is a sessions root as FindRoot recognised it.
type Root struct {
	Dir    string
	Layout Layout
	// DataDir is the store a LayoutConvkit root belongs to: the store a
	// migration of the root opens, and whose runtime.lock it takes.
	DataDir string
}

// ErrUnknownLayout is wrapped when a sessions root is in no layout FindRoot
// knows.
var ErrUnknownLayout = errors.New("not a sessions root convkit knows")

// FindRoot recognises the sessions root dir (migrate --sessions-dir). It is
// the one place where a root's layout is recognised. Today only convkit's
// layout is: dir must be the conversations directory of a store, and the
// root's lock is that store's runtime.lock, so a migration never changes
// files under one root while holding another store's lock. Another layout
// (the runtime's own sessions root, locked per session) is to be
// recognised here; until then any other root is refused.
func FindRoot(dir string) (Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Root{}, err
	}
	r := Root{Dir: abs, Layout: LayoutConvkit, DataDir: filepath.Dir(abs)}
	if filepath.Base(abs) == store.ConversationsDirName {
		s, err := store.Open(context.Background(), r.DataDir, store.OpenOptions{})
		if err == nil {
			s.Close()
			return r, nil
		}
		if !errors.Is(err, store.ErrNoStore) {
			return Root{}, err
		}
	}
	return Root{}, fmt.Errorf("--sessions-dir %s: %w: only the %s directory of a convkit store (DATA/%s, beside DATA/%s or DATA/%s) can be migrated for now",
		abs, ErrUnknownLayout, store.ConversationsDirName, store.ConversationsDirName, store.LockFileName, store.IndexFileName)
}
