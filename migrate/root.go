package migrate

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/display"
	"github.com/convkit/convkit/dshroot"
	"github.com/convkit/convkit/store"
)

// Layout names how a sessions root is laid out.
type Layout string

const (
	// LayoutAuto recognises the layout by the root's shape (FindRoot).
	LayoutAuto Layout = "auto"
	// LayoutConvkit is a store's conversations directory:
	// <data-dir>/conversations/<conversation>/<log>, locked by the store's
	// runtime.lock.
	LayoutConvkit Layout = "convkit"
	// LayoutDSH is the runtime's own sessions root:
	// <root>/<project-dir>/<session-dir>/session[.vN].jsonl[.zstd], locked
	// one session at a time by its session.lock (package dshroot).
	LayoutDSH Layout = "dsh"
)

// ParseLayout accepts "auto", "convkit" and "dsh".
func ParseLayout(s string) (Layout, error) {
	switch l := Layout(s); l {
	case LayoutAuto, LayoutConvkit, LayoutDSH:
		return l, nil
	}
	return "", fmt.Errorf("--layout must be auto, convkit or dsh, not %s", display.Quote(s))
}

// Root is a sessions root as FindRoot recognised it.
type Root struct {
	Dir    string
	Layout Layout // LayoutConvkit or LayoutDSH
	// DataDir is the store a LayoutConvkit root belongs to: the store a
	// migration of the root opens, and whose runtime.lock it takes.
	DataDir string
}

// ErrUnknownLayout is wrapped when a sessions root is in no layout FindRoot
// knows, or in both.
var ErrUnknownLayout = errors.New("not a sessions root convkit knows")

// FindRoot recognises the sessions root dir (migrate --sessions-dir) in
// the layout asked for. It is the one place where a root's layout is
// recognised, and it reads only directory listings.
//
//   - convkit: dir must be the conversations directory of a store; the
//     root's lock is that store's runtime.lock, so a migration never
//     changes files under one root while holding another store's lock.
//   - dsh: dir is the runtime's sessions root; it must not be a store's
//     conversations directory (whose lock is runtime.lock).
//   - auto: by shape. A store's conversations directory, or a directory of
//     conversation directories (each holding metadata[.vN].jsonl[.zst]), is
//     convkit's; a directory of project directories ("--<slug>--" or
//     "_no-cwd", or directories of session directories holding
//     session[.vN].jsonl[.zstd]) is the runtime's. A root showing both, or
//     neither while it holds entries, is refused, saying what was found. An
//     empty or missing directory is the runtime's layout, unless it is a
//     store's conversations directory: the run then says it is empty, or
//     fails on the missing root.
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
			abs, ErrUnknownLayout, store.ConversationsDirName, store.ConversationsDirName, store.LockFileName, store.IndexFileName)
	case LayoutDSH:
		if ofStore {
			return Root{}, fmt.Errorf("--sessions-dir %s: %w in the dsh layout: it is the %s directory of the convkit store %s, whose lock is its %s; migrate it with --layout convkit",
				abs, ErrUnknownLayout, store.ConversationsDirName, convkit.DataDir, store.LockFileName)
		}
		return dsh, nil
	case LayoutAuto, "":
	default:
		return Root{}, fmt.Errorf("unknown layout %s", display.Quote(string(layout)))
	}
	sh, err := shapeOf(abs)
	if err != nil {
		return Root{}, err
	}
	switch {
	case sh.convkit != "" && sh.dsh != "":
		return Root{}, fmt.Errorf("--sessions-dir %s: %w: it holds both layouts: a convkit conversation directory (%s) and a DSH project directory (%s); migrate each root on its own, or name the layout with --layout",
			abs, ErrUnknownLayout, sh.convkit, sh.dsh)
	case ofStore && sh.dsh != "":
		return Root{}, fmt.Errorf("--sessions-dir %s: %w: it is the %s directory of the convkit store %s, but holds a DSH project directory (%s); migrate it with --layout convkit, or move the DSH sessions to a root of their own",
			abs, ErrUnknownLayout, store.ConversationsDirName, convkit.DataDir, sh.dsh)
	case ofStore:
		return convkit, nil
	case sh.convkit != "":
		return Root{}, fmt.Errorf("--sessions-dir %s: %w: it holds convkit conversation directories (%s) but is not the %s directory of a convkit store (beside DATA/%s or DATA/%s), whose lock a migration takes; name the store's %s directory",
			abs, ErrUnknownLayout, sh.convkit, store.ConversationsDirName, store.LockFileName, store.IndexFileName, store.ConversationsDirName)
	case sh.dsh != "", sh.missing, len(sh.other) == 0:
		return dsh, nil
	}
	found := strings.Join(sh.other, ", ")
	if sh.more > 0 {
		found += fmt.Sprintf(" and %d more", sh.more)
	}
	return Root{}, fmt.Errorf("--sessions-dir %s: %w: it holds neither layout: no convkit conversation directory (<conversation>/%s) and no DSH project directory (<project>/<session>/%s); found %s",
		abs, ErrUnknownLayout, convlog.FileName(store.ConversationLogBase, convlog.CurrentVersion, convlog.Zstd),
		dshroot.GenerationName(convlog.CurrentVersion, convlog.Zstd, ""), found)
}

// isStoreConversations reports whether dir is the conversations directory
// of a store (present or not: a store without conversations has none yet).
func isStoreConversations(dir string) (bool, error) {
	if filepath.Base(dir) != store.ConversationsDirName {
		return false, nil
	}
	s, err := store.Open(context.Background(), filepath.Dir(dir), store.OpenOptions{})
	if err == nil {
		s.Close()
		return true, nil
	}
	if errors.Is(err, store.ErrNoStore) {
		return false, nil
	}
	return false, err
}

// shape is what a root's first two levels show.
type shape struct {
	missing bool
	convkit string // an entry in convkit's layout, "" when none
	dsh     string // an entry in the runtime's layout, "" when none
	other   []string
	more    int
}

// maxNamed is how many unrecognised entries a refusal names.
const maxNamed = 5

// shapeOf looks at the root's entries: a directory holding a conversation
// log is convkit's; an entry named as a project directory, or a directory
// of directories holding a session generation, is the runtime's. It stops
// as soon as both are found.
func shapeOf(dir string) (shape, error) {
	var sh shape
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		sh.missing = true
		return sh, nil
	case err != nil:
		return sh, fmt.Errorf("sessions root %s: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Name()
		p := filepath.Join(dir, name)
		isDir := e.Type().IsDir()
		switch {
		case sh.dsh == "" && dshroot.IsProjectDirName(name) && (isDir || e.Type()&fs.ModeSymlink != 0):
			sh.dsh = name
		case isDir && sh.convkit == "" && holdsConversationLog(p):
			sh.convkit = name
		case isDir && sh.dsh == "" && holdsSessionDir(p):
			sh.dsh = name
		case sh.convkit == "" && sh.dsh == "":
			label := name
			if isDir {
				label += "/"
			}
			if len(sh.other) < maxNamed {
				sh.other = append(sh.other, fmt.Sprintf("%s", display.Quote(label)))
			} else {
				sh.more++
			}
		}
		if sh.convkit != "" && sh.dsh != "" {
			break
		}
	}
	sort.Strings(sh.other)
	return sh, nil
}

// holdsConversationLog reports whether dir holds a regular file named as a
// conversation log generation.
func holdsConversationLog(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if n, ok := convlog.ParseName(e.Name()); ok && n.Base == store.ConversationLogBase && e.Type().IsRegular() {
			return true
		}
	}
	return false
}

// holdsSessionDir reports whether dir holds a directory holding a session
// generation.
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
