package migrate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/convkit/convkit/internal/dshroot"
	"github.com/convkit/convkit/internal/termtext"
)

// discoverSessions lists the inputs under a sessions root in the runtime's
// layout, in the order the runtime's migration command discovers them:
// one per session directory (its current generation, or the directory
// itself when it has none: skipped), and one failed input per entry that
// breaks the layout. A root that mixes compressions is refused whole.
func discoverSessions(r *dshroot.Root) *tree {
	t := &tree{layout: LayoutDSH, root: r.Dir(), noun: "Session directories or invalid layout entries", dsh: r}
	walked, err := r.Walk()
	if err != nil {
		t.rootErr = err
		return t
	}
	rel := func(p string) string {
		if q, err := filepath.Rel(r.Dir(), p); err == nil {
			return q
		}
		return p
	}
	t.inputs = []*input{}
	for i, e := range walked.Entries {
		in := &input{index: i + 1, version: -1}
		switch {
		case e.Problem != nil:
			in.rel, in.path, in.failure = rel(e.Problem.Path), e.Problem.Path, e.Problem.Reason
		default:
			s := e.Session
			in.rel, in.session = rel(s.Dir), s
			g, ok := s.Current()
			if !ok {
				in.path = s.Dir
				if s.Err == nil {
					in.skip = "no canonical Session generation"
				}
				break
			}
			in.path, in.version = filepath.Join(s.Dir, g.File), g.Version
			if fi, err := os.Lstat(in.path); err == nil {
				in.size = fi.Size()
			}
		}
		t.inputs = append(t.inputs, in)
	}
	if walked.Mixed != nil {
		t.rootErr = walked.Mixed
	}
	return t
}

// sessionProblem is what fails a session directory before its log is
// read: the layout's own refusals, a current generation that is not a
// regular file (never a fallback to a lower one).
func sessionProblem(s *dshroot.Session) error {
	if s.Err != nil {
		return s.Err
	}
	g, ok := s.Current()
	switch {
	case !ok:
		return errors.New("no canonical Session generation")
	case g.Symlink:
		return fmt.Errorf("%s: the current generation is a symbolic link; symbolic links are not followed", filepath.Join(s.Dir, g.File))
	case !g.Regular:
		return fmt.Errorf("%s: the current generation is not a regular file", filepath.Join(s.Dir, g.File))
	}
	return nil
}

// removeStages removes the temporary files a killed convkit upgrade left in
// the input's session directory, holding its session.lock (lock, or taken
// here for the moment): under the lock nobody else writes them. When
// another process holds the lock they stay, for a later run.
func removeStages(rep *report, t *tree, in *input, lock *dshroot.SessionLock) {
	if len(in.session.Temps) == 0 {
		return
	}
	if lock == nil {
		l, err := t.dsh.LockSession(in.session)
		if err != nil {
			rep.logOnly("KEPT %s: temporary files stay while the session is locked: %v", termtext.Quote(in.session.Dir), err)
			return
		}
		defer l.Release()
	}
	for _, p := range in.session.Temps {
		if os.Remove(p) == nil {
			rep.line("Removed %s: a temporary file left by an interrupted write", termtext.Quote(p))
		}
	}
}
