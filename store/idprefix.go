package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/convkit/convkit/internal/termtext"
)

// A conversation is named by its whole id or by a unique prefix of at least
// MinIDPrefix characters, as git names commits, and a session likewise within
// its conversation; every command resolves names here.

// MinIDPrefix is the length, in characters, of the shortest prefix that
// names a conversation.
const MinIDPrefix = 4

// ErrAmbiguousID is wrapped by an *AmbiguousIDError.
var ErrAmbiguousID = errors.New("ambiguous id prefix")

// AmbiguousIDError refuses a prefix that more than one conversation id
// (or session id of one conversation) starts with.
type AmbiguousIDError struct {
	Prefix string
	// Conversation is "" for a prefix of conversation ids, else the
	// conversation whose session ids it starts.
	Conversation string
	// Candidates are the ids it could mean, sorted.
	Candidates []string
}

// maxCandidatesShown bounds the ids an *AmbiguousIDError's message names.
const maxCandidatesShown = 10

func (e *AmbiguousIDError) Error() string {
	var q []string
	for i, c := range e.Candidates {
		if i == maxCandidatesShown {
			q = append(q, fmt.Sprintf("and %d more", len(e.Candidates)-i))
			break
		}
		q = append(q, termtext.Quote(c))
	}
	what := "conversation"
	if e.Conversation != "" {
		what = "session of conversation " + termtext.Quote(e.Conversation)
	}
	return fmt.Sprintf("%s names more than one %s: %s", termtext.Quote(e.Prefix), what, strings.Join(q, ", "))
}

func (e *AmbiguousIDError) Unwrap() error { return ErrAmbiguousID }

// ResolveIDs returns the conversation ids refs name, in order: a whole id,
// else a unique prefix of at least MinIDPrefix characters (*AmbiguousIDError
// when shared), else the same against recent delete journals so a rerun says
// "already deleted". A ref that names nothing is returned as it is for the
// caller's own error; conversations/ is listed once.
func (s *Store) ResolveIDs(refs []string) ([]string, error) {
	out := make([]string, len(refs))
	var ids, deleted []string
	listed, journaled := false, false
	for i, ref := range refs {
		out[i] = ref
		if p, err := conversationPath(s.dataDir, ref); err != nil {
			continue // not an id: the caller refuses it
		} else if _, err := os.Lstat(p); err == nil {
			continue
		}
		if utf8.RuneCountInString(ref) < MinIDPrefix {
			continue
		}
		if !listed {
			var err error
			if ids, err = s.ConversationIDs(); err != nil {
				return nil, err
			}
			listed = true
		}
		id, err := byPrefix(ref, ids)
		if err != nil {
			return nil, err
		}
		if id == ref {
			if !journaled {
				if deleted, err = s.journaledIDs(); err != nil {
					return nil, err
				}
				journaled = true
			}
			if id, err = byPrefix(ref, deleted); err != nil {
				return nil, err
			}
		}
		out[i] = id
	}
	return out, nil
}

// journaledIDs are the ids the delete journals name, sorted, each once.
func (s *Store) journaledIDs() ([]string, error) {
	js, err := s.deleteJournals()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, j := range js {
		for _, id := range j.ids {
			if !seen[id] {
				seen[id] = true
				out = append(out, id)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// byPrefix is the one of ids (sorted) that ref is a prefix of, ref itself
// when none is, or an *AmbiguousIDError.
func byPrefix(ref string, ids []string) (string, error) {
	var found []string
	for _, id := range ids {
		if strings.HasPrefix(id, ref) {
			found = append(found, id)
		}
	}
	switch len(found) {
	case 0:
		return ref, nil
	case 1:
		return found[0], nil
	}
	return "", &AmbiguousIDError{Prefix: ref, Candidates: found}
}

// ResolveSessionID returns the session of conversation convID that ref names,
// by whole id or unique prefix as ResolveIDs does; a ref that names none, or
// an unlistable conversation, returns ref for the caller's own error.
func (s *Store) ResolveSessionID(convID, ref string) (string, error) {
	c, _, err := s.WalkConversation(convID)
	if err != nil || utf8.RuneCountInString(ref) < MinIDPrefix {
		return ref, nil
	}
	var ids []string
	for _, l := range c.Logs {
		if l.IsConversationLog {
			continue
		}
		if l.ID == ref {
			return ref, nil
		}
		ids = append(ids, l.ID)
	}
	sort.Strings(ids)
	id, err := byPrefix(ref, ids)
	var amb *AmbiguousIDError
	if errors.As(err, &amb) {
		amb.Conversation = convID
	}
	return id, err
}

// ResolveID is ResolveIDs of one ref.
func (s *Store) ResolveID(ref string) (string, error) {
	ids, err := s.ResolveIDs([]string{ref})
	if err != nil {
		return "", err
	}
	return ids[0], nil
}

// ConversationIDs lists the ids of the conversation directories, sorted,
// from one listing of conversations/ (nothing in them is read): entries
// that are not directories with canonical names are left out.
func (s *Store) ConversationIDs() ([]string, error) {
	root := s.ConversationsDir()
	if ok, err := conversationsRoot(root); err != nil || !ok {
		return nil, err
	}
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, ent := range ents {
		if !ent.IsDir() {
			continue
		}
		if id, err := DecodeSegment(ent.Name()); err == nil {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids, nil
}
