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
		r.idx = &childIndex{root: dirNode{dir: r.dir}, reported: map[string]bool{}}
	}
	x := r.idx
	fi, err := os.Stat(r.dir)
	if err != nil {
		return nil, err
	}
	changed, err := x.root.relist(fi, func(name string) *dirNode { return &dirNode{dir: filepath.Join(r.dir, name)} })
	if err != nil {
		return nil, err
	}
	for _, p := range x.root.kids {
		changed = r.refreshProject(p) || changed
	}
	if changed || x.byParent == nil {
		// Made again only after a refresh changed the index: a migration asks
		// twice for each older session.
		x.byParent = map[string][]*dirNode{}
		for _, p := range x.root.kids {
			for _, s := range p.kids {
				x.byParent[s.parent] = append(x.byParent[s.parent], s)
			}
		}
	}
	var out []string
	for _, s := range x.byParent[parentID] {
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
}

// dirStamp is what says a directory's entries may have changed.
type dirStamp struct {
	mtime, size int64
	ino, nlink  uint64
}

type childIndex struct {
	root     dirNode
	reported map[string]bool // the sessions told to Root.ignored
	// byParent is the sessions by parent, nil after a refresh that
	// changed a session or the sessions.
	byParent map[string][]*dirNode
}

// dirNode is a directory of the index: the root or a project directory
// (kids its directories), or a session directory (parent its header's).
type dirNode struct {
	dir    string
	stamp  dirStamp
	listed bool
	kids   map[string]*dirNode
	parent string
	// read is false while no header could be read (a directory being
	// created): it is read again when its directory changes.
	read bool
}

// relist lists n again when its stamp (fi's) changed: a kid per directory,
// new ones made by mk; links are not traversed.
func (n *dirNode) relist(fi os.FileInfo, mk func(name string) *dirNode) (bool, error) {
	st := stampOf(fi)
	if n.listed && st == n.stamp {
		return false, nil
	}
	entries, err := os.ReadDir(n.dir)
	if err != nil {
		return false, err
	}
	n.stamp, n.listed = st, true
	seen := map[string]bool{}
	if n.kids == nil {
		n.kids = map[string]*dirNode{}
	}
	for _, e := range entries {
		if e.Type().IsDir() {
			seen[e.Name()] = true
			if n.kids[e.Name()] == nil {
				n.kids[e.Name()] = mk(e.Name())
			}
		}
	}
	for name := range n.kids {
		if !seen[name] {
			delete(n.kids, name)
		}
	}
	return true, nil
}

// refreshProject reports whether a session of p, or the set of them, may
// have changed.
func (r *Root) refreshProject(p *dirNode) (changed bool) {
	for _, s := range p.kids {
		if !s.read {
			if fi, err := os.Lstat(s.dir); err == nil && stampOf(fi) != s.stamp {
				r.readSession(s)
				changed = true
			}
		}
	}
	fi, err := os.Lstat(p.dir)
	if err != nil || !fi.IsDir() {
		changed = changed || len(p.kids) > 0
		p.kids, p.listed = nil, false
		return changed
	}
	// An unreadable directory is listed again next time.
	listed, _ := p.relist(fi, func(name string) *dirNode {
		s := &dirNode{dir: filepath.Join(p.dir, name)}
		r.readSession(s)
		return s
	})
	return changed || listed
}

// readSession reads the parent the current generation of s names, unless
// it does not name its place (told to r.ignored once).
func (r *Root) readSession(s *dirNode) {
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
	if err := r.CheckIdentity(path, h); err != nil {
		if h.ParentSession != "" && !r.idx.reported[s.dir] {
			r.idx.reported[s.dir] = true
			if r.ignored != nil {
				r.ignored(s.dir, h.ParentSession, err)
			}
		}
		return
	}
	s.parent = h.ParentSession
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
