package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/termtext"
)

// Tree is what Walk found under <data-dir>/conversations: Problems are
// entries that break the layout, left to the caller (ItemSkipped, ItemIgnored
// for a stray file, ItemWarning for a second spelling of a generation, in the
// tree all the same and never Current); Temps are temporary
// files an interrupted write left, which a writer holding runtime.lock may
// remove.
type Tree struct {
	Conversations []ConversationDir
	Problems      []Item
	Temps         []string
}

// ConversationDir is one conversation directory named Name; Logs are sorted
// by Base, the conversation log first.
type ConversationDir struct {
	ID, Name, Path string
	Logs           []Log
}

// ConversationLog is c's conversation log, nil when it has none.
func (c ConversationDir) ConversationLog() *Log {
	if len(c.Logs) > 0 && c.Logs[0].IsConversationLog {
		return &c.Logs[0]
	}
	return nil
}

// SessionLogs are c's session logs.
func (c ConversationDir) SessionLogs() []Log {
	if c.ConversationLog() != nil {
		return c.Logs[1:]
	}
	return c.Logs
}

// Log is one log, the conversation's own or session ID's, and its
// Generations by version descending, then by name; Current is the first and
// Path its path.
type Log struct {
	Base              string
	ID                string
	Conversation      string
	IsConversationLog bool
	Generations       []convlog.Name
	Current           convlog.Name
	Path              string
}

// Reasons of the walk's Problems that callers may recognise.
const (
	ReasonSymlink       = "symbolic links are not followed"
	ReasonFlatLog       = "log file outside a conversation directory; expected conversations/<conversation>/<log>"
	ReasonUnexpected    = "unexpected file"
	reasonNotRegular    = "not a regular file"
	reasonNoncanonical  = "noncanonical log file name"
	reasonMixedGenBoth  = "both compressed and plain generations of %s v%d"
	reasonMixedGenZstds = "both .zst and .zstd generations of %s v%d"
)

// GenerationClash is why g, of the same base and version as read (the first
// by name), is reported.
func GenerationClash(read, g convlog.Name) string {
	reason := reasonMixedGenZstds
	if read.Compression != g.Compression {
		reason = reasonMixedGenBoth
	}
	return fmt.Sprintf(reason, g.Base, g.Version)
}

// ErrConversationsDir is wrapped by the error refusing a store whose
// conversations entry is not a directory: the store is broken, not empty.
var ErrConversationsDir = errors.New("the store's conversations entry is not a directory")

// conversationsRoot reports whether the conversations directory root exists
// (missing: an empty store), or refuses what is there instead.
func conversationsRoot(root string) (bool, error) {
	fi, err := os.Lstat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case !fi.IsDir():
		return false, &wordedError{err: ErrConversationsDir, msg: fmt.Sprintf("%s: %s, expected the directory of the store's conversations (conversations/<conversation>/<log>); the store is not read as empty", root, entryKind(fi.Mode()))}
	}
	return true, nil
}

// entryKind names what a directory entry that is not a directory is.
func entryKind(m fs.FileMode) string {
	if m&fs.ModeSymlink != 0 {
		return "a symbolic link (not followed)"
	}
	return durable.Kind(m)
}

// Walk lists the conversations and their logs, classifying every entry by
// its own type (no link is followed); layout violations become Problems, so
// one bad entry does not hide the rest. A log's highest version is its
// current one even when unreadable: falling back would lose what was written
// after it.
func (s *Store) Walk() (*Tree, error) { return s.WalkJobs(1) }

// WalkJobs is Walk listing up to jobs directories at once.
func (s *Store) WalkJobs(jobs int) (*Tree, error) {
	root := s.ConversationsDir()
	ents, err := listRoot(root)
	if err != nil {
		return nil, err
	}
	subs := make([]*Tree, len(ents))
	sem := make(chan struct{}, max(jobs, 1))
	for k, e := range ents {
		if e.problem == nil {
			sem <- struct{}{}
			go func() {
				subs[k] = walkDir(root, e.Dir)
				<-sem
			}()
		}
	}
	for range cap(sem) {
		sem <- struct{}{} // every slot taken: the last walker is done
	}
	t := &Tree{}
	for k, e := range ents {
		if e.problem != nil {
			t.Problems = append(t.Problems, *e.problem)
			continue
		}
		t.Problems = append(t.Problems, subs[k].Problems...)
		t.Temps = append(t.Temps, subs[k].Temps...)
		t.Conversations = append(t.Conversations, subs[k].Conversations...)
	}
	return t, nil
}

// Dir is a conversation directory Dirs listed, for WalkDir.
type Dir struct {
	id, Name string
}

// Dirs is the first half of Walk, for a caller that must not hold every log
// at once: the conversation directories in name order and the problems of
// other entries.
func (s *Store) Dirs() ([]Dir, []Item, error) {
	ents, err := listRoot(s.ConversationsDir())
	if err != nil {
		return nil, nil, err
	}
	var dirs []Dir
	var problems []Item
	for _, e := range ents {
		if e.problem != nil {
			problems = append(problems, *e.problem)
		} else {
			dirs = append(dirs, e.Dir)
		}
	}
	return dirs, problems, nil
}

// WalkDir walks one directory Dirs listed, as Walk does.
func (s *Store) WalkDir(d Dir) *Tree { return walkDir(s.ConversationsDir(), d) }

