package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/durable"
)

// Names of the entries of a data directory.
const (
	LockFileName         = "runtime.lock"
	IndexFileName        = "metadata.db"
	ConversationsDirName = "conversations"
	// ConversationLogBase is the file base of a conversation's own log. Session
	// ids never encode to it (see EncodeBase).
	ConversationLogBase = "metadata"
)

// Environment variables consulted by ResolveDataDir.
const (
	DataDirEnv     = "CONVKIT_DATA_DIR"
	XDGDataHomeEnv = "XDG_DATA_HOME"
)

// ResolveDataDir picks the data directory: the --data-dir flag, else
// $CONVKIT_DATA_DIR, else $XDG_DATA_HOME/convkit, else
// <home>/.local/share/convkit. Blank or whitespace-only values count as unset,
// and a relative $XDG_DATA_HOME is ignored as the XDG spec requires. The
// result is absolute and clean. getenv nil means os.Getenv.
func ResolveDataDir(flag string, getenv func(string) string, home string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var dir string
	switch {
	case !blank(flag):
		dir = flag
	case !blank(getenv(DataDirEnv)):
		dir = getenv(DataDirEnv)
	case !blank(getenv(XDGDataHomeEnv)) && filepath.IsAbs(getenv(XDGDataHomeEnv)):
		dir = filepath.Join(getenv(XDGDataHomeEnv), "convkit")
	case !blank(home):
		dir = filepath.Join(home, ".local", "share", "convkit")
	default:
		return "", errors.New("cannot locate the data directory: no --data-dir, $" + DataDirEnv +
			", $" + XDGDataHomeEnv + " or home directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("data directory %s: %w", dir, err)
	}
	return filepath.Clean(abs), nil
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

// LockPath is the path of runtime.lock.
func LockPath(dataDir string) string { return filepath.Join(dataDir, LockFileName) }

// IndexPath is the path of the SQLite index.
func IndexPath(dataDir string) string { return filepath.Join(dataDir, IndexFileName) }

// ConversationsDir is the directory holding one directory per conversation.
func ConversationsDir(dataDir string) string {
	return filepath.Join(dataDir, ConversationsDirName)
}

// ConversationPath is the directory of conversation convID (its name is
// EncodeSegment(convID)).
func ConversationPath(dataDir, convID string) (string, error) {
	name, err := EncodeSegment(convID)
	if err != nil {
		return "", fmt.Errorf("conversation id: %w", err)
	}
	return filepath.Join(ConversationsDir(dataDir), name), nil
}

// ConversationLogName is the file name of generation version of a
// conversation's own log.
func ConversationLogName(version int, c convlog.Compression) string {
	return convlog.FileName(ConversationLogBase, version, c)
}

// SessionLogName is the file name of generation version of session
// sessionID's log (its base is EncodeBase(sessionID)).
func SessionLogName(sessionID string, version int, c convlog.Compression) (string, error) {
	base, err := EncodeBase(sessionID)
	if err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	return convlog.FileName(base, version, c), nil
}

// ConversationLogPath is the path of generation version of conversation
// convID's own log.
func ConversationLogPath(dataDir, convID string, version int, c convlog.Compression) (string, error) {
	dir, err := ConversationPath(dataDir, convID)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, ConversationLogName(version, c)), nil
}

// SessionLogPath is the path of generation version of session sessionID's
// log in conversation convID.
func SessionLogPath(dataDir, convID, sessionID string, version int, c convlog.Compression) (string, error) {
	dir, err := ConversationPath(dataDir, convID)
	if err != nil {
		return "", err
	}
	name, err := SessionLogName(sessionID, version, c)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// ErrSymlink is wrapped when a path in the store is a symbolic link: the
// store never follows one, so a link cannot lead a read or a delete outside.
var ErrSymlink = durable.ErrSymlink

// conversationDir is ConversationPath for an existing conversation: it
// refuses a directory entry that is a symbolic link or not a directory. A
// missing directory is not an error here; callers report it.
func conversationDir(dataDir, convID string) (string, error) {
	dir, err := ConversationPath(dataDir, convID)
	if err != nil {
		return "", err
	}
	fi, err := os.Lstat(dir)
	switch {
	case err != nil:
		return dir, nil
	case fi.Mode()&fs.ModeSymlink != 0:
		return "", fmt.Errorf("conversation %q: %s is a symbolic link: %w", convID, dir, ErrSymlink)
	case !fi.IsDir():
		return "", fmt.Errorf("conversation %q: %s is not a directory", convID, dir)
	}
	return dir, nil
}
