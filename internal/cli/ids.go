package cli

import (
	"errors"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/store"
)

// resolveIDs returns the conversations refs name in s: whole ids, or
// prefixes of at least store.MinIDPrefix characters (store.ResolveIDs). A
// prefix more than one id starts with is a usage error (exit 2) that lists
// them; nothing has been changed.
func resolveIDs(c *ucli.Context, s *store.Store, refs []string) ([]string, error) {
	ids, err := s.ResolveIDs(refs)
	var amb *store.AmbiguousIDError
	if errors.As(err, &amb) {
		return nil, usageWithHint(c, "give more of the id ('convkit list --all' lists them)", "conversation id %s", amb.Error())
	}
	return ids, err
}

// resolveSessionID is resolveIDs of a session of conversation convID
// (store.ResolveSessionID).
func resolveSessionID(c *ucli.Context, s *store.Store, convID, ref string) (string, error) {
	id, err := s.ResolveSessionID(convID, ref)
	var amb *store.AmbiguousIDError
	if errors.As(err, &amb) {
		return "", usageWithHint(c, "give more of the id", "session id %s", amb.Error())
	}
	return id, err
}