func walkDir(root string, d Dir) *Tree {
	t := &Tree{}
	dir := filepath.Join(root, d.Name)
	if c, ok := t.walkConversation(d.id, d.Name, dir); ok {
		t.Conversations = append(t.Conversations, c)
	} else if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		t.Problems = nil
	}
	return t
}

type rootEntry struct {
	Dir
	problem *Item
}

// listRoot lists conversations/ at root in name order; a listing error is
// a problem, keeping what was read.
func listRoot(root string) ([]rootEntry, error) {
	if ok, err := conversationsRoot(root); err != nil || !ok {
		return nil, err
	}
	entries, err := os.ReadDir(root)
	out := make([]rootEntry, 0, len(entries)+1)
	if err != nil {
		out = append(out, rootEntry{problem: &Item{Kind: ItemSkipped, Path: root, Reason: termtext.Reason(root, err)}})
	}
	for _, e := range entries {
		if id, reason := entry(e); reason != "" {
			p := walkProblem(filepath.Join(root, e.Name()), reason)
			out = append(out, rootEntry{problem: &p})
		} else {
			out = append(out, rootEntry{Dir: Dir{id: id, Name: e.Name()}})
		}
	}
	return out, nil
}

// entry is the id of a conversation directory in conversations/, or why e
// is a problem.
func entry(e fs.DirEntry) (id, reason string) {
	name := e.Name()
	switch typ := e.Type(); {
	case typ&fs.ModeSymlink != 0:
		return "", ReasonSymlink
	case typ.IsDir():
		id, err := DecodeSegment(name)
		if err == nil {
			return id, ""
		}
		return "", err.Error()
	case !typ.IsRegular():
		return "", reasonNotRegular
	case logShaped(name):
		return "", ReasonFlatLog
	}
	return "", ReasonUnexpected
}

func (t *Tree) problem(path, reason string) {
	t.Problems = append(t.Problems, walkProblem(path, reason))
}

// walkProblem is an entry out of shape: a stray file is ignored, the rest skipped.
func walkProblem(path, reason string) Item {
	if reason == ReasonUnexpected {
		return Item{Kind: ItemIgnored, Path: path, Reason: reason}
	}
	return Item{Kind: ItemSkipped, Path: path, Reason: reason}
}

// logShaped reports whether name ends like a log file, canonical or not.
func logShaped(name string) bool {
	name = strings.TrimSuffix(name, convlog.ZstSuffix)
	name = strings.TrimSuffix(name, convlog.ZstdSuffix)
	return strings.HasSuffix(name, convlog.JSONLSuffix)
}

func (t *Tree) walkConversation(id, name, dir string) (ConversationDir, bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		// Partly read, it would look like a conversation missing logs.
		t.problem(dir, termtext.Reason(dir, err))
		return ConversationDir{}, false
	}
	c := ConversationDir{ID: id, Name: name, Path: dir}
	byBase := map[string]*Log{}
	for _, e := range entries {
		fname := e.Name()
		p := filepath.Join(dir, fname)
		typ := e.Type()
		switch {
		case typ&fs.ModeSymlink != 0:
			t.problem(p, ReasonSymlink)
			continue
		case typ.IsDir():
			// Room for later additions, unless it poses as a log.
			if logShaped(fname) {
				t.problem(p, reasonNotRegular)
			}
			continue
		case !typ.IsRegular():
			t.problem(p, reasonNotRegular)
			continue
		case durable.IsTemp(fname):
			t.Temps = append(t.Temps, p)
			continue
		}
		n, ok := convlog.ParseName(fname)
		if !ok {
			if logShaped(fname) {
				t.problem(p, reasonNoncanonical)
			}
			continue // session.lock, notes and other non-log files
		}
		l := byBase[n.Base]
		if l == nil {
			l = &Log{Base: n.Base, Conversation: id}
			if n.Base == ConversationLogBase {
				l.IsConversationLog = true
			} else if l.ID, err = DecodeBase(n.Base); err != nil {
				t.problem(p, err.Error())
				continue
			}
			byBase[n.Base] = l
		}
		l.Generations = append(l.Generations, n)
	}

	for _, l := range byBase {
		c.Logs = append(c.Logs, *l)
	}
	sort.Slice(c.Logs, func(i, j int) bool {
		a, b := c.Logs[i], c.Logs[j]
		if a.IsConversationLog != b.IsConversationLog {
			return a.IsConversationLog
		}
		return a.Base < b.Base
	})
	for i := range c.Logs {
		l := &c.Logs[i]
		sort.Slice(l.Generations, func(i, j int) bool {
			a, b := l.Generations[i], l.Generations[j]
			if a.Version != b.Version {
				return a.Version > b.Version
			}
			return a.String() < b.String()
		})
		for k := 1; k < len(l.Generations); k++ {
			prev, g := l.Generations[k-1], l.Generations[k]
			if prev.Version != g.Version {
				continue
			}
			t.Problems = append(t.Problems, Item{Kind: ItemWarning, Path: filepath.Join(dir, g.String()), Reason: GenerationClash(prev, g)})
		}
		l.Current = l.Generations[0]
		l.Path = filepath.Join(dir, l.Current.String())
	}
	return c, true
}

// Newest is the latest modification time of c's log files in nanoseconds
// (0: none could be read).
func (c ConversationDir) Newest() int64 {
	var n int64
	for _, l := range c.Logs {
		for _, g := range l.Generations {
			if fi, err := os.Lstat(filepath.Join(c.Path, g.String())); err == nil {
				n = max(n, fi.ModTime().UnixNano())
			}
		}
	}
	return n
}
