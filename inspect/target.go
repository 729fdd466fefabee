package inspect

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/convlog/upgrade"
	"github.com/convkit/convkit/internal/dshroot"
	"github.com/convkit/convkit/store"
)

// Target is the log a path names, and where its subagent children are.
type Target struct {
	Path     string
	Warnings []string            // the other generations of its version beside it, not read
	children upgrade.ChildFinder // nil for a log with no place
	root     *dshroot.Root       // the runtime's sessions root the log sits in
	convkit  bool                // the log sits in a convkit conversation directory
	// log is set for a log named by its ids in a store, whose header must
	// name the log its place implies (store.Log.Open refuses another); a
	// path is read whatever its header names (CheckPlace warns).
	log      *store.Log
	held     *os.File // the unlinked copy of stdin (Stdin); Path only names it
	heldSize int64
}

// StoreTarget is the target of l, a log of a store named by its ids.
func StoreTarget(l store.Log) (*Target, error) {
	path := l.Path
	t, err := Resolve(path)
	if err != nil {
		return nil, err
	}
	t.log = &l
	read, ok := convlog.ParseName(filepath.Base(path))
	if !ok {
		return t, nil
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if n, ok := convlog.ParseName(e.Name()); ok && e.Name() != filepath.Base(path) && n.Base == read.Base && n.Version == read.Version {
			t.Warnings = append(t.Warnings, fmt.Sprintf("%s: %s; %s is read", filepath.Join(filepath.Dir(path), e.Name()),
				store.GenerationClash(read, n), filepath.Base(path)))
		}
	}
	return t, nil
}

// Close releases the copy of stdin a Stdin target reads.
func (t *Target) Close() error {
	if t.held == nil {
		return nil
	}
	return t.held.Close()
}

func (t *Target) open(opts convlog.ReaderOptions) (*convlog.Reader, error) {
	if t.log != nil {
		return t.log.Open(opts)
	}
	if t.held == nil {
		return convlog.Open(t.Path, opts)
	}
	return convlog.NewReader(t.held, t.heldSize, t.Path, opts)
}

// OpenV4 opens the target's log upgraded in memory to version 4, read by
// the same pipeline as the other modes.
func (t *Target) OpenV4(opts upgrade.Options) (*upgrade.Reader, error) {
	src, err := t.open(convlog.ReaderOptions{WantType: opts.WantType, WantID: opts.WantID})
	if err != nil {
		return nil, err
	}
	return upgrade.FromReader(src, t.Path, opts)
}

// Resolve names the log at path: a log file, a runtime session directory's
// current generation or a conversation directory's log; no link is followed.
func Resolve(path string) (*Target, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return targetOf(path), nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	type gen struct {
		name string
		n    convlog.Name
		typ  os.FileMode
	}
	var sessions, conversation []gen
	bases := map[string]bool{}
	for _, e := range entries {
		n, ok := convlog.ParseName(e.Name())
		if !ok {
			continue
		}
		g := gen{name: e.Name(), n: n, typ: e.Type()}
		switch {
		case n.Base == dshroot.GenerationBase:
			sessions = append(sessions, g)
		case n.Base == store.ConversationLogBase:
			conversation = append(conversation, g)
		default:
			bases[n.Base] = true
		}
	}
	gens := sessions
	switch {
	case len(sessions) > 0 && len(conversation) > 0:
		return nil, fmt.Errorf("%s holds both session generations (session[.vN].jsonl…) and a conversation log (metadata[.vN].jsonl…): name the log file", path)
	case len(conversation) > 0:
		gens = conversation
	case len(sessions) == 0 && len(bases) > 0:
		return nil, fmt.Errorf("%s holds the logs of %d sessions but no session generation or conversation log: name the log file", path, len(bases))
	case len(sessions) == 0:
		return nil, fmt.Errorf("%s holds no log: neither a session directory (session[.vN].jsonl[.zstd]) nor a conversation directory (metadata[.vN].jsonl[.zst])", path)
	}
	slices.SortFunc(gens, func(a, b gen) int {
		return cmp.Or(cmp.Compare(b.n.Version, a.n.Version), cmp.Compare(a.name, b.name))
	})
	cur := gens[0]
	p := filepath.Join(path, cur.name)
	switch {
	case cur.typ&os.ModeSymlink != 0:
		return nil, fmt.Errorf("%s: the current generation is a symbolic link, which is not followed (a lower generation is never read instead)", p)
	case !cur.typ.IsRegular():
		return nil, fmt.Errorf("%s: the current generation is not a regular file (a lower generation is never read instead)", p)
	}
	t := targetOf(p)
	// The same version twice: the first by name is read, as the store's
	// walk reads it.
	for k := 1; k < len(gens) && gens[k].n.Version == cur.n.Version; k++ {
		t.Warnings = append(t.Warnings, fmt.Sprintf("%s: %s; %s is read", filepath.Join(path, gens[k].name),
			store.GenerationClash(gens[k-1].n, gens[k].n), cur.name))
	}
	return t, nil
}

