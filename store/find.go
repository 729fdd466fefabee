package store

import (
	"fmt"
	"path/filepath"
	"sort"
)

// WalkConversation reads one conversation directory the way Walk does.
func WalkConversation(dataDir, convID string) (ConversationDir, []Problem, error) {
	dir, err := conversationDir(dataDir, convID)
	if err != nil {
		return ConversationDir{}, nil, err
	}
	t := &Tree{}
	c, ok := t.walkConversation(convID, filepath.Base(dir), dir)
	if !ok {
		return ConversationDir{}, t.Problems, fmt.Errorf("conversation %q: %s", convID, t.Problems[0])
	}
	return c, t.Problems, nil
}

// FindLog returns the path of the current (highest) generation of a
// conversation's own log, or of one of its session logs when sessionID is
// set. There is no fallback to a lower generation.
func FindLog(dataDir, convID, sessionID string) (string, error) {
	c, _, err := WalkConversation(dataDir, convID)
	if err != nil {
		return "", err
	}
	for _, l := range c.Logs {
		if (sessionID == "" && l.IsConversationLog) || (sessionID != "" && !l.IsConversationLog && l.ID == sessionID) {
			return l.Path, nil
		}
	}
	if sessionID == "" {
		return "", fmt.Errorf("conversation %q (%s) has no conversation log", convID, c.Path)
	}
	return "", fmt.Errorf("conversation %q (%s) has no log for session %q", convID, c.Path, sessionID)
}

// Dependents lists the conversations that read older history from convID
// (forks made after a compaction, transitively through their own forks are
// not included: each names its direct source). Unreadable conversation
// logs are passed over. Sorted.
func Dependents(dataDir, convID string) ([]string, error) {
	tree, err := Walk(dataDir)
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
			info, err := ReadConversationFile(l.Path)
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
