package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/termtext"
)

// Names of the entries of a data directory.
const (
	LockFileName         = "runtime.lock"
	IndexFileName        = "metadata.db"
	ConversationsDirName = "conversations"
	// ConversationLogBase is the file base of a conversation's own log,
	// which no session id encodes to.
	ConversationLogBase = "metadata"
)

// Environment variables consulted by ResolveDataDir.
const (
	dataDirEnv     = "CONVKIT_DATA_DIR"
	xdgDataHomeEnv = "XDG_DATA_HOME"
)

// ResolveDataDir picks the data directory: the --data-dir flag, else
// $CONVKIT_DATA_DIR, else $XDG_DATA_HOME/convkit (if absolute), else
// <home>/.local/share/convkit, blank counting as unset; getenv nil means
// os.Getenv.
func ResolveDataDir(flag string, getenv func(string) string, home string) (string, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	var dir string
	switch {
	case !blank(flag):
		dir = flag
	case !blank(getenv(dataDirEnv)):
		dir = getenv(dataDirEnv)
	case !blank(getenv(xdgDataHomeEnv)) && filepath.IsAbs(getenv(xdgDataHomeEnv)):
		dir = filepath.Join(getenv(xdgDataHomeEnv), "convkit")
	case !blank(home):
		dir = filepath.Join(home, ".local", "share", "convkit")
	default:
		return "", errors.New("cannot locate the data directory: no --data-dir, $" + dataDirEnv +
			", $" + xdgDataHomeEnv + " or home directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("data directory %s: %w", dir, err)
	}
	return filepath.Clean(abs), nil
}

func blank(s string) bool { return strings.TrimSpace(s) == "" }

// lockPath is the path of runtime.lock.
func lockPath(dataDir string) string { return filepath.Join(dataDir, LockFileName) }

// ConversationsDir is the directory holding one directory per conversation.
func ConversationsDir(dataDir string) string {
	return filepath.Join(dataDir, ConversationsDirName)
}

// conversationPath is conversation convID's directory.
func conversationPath(dataDir, convID string) (string, error) {
	name, err := EncodeSegment(convID)
	if err != nil {
		return "", fmt.Errorf("conversation id: %w", err)
	}
	return filepath.Join(ConversationsDir(dataDir), name), nil
}

// ConversationLogName is the file name of a conversation log generation.
func ConversationLogName(version int, c convlog.Compression) string {
	return convlog.FileName(ConversationLogBase, version, c)
}

// HoldsConversationLog reports whether dir holds a conversation log file.
func HoldsConversationLog(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if n, ok := convlog.ParseName(e.Name()); ok && n.Base == ConversationLogBase && e.Type().IsRegular() {
			return true
		}
	}
	return false
}

// SessionLogName is the file name of a generation of session sessionID's log.
func SessionLogName(sessionID string, version int, c convlog.Compression) (string, error) {
	base, err := EncodeBase(sessionID)
	if err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	return convlog.FileName(base, version, c), nil
}

// conversationDir is ConversationPath refusing a link or a non-directory;
// a missing one is the caller's to report.
func (s *Store) conversationDir(convID string) (string, error) {
	dir, err := conversationPath(s.dataDir, convID)
	if err != nil {
		return "", err
	}
	if _, err := conversationsRoot(s.ConversationsDir()); err != nil {
		return "", err
	}
	fi, err := os.Lstat(dir)
	switch {
	case err != nil:
		return dir, nil
	case fi.Mode()&os.ModeSymlink != 0:
		return "", fmt.Errorf("conversation %s: %s is a symbolic link: %w", termtext.Quote(convID), dir, durable.ErrSymlink)
	case !fi.IsDir():
		return "", fmt.Errorf("conversation %s: %s is not a directory", termtext.Quote(convID), dir)
	}
	return dir, nil
}

// ConfigFileName is the runtime configuration's default name in dataDir.
const ConfigFileName = "config.toml"

// ErrNoStore is wrapped by Open's refusal of a directory that is not a
// store.
var ErrNoStore = errors.New("no store")

// IsStore reports whether dataDir is a store by Open's rule.
func IsStore(dataDir string) (bool, error) {
	st, err := probe(dataDir)
	return err == nil && st.kind == isStore, err
}

type dirKind int

const (
	isStore  dirKind = iota
	isEmpty          // missing, or nothing but the configuration and temporary files
	notStore         // a directory holding something else
	notDir
)

type probed struct {
	kind dirKind
	why  string // for all but isStore
}

