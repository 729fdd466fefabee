package store

import (
	"context"
	"path/filepath"

	"github.com/convkit/convkit/convlog"
)

// at is a read-only handle of dir for the reading methods. These tests
// read layouts that are not all stores yet (a missing conversations
// directory, say), so Open may take dir for a new store: read-only, that
// creates nothing.
func at(dir string) *Store {
	s, err := Open(context.Background(), dir, OpenOptions{Create: CreateAlways})
	if err != nil {
		panic(err)
	}
	return s
}

// lockDir takes runtime.lock of dir (made a store if it is not one) through
// Open, and hands the hold back.
func lockDir(ctx context.Context, dir string, opts LockOptions) (*Lock, error) {
	s, err := Open(ctx, dir, OpenOptions{Lock: opts, Create: CreateAlways})
	if err != nil {
		return nil, err
	}
	return s.Lock(), nil
}

// convLogPath is the path of generation version of conversation convID's
// own log in the store at dataDir.
func convLogPath(dataDir, convID string, version int, c convlog.Compression) (string, error) {
	dir, err := conversationPath(dataDir, convID)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, ConversationLogName(version, c)), nil
}

// sessLogPath is the path of generation version of session sessionID's
// log in conversation convID of the store at dataDir.
func sessLogPath(dataDir, convID, sessionID string, version int, c convlog.Compression) (string, error) {
	dir, err := conversationPath(dataDir, convID)
	if err != nil {
		return "", err
	}
	name, err := SessionLogName(sessionID, version, c)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// readConversationFile replays the conversation log at path, a file of a
// store.
func readConversationFile(path string) (*ConversationInfo, error) {
	l, err := LooseLog(path)
	if err != nil {
		return nil, err
	}
	return l.ReadConversation()
}
