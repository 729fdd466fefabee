package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/termtext"
)

// Tree is what Walk found under <data-dir>/conversations.
type Tree struct {
	Conversations []ConversationDir
	// Problems are entries that break the layout. Walk reports them and goes
	// on; what to do about them is the caller's decision.
	Problems []Problem
	// Temps are temporary files an interrupted write left in conversation
	// directories: never read; a writer holding runtime.lock may remove them.
	Temps []string
}

// Problem is one entry Walk could not accept.
type Problem struct {
	Path   string
	Reason string
	// Listed: the entry is in the tree all the same (a second spelling
	// of a generation, among its log's Generations but never Current).
	Listed bool
}

func (p Problem) String() string { return p.Path + ": " + p.Reason }

// ConversationDir is one conversation directory.
type ConversationDir struct {
	// ID is the decoded conversation id; Name the directory name on disk.
	ID   string
	Name string
	Path string
	// Logs are sorted by Base, the conversation log first.
	Logs []Log
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

// Log is one log (the conversation's own, or a session's) and its
// generations.
type Log struct {
	// Base is the file base as on disk.
	Base string
	// ID is the decoded session id, "" for the conversation log;
	// Conversation the id of the conversation whose directory holds it.
	ID                string
	Conversation      string
	IsConversationLog bool
	// Generations are sorted by version descending, then by file name.
	Generations []convlog.Name
	// Current is Generations[0] and Path its full path.
	Current convlog.Name
	Path    string
}

// Problem reasons that callers may want to recognise.
const (
	ReasonSymlink       = "symbolic links are not followed"
	ReasonFlatLog       = "log file outside a conversation directory; expected conversations/<conversation>/<log>"
	ReasonUnexpected    = "unexpected file"
	ReasonNotRegular    = "not a regular file"
	ReasonNoncanonical  = "noncanonical log file name"
	reasonMixedGenBoth  = "both compressed and plain generations of %s v%d"
	reasonMixedGenZstds = "both .zst and .zstd generations of %s v%d"
)

// GenerationClash is why g, a generation of the same base and version as
// read (the first by name), is reported: the other compression or zstd
// suffix.
func GenerationClash(read, g convlog.Name) string {
	reason := reasonMixedGenZstds
	if read.Compression != g.Compression {
		reason = reasonMixedGenBoth
	}
	return fmt.Sprintf(reason, g.Base, g.Version)
}

// ErrConversationsDir is wrapped by a *ConversationsDirError.
var ErrConversationsDir = errors.New("the store's conversations entry is not a directory")

// ConversationsDirError refuses a store whose conversations entry is not a
// directory (a file, a FIFO, a link, never followed): such a store is
// broken, not empty, so no command reads it as holding nothing.
type ConversationsDirError struct {
	Path string
	// Found says what is there: "a regular file", "a FIFO", ...
	Found string
}

func (e *ConversationsDirError) Error() string {
	return fmt.Sprintf("%s: %s, expected the directory of the store's conversations (conversations/<conversation>/<log>); the store is not read as empty", e.Path, e.Found)
}

func (e *ConversationsDirError) Unwrap() error { return ErrConversationsDir }

// conversationsRoot reports whether the conversations directory root exists
// (missing: an empty store); anything else in its place is a
// *ConversationsDirError. Every listing and lookup applies it.
func conversationsRoot(root string) (bool, error) {
	fi, err := os.Lstat(root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case !fi.IsDir():
		return false, &ConversationsDirError{Path: root, Found: entryKind(fi.Mode())}
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

// Walk lists the conversations under <data-dir>/conversations and their
// logs. It never follows or stats through a symbolic link: every entry is
// classified by its own type. Layout violations inside become Problems, so
// one bad entry does not hide the rest; a conversation directory removed
// while the walk runs is left out.
// The highest version of a log is authoritative: a reader never falls back
// to a lower one, even when the highest is unreadable or from a future
// format, since that would silently lose what was written after it.
func (s *Store) Walk() (*Tree, error) { return walkRoot(s.ConversationsDir(), 1) }

// WalkJobs is Walk listing up to jobs conversation directories at once. The
// tree is the same, in the same order.
func (s *Store) WalkJobs(jobs int) (*Tree, error) {
	return walkRoot(s.ConversationsDir(), jobs)
}

func walkRoot(root string, jobs int) (*Tree, error) {
	ents, err := listRoot(root)
	if err != nil {
		return nil, err
	}
	subs := make([]*Tree, len(ents))
	var dirs []int
	for k, e := range ents {
		if e.problem == nil {
			dirs = append(dirs, k)
		}
	}
	walk := func(k int) { subs[k] = walkDir(root, ents[k].Dir) }
	if jobs <= 1 || len(dirs) < 2 {
		for _, k := range dirs {
			walk(k)
		}
	} else {
		// Each directory costs a few system calls: list them in
		// parallel.
		var next atomic.Int64
		var wg sync.WaitGroup
		for range min(jobs, len(dirs)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					n := int(next.Add(1)) - 1
					if n >= len(dirs) {
						return
					}
					walk(dirs[n])
				}
			}()
		}
		wg.Wait()
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

// Dir is a conversation directory as the listing of conversations/ names
// it (Dirs), to be walked when its turn comes (WalkDir).
type Dir struct {
	ID, Name string
}

// Dirs is the first half of Walk, for a caller that must not hold every log
// at once (a backup of millions of files): the conversation directories in
// name order and the problems of other entries. WalkDir walks each.
func (s *Store) Dirs() ([]Dir, []Problem, error) {
	ents, err := listRoot(s.ConversationsDir())
	if err != nil {
		return nil, nil, err
	}
	var dirs []Dir
	var problems []Problem
	for _, e := range ents {
		if e.problem != nil {
			problems = append(problems, *e.problem)
		} else {
			dirs = append(dirs, e.Dir)
		}
	}
	return dirs, problems, nil
}

// WalkDir walks one directory Dirs listed, as Walk does (no conversation
// when it cannot be read, no problem when it is gone since).
func (s *Store) WalkDir(d Dir) *Tree { return walkDir(s.ConversationsDir(), d) }

func walkDir(root string, d Dir) *Tree {
	t := &Tree{}
	dir := filepath.Join(root, d.Name)
	if c, ok := t.walkConversation(d.ID, d.Name, dir); ok {
		t.Conversations = append(t.Conversations, c)
	} else if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		t.Problems = nil
	}
	return t
}

// rootEntry is an entry of conversations/: a conversation directory, or a
// problem.
type rootEntry struct {
	Dir
	problem *Problem
}

// listRoot lists conversations/ at root in name order (nothing when it is
// missing); a listing error is a problem first, keeping what was read.
func listRoot(root string) ([]rootEntry, error) {
	if ok, err := conversationsRoot(root); err != nil || !ok {
		return nil, err
	}
	entries, err := os.ReadDir(root)
	out := make([]rootEntry, 0, len(entries)+1)
	if err != nil {
		out = append(out, rootEntry{problem: &Problem{Path: root, Reason: termtext.Reason(root, err)}})
	}
	for _, e := range entries {
		if id, reason := entry(e); reason != "" {
			out = append(out, rootEntry{problem: &Problem{Path: filepath.Join(root, e.Name()), Reason: reason}})
		} else {
			out = append(out, rootEntry{Dir: Dir{ID: id, Name: e.Name()}})
		}
	}
	return out, nil
}

// entry sorts one entry of conversations/: a conversation directory (its
// id), or why it is a problem.
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
		return "", ReasonNotRegular
	case logShaped(name):
		return "", ReasonFlatLog
	}
	return "", ReasonUnexpected
}

func (t *Tree) problem(path, reason string) {
	t.Problems = append(t.Problems, Problem{Path: path, Reason: reason})
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
		// A partly read directory would look like a conversation missing
		// logs, so it is left out.
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
			// Room for later additions; only a directory posing as a log is
			// wrong.
			if logShaped(fname) {
				t.problem(p, ReasonNotRegular)
			}
			continue
		case !typ.IsRegular():
			// FIFOs and devices can block or mislead any reader.
			t.problem(p, ReasonNotRegular)
			continue
		case durable.IsTemp(fname):
			t.Temps = append(t.Temps, p)
			continue
		}
		n, ok := convlog.ParseName(fname)
		if !ok {
			if logShaped(fname) {
				t.problem(p, ReasonNoncanonical)
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
			// The first by name stays Current; the other is reported.
			t.Problems = append(t.Problems, Problem{Path: filepath.Join(dir, g.String()), Reason: GenerationClash(prev, g), Listed: true})
		}
		l.Current = l.Generations[0]
		l.Path = filepath.Join(dir, l.Current.String())
	}
	return c, true
}

// Newest is the latest modification time of c's logs, any generation, in
// nanoseconds (0: none could be read); an rsyncable backup orders by it.
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
