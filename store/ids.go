package store

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/convkit/convkit/internal/termtext"
)

// Ids become file names with DSH's encodeSegment escaping per UTF-16 code
// unit, byte-identical to DSH's: [A-Za-z0-9._-] stays, every other unit
// becomes "~" and 4 uppercase hex digits. Decoding accepts only the canonical
// spelling, so no two names mean the same id.

// metadataEscaped keeps a session named "metadata" apart from the
// conversation log.
const metadataEscaped = "~006Detadata"

// EncodeSegment encodes id as a directory name exactly like DSH
// encodeSegment, escaping "." and "..".
func EncodeSegment(id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	switch id {
	case ".":
		return "~002E", nil
	case "..":
		return "~002E~002E", nil
	}
	return escape(id, false), nil
}

// DecodeSegment inverts EncodeSegment, refusing names it would not produce.
func DecodeSegment(name string) (string, error) {
	return decodeCanonical(name, "directory name", EncodeSegment)
}

// decodeCanonical unescapes name, a what, if encode gives it back.
func decodeCanonical(name, what string, encode func(string) (string, error)) (string, error) {
	if id, ok := unescape(name); ok {
		if enc, err := encode(id); err == nil && enc == name {
			return id, nil
		}
	}
	return "", fmt.Errorf("noncanonical %s %s", what, termtext.Quote(name))
}

// EncodeBase encodes id as the base of a log file name: unlike
// EncodeSegment it escapes every '.', so "<base>[.vN].jsonl[.zst]" parses one
// way, and spells the id "metadata" apart from ConversationLogBase.
func EncodeBase(id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	if id == ConversationLogBase {
		return metadataEscaped, nil
	}
	return escape(id, true), nil
}

// DecodeBase inverts EncodeBase, refusing names it would not produce,
// "metadata" too.
func DecodeBase(name string) (string, error) {
	return decodeCanonical(name, "log file base", EncodeBase)
}

func checkID(id string) error {
	if id == "" {
		return errors.New("cannot encode an empty path segment")
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("cannot encode id %s: not valid UTF-8", termtext.Quote(id))
	}
	return nil
}

func literal(u uint16, escapeDot bool) bool {
	switch {
	case 'A' <= u && u <= 'Z', 'a' <= u && u <= 'z', '0' <= u && u <= '9':
		return true
	case u == '-' || u == '_':
		return true
	case u == '.':
		return !escapeDot
	}
	return false
}

// allLiteral reports whether every byte of s is a unit literal keeps (an
// ASCII byte is one UTF-16 unit).
func allLiteral(s string, escapeDot bool) bool {
	for i := 0; i < len(s); i++ {
		if !literal(uint16(s[i]), escapeDot) {
			return false
		}
	}
	return true
}

func escape(id string, escapeDot bool) string {
	if allLiteral(id, escapeDot) {
		return id // the common case
	}
	var b strings.Builder
	b.Grow(len(id))
	for _, u := range utf16.Encode([]rune(id)) {
		if literal(u, escapeDot) {
			b.WriteByte(byte(u))
			continue
		}
		fmt.Fprintf(&b, "~%04X", u)
	}
	return b.String()
}

// unescape replaces each "~XXXX" by its UTF-16 unit and decodes the result
// leniently; callers re-encode and compare to reject noncanonical spellings.
func unescape(name string) (string, bool) {
	if allLiteral(name, false) {
		return name, true
	}
	if !utf8.ValidString(name) {
		return "", false
	}
	units := make([]uint16, 0, len(name))
	for i := 0; i < len(name); {
		if name[i] == '~' {
			if i+5 > len(name) {
				return "", false
			}
			u, err := strconv.ParseUint(name[i+1:i+5], 16, 16)
			if err != nil {
				return "", false
			}
			units = append(units, uint16(u))
			i += 5
			continue
		}
		r, size := utf8.DecodeRuneInString(name[i:])
		units = utf16.AppendRune(units, r)
		i += size
	}
	return string(utf16.Decode(units)), true
}

// minIDPrefix is the shortest prefix, in characters, that names a
// conversation (or a session within its conversation), as git names commits.
const minIDPrefix = 4

// AmbiguousIDError refuses a prefix of more than one conversation id, or
// session id of conversation; candidates are sorted.
type AmbiguousIDError struct {
	prefix, conversation string
	candidates           []string
}

// maxCandidatesShown bounds the ids an *AmbiguousIDError's message names.
const maxCandidatesShown = 10

func (e *AmbiguousIDError) Error() string {
	var q []string
	for i, c := range e.candidates {
		if i == maxCandidatesShown {
			q = append(q, fmt.Sprintf("and %d more", len(e.candidates)-i))
			break
		}
		q = append(q, termtext.Quote(c))
	}
	what := "conversation"
	if e.conversation != "" {
		what = "session of conversation " + termtext.Quote(e.conversation)
	}
	return fmt.Sprintf("%s names more than one %s: %s", termtext.Quote(e.prefix), what, strings.Join(q, ", "))
}

// ResolveIDs returns the conversation ids refs name: a whole id, else a
// unique prefix of at least 4 characters, else the same among the
// delete journals' ids; a ref that names nothing is returned as it is.
func (s *Store) ResolveIDs(refs []string) ([]string, error) {
	out := make([]string, len(refs))
	listed, journaled := sync.OnceValues(s.ConversationIDs), sync.OnceValues(s.journaledIDs)
	for i, ref := range refs {
		out[i] = ref
		if p, err := conversationPath(s.dataDir, ref); err != nil {
			continue // not an id: the caller refuses it
		} else if _, err := os.Lstat(p); err == nil {
			continue
		}
		if utf8.RuneCountInString(ref) < minIDPrefix {
			continue
		}
		ids, err := listed()
		if err != nil {
			return nil, err
		}
		id, err := byPrefix(ref, ids)
		if err != nil {
			return nil, err
		}
		if id == ref {
			deleted, err := journaled()
			if err != nil {
				return nil, err
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
	var out []string
	for _, j := range js {
		out = append(out, j.ids...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// byPrefix is the one of ids (sorted) ref is a prefix of, else ref.
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
	return "", &AmbiguousIDError{prefix: ref, candidates: found}
}

// ResolveSessionID returns the session of convID that ref names as
// ResolveIDs does, else ref for the caller's own error.
func (s *Store) ResolveSessionID(convID, ref string) (string, error) {
	c, _, err := s.WalkConversation(convID)
	if err != nil || utf8.RuneCountInString(ref) < minIDPrefix {
		return ref, nil
	}
	var ids []string
	for _, l := range c.SessionLogs() {
		if l.ID == ref {
			return ref, nil
		}
		ids = append(ids, l.ID)
	}
	sort.Strings(ids)
	id, err := byPrefix(ref, ids)
	var amb *AmbiguousIDError
	if errors.As(err, &amb) {
		amb.conversation = convID
	}
	return id, err
}

// ConversationIDs lists the ids of the conversation directories, sorted.
func (s *Store) ConversationIDs() ([]string, error) {
	dirs, _, err := s.Dirs()
	ids := make([]string, len(dirs))
	for i, d := range dirs {
		ids[i] = d.id
	}
	sort.Strings(ids)
	return ids, err
}