// targetOf tells the layout of path: the runtime's (its root three levels up)
// for a generation in a project directory, else children beside it.
func targetOf(path string) *Target {
	t := &Target{Path: path, children: upgrade.DirChildren(filepath.Dir(path))}
	abs, err := filepath.Abs(path)
	if err != nil {
		return t
	}
	project := filepath.Dir(filepath.Dir(abs))
	if _, ok := dshroot.ParseGeneration(filepath.Base(abs)); ok && dshroot.IsProjectDirName(filepath.Base(project)) {
		if r, err := dshroot.Open(filepath.Dir(project)); err == nil {
			t.root, t.children = r, r
			return t
		}
	}
	if n, ok := convlog.ParseName(filepath.Base(abs)); ok {
		if n.Base == store.ConversationLogBase || store.HoldsConversationLog(filepath.Dir(abs)) {
			t.convkit = true
		}
	}
	return t
}

// CheckPlace checks that the header of a log given by path names its place.
func (t *Target) CheckPlace() error {
	switch {
	case t.log != nil || t.held != nil:
		return nil
	case t.convkit:
		l, err := store.LooseLog(t.Path)
		if err != nil {
			return nil
		}
		r, err := l.Open(convlog.ReaderOptions{})
		var ie *convlog.IdentityError
		if errors.As(err, &ie) {
			return err
		}
		if err == nil {
			r.Close()
		}
		return nil
	case t.root == nil:
		return nil
	}
	abs, err := filepath.Abs(t.Path)
	if err != nil {
		return err
	}
	var ie *dshroot.IdentityError
	if err := t.root.CheckLog(abs); errors.As(err, &ie) {
		return err
	}
	return nil
}

// openUpgraded opens t's log upgraded in memory with the children found; note
// says how, warnings name the children that could not be read.
func openUpgraded(t *Target) (r *upgrade.Reader, note string, warnings []string, err error) {
	hr, err := t.open(convlog.ReaderOptions{})
	if err != nil {
		return nil, "", nil, err
	}
	h := hr.Header()
	hr.Close()
	children := "its subagent children were not looked for (the log has no place)"
	var facts []upgrade.ChildFact
	if h.Version < convlog.CurrentVersion && h.Type == convlog.SessionLog && t.children != nil {
		if facts, err = upgrade.CollectChildrenFrom(t.children, h.ID); err != nil {
			return nil, "", nil, fmt.Errorf("%s: finding its subagent children: %w", t.Path, err)
		}
		children, warnings = fmt.Sprintf("%d subagent children found", len(facts)), upgrade.Warnings(facts)
	}
	if r, err = t.OpenV4(upgrade.Options{Children: facts}); err != nil {
		return nil, "", nil, err
	}
	note = fmt.Sprintf("upgraded in memory from format v%d, nothing written; %s", r.SourceVersion(), children)
	if v := r.SourceVersion(); v >= convlog.CurrentVersion {
		note = fmt.Sprintf("stored as format v%d: shown as it is", v)
	}
	return r, note, warnings, nil
}
