package dshroot

import (
	"os"
	"path/filepath"
	"sort"

	"github.com/convkit/convkit/convlog"
)

// ChildCandidates returns the current generation of every session under the
// root whose header names parentID as its parentSession (upgrade.ChildFinder
// for a layout whose children live in any project directory). The first call
// indexes every session by parent; later calls relist only the directories
// that changed. A newer generation naming another parent is not seen: the
// runtime never rewrites a header's parent.
func (r *Root) ChildCandidates(parentID string) ([]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.idx == nil {
		r.idx = &childIndex{projects: map[string]*projectIndex{}, check: r.CheckIdentity, ignored: r.ignored, reported: map[string]bool{}}
	}
	if err := r.idx.refresh(r.dir); err != nil {
		return nil, err
	}
	if r.idx.byParent == nil {
		// Made again only after a refresh changed the index: a migration asks
		// twice for each older session.
		r.idx.byParent = map[string][]*indexedSession{}
		for _, p := range r.idx.projects {
			for _, s := range p.sessions {
				r.idx.byParent[s.parent] = append(r.idx.byParent[s.parent], s)
			}
		}
	}
	var out []string
	for _, s := range r.idx.byParent[parentID] {
		if path := currentGeneration(s.dir); path != "" {
			out = append(out, path)
		}
	}
	sort.Strings(out)
	return out, nil
}

// OnIgnoredChild sets the function told, once per session directory, of a
// child left out because its header does not name its place; it is called
// with the Root's lock held and must not call the Root.
func (r *Root) OnIgnoredChild(f func(dir, parent string, err error)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ignored = f
	if r.idx != nil {
		r.idx.ignored = f
	}
}

// dirStamp is what says a directory's entries may have changed.
type dirStamp struct {
	mtime, size int64
	ino, nlink  uint64
}

type childIndex struct {
	// check is the root's identity check; ignored is told of the sessions
	// it refuses that name a parent, once each (reported).
	check    func(path string, h *convlog.Header) error
	ignored  func(dir, parent string, err error)
	reported map[string]bool
	root     dirStamp
	listed   bool
	projects map[string]*projectIndex
	// byParent is the sessions by parent, nil after a refresh that
	// changed a session or the sessions.
	byParent map[string][]*indexedSession
}

type projectIndex struct {
	x        *childIndex
	dir      string
	stamp    dirStamp
	listed   bool
	sessions map[string]*indexedSession
}

type indexedSession struct {
	dir    string
	parent string // the current generation's header's parentSession
	// read is false while no header could be read (a directory being
	// created): it is read again when its directory changes.
	read  bool
	stamp dirStamp
}

func (x *childIndex) update(s *indexedSession) {
	fi, err := os.Lstat(s.dir)
	if err != nil {
		return
	}
	s.stamp = stampOf(fi)
	path := currentGeneration(s.dir)
	h, read := headerOf(path)
	s.parent, s.read = "", read
	if h == nil || h.Type != convlog.SessionLog {
		return
	}
	if err := x.check(path, h); err != nil {
		if h.ParentSession != "" && !x.reported[s.dir] {
			x.reported[s.dir] = true
			if x.ignored != nil {
				x.ignored(s.dir, h.ParentSession, err)
			}
		}
		return
	}
	s.parent = h.ParentSession
}

// refresh lists again what changed since the last call.
func (x *childIndex) refresh(root string) error {
	fi, err := os.Stat(root)
	if err != nil {
		return err
	}
	if st := stampOf(fi); !x.listed || st != x.root {
		entries, err := os.ReadDir(root)
		if err != nil {
			return err
		}
		x.root, x.listed = st, true
		x.byParent = nil
		syncDirs(x.projects, entries, func(name string) *projectIndex {
			return &projectIndex{x: x, dir: filepath.Join(root, name), sessions: map[string]*indexedSession{}}
		})
	}
	for _, p := range x.projects {
		if p.refresh() {
			x.byParent = nil
		}
	}
	return nil
}

// refresh reports whether a session, or the set of sessions, may have changed.
func (p *projectIndex) refresh() (changed bool) {
	for _, s := range p.sessions {
		if !s.read {
			if fi, err := os.Lstat(s.dir); err == nil && stampOf(fi) != s.stamp {
				p.x.update(s)
				changed = true
			}
		}
	}
	fi, err := os.Lstat(p.dir)
	if err != nil || !fi.IsDir() {
		changed = changed || len(p.sessions) > 0
		p.sessions = map[string]*indexedSession{}
		p.listed = false
		return changed
	}
	st := stampOf(fi)
	if p.listed && st == p.stamp {
		return changed
	}
	entries, err := os.ReadDir(p.dir)
	if err != nil {
		return changed // listed again next time
	}
	changed = true
	p.stamp, p.listed = st, true
	syncDirs(p.sessions, entries, func(name string) *indexedSession {
		s := &indexedSession{dir: filepath.Join(p.dir, name)}
		p.x.update(s)
		return s
	})
	return changed
}

// syncDirs makes m hold the directories of entries, a new one made by mk,
// and nothing else; links are not traversed.
func syncDirs[T any](m map[string]T, entries []os.DirEntry, mk func(name string) T) {
	seen := map[string]bool{}
	for _, e := range entries {
		if e.Type().IsDir() {
			seen[e.Name()] = true
			if _, ok := m[e.Name()]; !ok {
				m[e.Name()] = mk(e.Name())
			}
		}
	}
	for name := range m {
		if !seen[name] {
			delete(m, name)
		}
	}
}

// currentGeneration is the path of the highest generation in dir when it
// is a regular file, else "".
func currentGeneration(dir string) string {
	if g, ok := walkSession("", "", dir).Current(); ok && g.Regular {
		return filepath.Join(dir, g.File)
	}
	return ""
}

// headerOf reads the header of the log at path; read is false when there
// is no log or its header cannot be read.
func headerOf(path string) (h *convlog.Header, read bool) {
	if path == "" {
		return nil, false
	}
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		return nil, false
	}
	defer r.Close()
	return r.Header(), true
}