// probe tells what dataDir is: a store when it holds conversations,
// metadata.db or runtime.lock.
func probe(dataDir string) (probed, error) {
	fi, err := os.Stat(dataDir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return probed{kind: isEmpty, why: "the directory does not exist"}, nil
	case err != nil:
		return probed{}, err
	case !fi.IsDir():
		return probed{kind: notDir, why: "not a directory"}, nil
	}
	for _, name := range []string{ConversationsDirName, IndexFileName, LockFileName} {
		if _, err := os.Lstat(filepath.Join(dataDir, name)); err == nil {
			return probed{kind: isStore}, nil
		}
	}
	const none = "it holds no " + ConversationsDirName + "/, " + IndexFileName + " or " + LockFileName
	ents, err := os.ReadDir(dataDir)
	if err != nil {
		return probed{kind: notStore, why: none + " (" + err.Error() + ")"}, nil
	}
	if len(ents) == 0 {
		return probed{kind: isEmpty, why: "the directory is empty"}, nil
	}
	for _, e := range ents {
		if e.Name() != ConfigFileName && !durable.IsTemp(e.Name()) {
			return probed{kind: notStore, why: none}, nil
		}
	}
	return probed{kind: isEmpty, why: none}, nil
}

// ConversationsDir is the store's conversations directory.
func (s *Store) ConversationsDir() string { return ConversationsDir(s.dataDir) }

// IndexPath is the path of the store's metadata.db.
func (s *Store) IndexPath() string { return filepath.Join(s.dataDir, IndexFileName) }

// ConversationPath is the directory of conversation convID in the store.
func (s *Store) ConversationPath(convID string) (string, error) {
	return conversationPath(s.dataDir, convID)
}

// TempIndexes lists the temporary databases (with -wal and -shm files) a
// killed rebuild left beside metadata.db.
func (s *Store) TempIndexes() []string {
	ents, err := os.ReadDir(s.dataDir)
	if err != nil {
		return nil
	}
	prefix := "." + IndexFileName + "."
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.Type().IsRegular() && strings.HasPrefix(n, prefix) && (durable.IsTemp(n) || strings.Contains(n, durable.TempSuffix+"-")) {
			out = append(out, filepath.Join(s.dataDir, n))
		}
	}
	return out
}

// NewTempIndex names a free temporary database beside metadata.db for a
// rebuild to rename over it.
func (s *Store) NewTempIndex() (string, error) {
	f, err := durable.CreateTemp(s.dataDir, "."+IndexFileName)
	if err != nil {
		return "", err
	}
	name := f.Name()
	f.Close()
	return name, os.Remove(name)
}

// WalkConversation reads one conversation directory the way Walk does.
func (s *Store) WalkConversation(convID string) (ConversationDir, []Item, error) {
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

// FindLog returns a conversation's own log ("") or session sessionID's at
// its current generation, never falling back to a lower one. A missing
// conversation, or one without its own log, wraps ErrNoConversation; a log
// whose place holds a link wraps durable.ErrSymlink.
func (s *Store) FindLog(convID, sessionID string) (Log, error) {
	c, probs, err := s.WalkConversation(convID)
	if err != nil {
		if dir, derr := conversationPath(s.dataDir, convID); derr == nil {
			if _, serr := os.Lstat(dir); errors.Is(serr, os.ErrNotExist) {
				return Log{}, fmt.Errorf("conversation %s: %w", termtext.Quote(convID), ErrNoConversation)
			}
		}
		return Log{}, err
	}
	mine := func(base string) bool {
		if sessionID == "" {
			return base == ConversationLogBase
		}
		id, err := DecodeBase(base)
		return err == nil && id == sessionID
	}
	for _, l := range c.Logs {
		if mine(l.Base) {
			return l, nil
		}
	}
	// Name the entry in the log's place that is not a log (a link, a FIFO).
	why, kind := "", error(os.ErrNotExist)
	for _, p := range probs {
		if n, ok := convlog.ParseName(filepath.Base(p.Path)); !ok || !mine(n.Base) {
			continue
		}
		fi, err := os.Lstat(p.Path)
		if sessionID == "" && err == nil {
			return Log{}, notALog(p.Path, fi.Mode())
		}
		why += "; " + p.String()
		if p.Reason == ReasonSymlink {
			kind = durable.ErrSymlink
		}
	}
	if sessionID == "" {
		return Log{}, fmt.Errorf("conversation %s: %w", termtext.Quote(convID), ErrNoConversation)
	}
	return Log{}, &wordedError{err: kind, msg: fmt.Sprintf("conversation %s (%s) has no log for session %s%s", termtext.Quote(convID), c.Path, termtext.Quote(sessionID), why)}
}

// notALog refuses an entry in a log's place that is not a regular file.
func notALog(p string, m os.FileMode) error {
	if m&os.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link: %w", p, durable.ErrSymlink)
	}
	return fmt.Errorf("%s: %s (%s)", p, reasonNotRegular, durable.Kind(m))
}
