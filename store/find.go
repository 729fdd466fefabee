package store

import (
	"fmt"
	"path/filepath"
	"sort"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/termtext"
)

// WalkConversation reads one conversation directory the way Walk does.
func (s *Store) WalkConversation(convID string) (ConversationDir, []Problem, error) {
	dir, err := s.conversationDir(convID)
	if err != nil {
		return ConversationDir{}, nil, err
	}
	t := &Tree{}
	c, ok := t.walkConversation(convID, filepath.Base(dir), dir)
	if !ok {
		return ConversationDir{}, t.Problems, fmt.Errorf("conversation %s: %s", termtext.Quote(convID), t.Problems[0])
	}
	return c, t.Problems, nil
}

// FindLog returns a conversation's own log, or one of its session logs
// when sessionID is set, at its current (highest) generation. There is no
// fallback to a lower generation.
func (s *Store) FindLog(convID, sessionID string) (Log, error) {
	c, probs, err := s.WalkConversation(convID)
	if err != nil {
		return Log{}, err
	}
	for _, l := range c.Logs {
		if (sessionID == "" && l.IsConversationLog) || (sessionID != "" && !l.IsConversationLog && l.ID == sessionID) {
			return l, nil
		}
	}
	// Name the entry that is there in the log's place but is not a log (a
	// symbolic link, a FIFO): "has no log" alone hid the file at fault.
	why := ""
	for _, p := range probs {
		n, ok := convlog.ParseName(filepath.Base(p.Path))
		if !ok {
			continue
		}
		if id, err := DecodeBase(n.Base); err == nil && ((sessionID == "" && n.Base == ConversationLogBase) || (sessionID != "" && n.Base != ConversationLogBase && id == sessionID)) {
			why += "; " + p.String()
		}
	}
	if sessionID == "" {
		return Log{}, fmt.Errorf("conversation %s (%s) has no conversation log%s", termtext.Quote(convID), c.Path, why)
	}
	return Log{}, fmt.Errorf("conversation %s (%s) has no log for session %s%s", termtext.Quote(convID), c.Path, termtext.Quote(sessionID), why)
}

// Dependents lists the conversations that read older history from convID
// (forks made after a compaction, transitively through their own forks are
// not included: each names its direct source). Unreadable conversation
// logs are passed over. Sorted.
func (s *Store) Dependents(convID string) ([]string, error) {
	tree, err := s.Walk()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range tree.Conversations {
		if c.ID == convID {
			continue
		}
		for _, l := range c.Logs {
			if !l.IsConversationLog {
				continue
			}
			info, err := l.ReadConversation()
			if err != nil || info.Deleting {
				continue
			}
			for _, dep := range Dependencies(info) {
				if dep == convID {
					out = append(out, c.ID)
				}
			}
		}
	}
	sort.Strings(out)
	return out, nil
}
