package dshroot

import (
	"os"
	"path/filepath"
	"sort"

	"github.com/convkit/convkit/convlog"
)

// ChildCandidates returns the current generation of every session whose
// header names parentID as its parent (upgrade.ChildFinder); later calls
// relist only the directories that changed, as a header's parent never does.
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
		// Only after a change: a migration asks twice per older session.
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

// OnIgnoredChild sets the function told once of each child whose header names
// another place; it runs under the Root's lock.
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
	reported map[string]bool       // the sessions told to Root.ignored
	byParent map[string][]*dirNode // nil after a change
}

// dirNode is the root, a project directory (kids) or a session directory (parent).
type dirNode struct {
	dir    string
	stamp  dirStamp
	listed bool
	kids   map[string]*dirNode
	parent string
	read   bool // a header was read; if not, it is read again on a change
}

// relist lists n again when its stamp changed: a kid per directory, new ones by mk.
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

// refreshProject reports whether p's sessions may have changed.
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

// readSession reads the parent s's current generation names if it names its place.
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

// currentGeneration is the highest generation in dir if regular, else "".
func currentGeneration(dir string) string {
	if g, ok := walkSession("", "", dir).Current(); ok && g.Regular {
		return filepath.Join(dir, g.File)
	}
	return ""
}

// headerOf reads the header of the log at path (read false: it cannot).
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
