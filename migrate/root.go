package migrate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/convkit/convkit/internal/dshroot"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// Layout names how a sessions root is laid out.
type Layout string

// Layouts: by shape; a store's conversations directory (runtime.lock); the
// runtime's sessions root, locked per session (package dshroot).
const (
	LayoutAuto    Layout = "auto"
	LayoutConvkit Layout = "convkit"
	LayoutDSH     Layout = "dsh"
)

// Root is a sessions root as FindRoot recognised it.
type Root struct {
	Dir     string
	Layout  Layout // LayoutConvkit or LayoutDSH
	DataDir string // the store a LayoutConvkit root belongs to
}

// errUnknownLayout: a sessions root in no layout FindRoot knows, or both.
var errUnknownLayout = errors.New("not a sessions root convkit knows")

// FindRoot recognises the sessions root dir from listings alone; convkit's
// shape outside a store is refused, having no lock to take.
func FindRoot(dir string, layout Layout) (Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Root{}, err
	}
	ofStore, err := isStoreConversations(abs)
	if err != nil {
		return Root{}, err
	}
	convkit := Root{Dir: abs, Layout: LayoutConvkit, DataDir: filepath.Dir(abs)}
	dsh := Root{Dir: abs, Layout: LayoutDSH}
	switch layout {
	case LayoutConvkit:
		if ofStore {
			return convkit, nil
		}
		return Root{}, fmt.Errorf("--sessions-dir %s: %w in convkit's layout: only the %s directory of a convkit store (DATA/%s, beside DATA/%s or DATA/%s) can be migrated that way",
			abs, errUnknownLayout, store.ConversationsDirName, store.ConversationsDirName, store.LockFileName, store.IndexFileName)
	case LayoutDSH:
		if ofStore {
			return Root{}, fmt.Errorf("--sessions-dir %s: %w in the dsh layout: it is the %s directory of the convkit store %s, whose lock is its %s; migrate it with --layout convkit",
				abs, errUnknownLayout, store.ConversationsDirName, convkit.DataDir, store.LockFileName)
		}
		return dsh, nil
	case LayoutAuto, "":
	default:
		return Root{}, fmt.Errorf("unknown layout %s", termtext.Quote(string(layout)))
	}
	sh, err := shapeOf(abs)
	if err != nil {
		return Root{}, err
	}
	switch {
	case sh.convkit != "" && sh.dsh != "":
		return Root{}, fmt.Errorf("--sessions-dir %s: %w: it holds both layouts: a convkit conversation directory (%s) and a DSH project directory (%s); migrate each root on its own, or name the layout with --layout",
			abs, errUnknownLayout, sh.convkit, sh.dsh)
	case ofStore && sh.dsh != "":
		return Root{}, fmt.Errorf("--sessions-dir %s: %w: it is the %s directory of the convkit store %s, but holds a DSH project directory (%s); migrate it with --layout convkit, or move the DSH sessions to a root of their own",
			abs, errUnknownLayout, store.ConversationsDirName, convkit.DataDir, sh.dsh)
	case ofStore:
		return convkit, nil
	case sh.convkit != "":
		return Root{}, fmt.Errorf("--sessions-dir %s: %w: it holds convkit conversation directories (%s) but is not the %s directory of a convkit store (beside DATA/%s or DATA/%s), whose lock a migration takes; name the store's %s directory",
			abs, errUnknownLayout, sh.convkit, store.ConversationsDirName, store.LockFileName, store.IndexFileName, store.ConversationsDirName)
	}
	return dsh, nil
}

// isStoreConversations reports whether dir is (or would be) a store's conversations.
func isStoreConversations(dir string) (bool, error) {
	if filepath.Base(dir) != store.ConversationsDirName {
		return false, nil
	}
	return store.IsStore(filepath.Dir(dir))
}

// shape is an entry in convkit's layout and one in the runtime's ("": none).
type shape struct {
	convkit, dsh string
}

// shapeOf finds a directory holding a conversation log (convkit's) and a
// project directory or one holding a session directory (the runtime's).
func shapeOf(dir string) (shape, error) {
	var sh shape
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return sh, nil
	case err != nil:
		return sh, fmt.Errorf("sessions root %s: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(dir, name)
		isDir := e.Type().IsDir()
		switch {
		case sh.dsh == "" && dshroot.IsProjectDirName(name) && (isDir || e.Type()&os.ModeSymlink != 0):
			sh.dsh = name
		case isDir && sh.convkit == "" && store.HoldsConversationLog(p):
			sh.convkit = name
		case isDir && sh.dsh == "" && holdsSessionDir(p):
			sh.dsh = name
		}
		if sh.convkit != "" && sh.dsh != "" {
			break
		}
	}
	return sh, nil
}

// holdsSessionDir reports whether dir holds a directory with a generation.
func holdsSessionDir(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if !e.Type().IsDir() {
			continue
		}
		sub, err := os.ReadDir(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		for _, g := range sub {
			if _, ok := dshroot.ParseGeneration(g.Name()); ok {
				return true
			}
		}
	}
	return false
}

// discoverSessions lists a runtime-layout root's session directories and layout problems.
func discoverSessions(r *dshroot.Root) *tree {
	t := &tree{noun: "Session directories or invalid layout entries", dsh: r}
	walked, err := r.Walk()
	if err != nil {
		t.rootErr = err
		return t
	}
	rel := func(p string) string { return relTo(r.Dir(), p) }
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
		}
		t.inputs = append(t.inputs, in)
	}
	if walked.Mixed != nil {
		t.rootErr = walked.Mixed
	}
	return t
}

// sessionProblem is what fails a session directory before its log is read.
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

// removeStages removes a killed upgrade's temporary files under the session's lock.
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
