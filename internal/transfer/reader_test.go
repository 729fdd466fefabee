package transfer

import (
	"context"
	"testing"

	"github.com/convkit/convkit/store"
)

// reader opens the store in dir read-only for a test's reads.
func reader(t testing.TB, dir string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), dir, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}
