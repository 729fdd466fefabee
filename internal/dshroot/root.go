package dshroot

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// Root is an open sessions root, safe for concurrent use; sessions are
// locked one at a time (LockSession).
type Root struct {
	dir string

	mu      sync.Mutex
	idx     *childIndex                         // built on the first ChildCandidates
	ignored func(dir, parent string, err error) // OnIgnoredChild
}

// Open opens the sessions root dir, checking and creating nothing (Walk does).
func Open(dir string) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("sessions root %s: %w", dir, err)
	}
	return &Root{dir: abs}, nil
}

// Dir is the root's absolute path.
func (r *Root) Dir() string { return r.dir }

// Reasons Walk gives for entries that break the layout, in the runtime's words.
const (
	ReasonProjectSymlink = "project symbolic links are not traversed"
	ReasonSessionSymlink = "Session symbolic links are not traversed"
	ReasonFlatFile       = "unsupported flat-file layout; expected project/session/generation"
)

// Tree is what Walk found, in the runtime's order (by name, depth first).
type Tree struct {
	Entries []Entry
	// Compression is the first generation's (none: zstd, the runtime's).
	Compression convlog.Compression
	Mixed       *MixedError // generations of both compressions: refused whole
}

// Entry is a session directory, or an entry that breaks the layout.
type Entry struct {
	Session *Session
	Problem *store.Item
}

// Session is one session directory.
type Session struct {
	Project string // the project directory's name
	Name    string // the session directory's name
	ID      string // Name decoded; "" when it does not decode
	Dir     string
	// Generations are the entries named so, highest (current) first.
	Generations []Generation
	// Temps are a killed convkit upgrade's (removed only under session.lock).
	Temps []string
	// Err: a noncanonical name, an id held twice, an unreadable directory.
	Err error
}

// Generation is one entry of a session directory named as a generation.
type Generation struct {
	convlog.Name
	File    string // the entry's name
	Regular bool   // if not, as the highest it is still current (and fails)
	Symlink bool
}

// Current is the highest canonical generation.
func (s *Session) Current() (Generation, bool) {
	if len(s.Generations) == 0 {
		return Generation{}, false
	}
	return s.Generations[0], true
}

// Path is the current generation's path, "" when there is none.
func (s *Session) Path() string {
	if g, ok := s.Current(); ok {
		return filepath.Join(s.Dir, g.File)
	}
	return ""
}

// MixedError refuses a root holding generations of both compressions.
type MixedError struct {
	Path        string // the first generation of the other compression
	First       string // the generation that set the root's compression
	Compression convlog.Compression
}

func (e *MixedError) Error() string {
	uses := ".jsonl"
	if e.Compression == convlog.Plain {
		uses = ".jsonl.zstd"
	}
	return fmt.Sprintf("session artifact %s uses %s, but this root's compression is %s (as %s): one root holds one compression; move the sessions of the other compression to a separate root",
		termtext.Quote(e.Path), uses, termtext.Quote(e.Compression.String()), termtext.Quote(e.First))
}

// Walk lists the root without following a link below it; entries breaking
// the layout are in Entries, so one does not hide the rest.
func (r *Root) Walk() (*Tree, error) {
	fi, err := os.Stat(r.dir)
	if err != nil {
		return nil, fmt.Errorf("sessions root %s: %w", r.dir, termtext.Bare(err))
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("sessions root %s is not a directory", r.dir)
	}
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, fmt.Errorf("sessions root %s: %w", r.dir, termtext.Bare(err))
	}
	t := &Tree{Compression: convlog.Zstd}
	t.scan(r.dir, entries, ReasonProjectSymlink, t.walkProject)
	t.markDuplicates()
	t.checkCompression()
	return t, nil
}

func (t *Tree) problem(path, reason string) {
	t.Entries = append(t.Entries, Entry{Problem: &store.Item{Kind: store.ItemSkipped, Path: path, Reason: reason}})
}

func (t *Tree) walkProject(name, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		// Not a project missing sessions: one failed entry.
		t.problem(dir, termtext.Bare(err).Error())
		return
	}
	t.scan(dir, entries, ReasonSessionSymlink, func(session, p string) {
		t.Entries = append(t.Entries, Entry{Session: walkSession(name, session, p)})
	})
}

// scan judges the entries of the root or a project directory; walk takes the directories.
func (t *Tree) scan(dir string, entries []os.DirEntry, linkReason string, walk func(name, path string)) {
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		switch typ := e.Type(); {
		case typ&os.ModeSymlink != 0:
			t.problem(p, linkReason)
		case typ.IsDir():
			walk(e.Name(), p)
		case typ.IsRegular() && logShaped(e.Name()):
			t.problem(p, ReasonFlatFile)
		}
	}
}

func walkSession(project, name, dir string) *Session {
	s := &Session{Project: project, Name: name, Dir: dir}
	if id, err := DecodeSessionDir(name); err != nil {
		s.Err = err
	} else {
		s.ID = id
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		if s.Err == nil {
			s.Err = fmt.Errorf("session directory %s: %w", dir, termtext.Bare(err))
		}
		return s
	}
	for _, e := range entries {
		fname := e.Name()
		typ := e.Type()
		if n, ok := ParseGeneration(fname); ok {
			s.Generations = append(s.Generations, Generation{Name: n, File: fname, Regular: typ.IsRegular(), Symlink: typ&os.ModeSymlink != 0})
			continue
		}
		if typ.IsRegular() && isStage(fname) {
			s.Temps = append(s.Temps, filepath.Join(dir, fname))
		}
		// session.lock, the runtime's temporary files and others stay.
	}
	sort.Slice(s.Generations, func(i, j int) bool {
		a, b := s.Generations[i], s.Generations[j]
		if a.Version != b.Version {
			return a.Version > b.Version
		}
		return a.File < b.File
	})
	return s
}

// isStage reports whether name is a convkit upgrade's temporary file:
// durable's ".<successor name>.<16 hex>.tmp".
func isStage(name string) bool {
	if !durable.IsTemp(name) || !strings.HasPrefix(name, "."+GenerationBase+".") {
		return false
	}
	stem := strings.TrimSuffix(name[1:], durable.TempSuffix)
	dot := strings.LastIndexByte(stem, '.')
	if dot < 0 || len(stem)-dot-1 != 16 {
		return false
	}
	_, ok := ParseGeneration(stem[:dot])
	return ok
}

// markDuplicates fails every session whose id another project holds too.
func (t *Tree) markDuplicates() {
	byID := map[string][]*Session{}
	for _, e := range t.Entries {
		if s := e.Session; s != nil && s.ID != "" {
			byID[s.ID] = append(byID[s.ID], s)
		}
	}
	for id, ss := range byID {
		if len(ss) < 2 {
			continue
		}
		for _, s := range ss {
			if s.Err == nil {
				s.Err = fmt.Errorf("duplicate JSONL session id %s appears in multiple project directories", termtext.Quote(id))
			}
		}
	}
}

// checkCompression sets the root's compression from the first generation, and Mixed.
func (t *Tree) checkCompression() {
	var first string
	for _, e := range t.Entries {
		s := e.Session
		if s == nil {
			continue
		}
		for _, g := range s.Generations {
			p := filepath.Join(s.Dir, g.File)
			if first == "" {
				first, t.Compression = p, g.Compression
				continue
			}
			if g.Compression != t.Compression && t.Mixed == nil {
				t.Mixed = &MixedError{Path: p, First: first, Compression: t.Compression}
			}
		}
	}
}
