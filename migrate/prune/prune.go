// Package prune reclaims the space of the older generations of a log once its
// current-version successor holds their history.
//
// An older generation is removed only when the log's current generation is at
// the current format version, reads to its end as a strict reader reads it,
// has the header the upgrade chain derives from the older generation, and
// holds every event the chain derives from it at the same seqs, equal as JSON.
// A log whose current generation is older is never touched; what the check
// refuses is kept, with the reason.
//
// Each removal is one unlink(2) of a file readers no longer take, and the
// directories are fsynced at the end, so a crash leaves each generation whole
// or gone. Store takes the *store.Store handle holding runtime.lock; Sessions
// prunes the runtime's layout holding each session.lock.
package prune

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/convlog/upgrade"
	"github.com/convkit/convkit/internal/dshroot"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/store"
)

// Options tune a prune.
type Options struct {
	DryRun  bool             // check, and report what would be removed
	OnEvent func(Generation) // each older generation removed (or removable) or kept
}

// What a prune did with an older generation (Generation.Action).
const (
	ActionRemoved   = "removed"
	ActionRemovable = "removable" // a dry run's
	ActionKept      = "kept"      // refused by the check, or locked: Reason says why
)

// Generation is an older generation of a log and what the prune did with it.
type Generation struct {
	Action    string `json:"action"`
	Path      string `json:"path"`
	Version   int    `json:"version"`
	Bytes     int64  `json:"bytes,omitempty"`
	Successor string `json:"successor"` // the current generation holding it
	Reason    string `json:"reason,omitempty"`
}

// Result sums up a prune.
type Result struct {
	DryRun bool `json:"dryRun"`
	// Files, Bytes and Logs count what was removed (or removable), Kept what was kept.
	Files int   `json:"files"`
	Bytes int64 `json:"bytes"`
	Logs  int   `json:"logs"`
	Kept  int   `json:"kept"`

	dirs []string // the directories files were removed from, to fsync
}

// syncDirs fsyncs each directory, 8 at a time (to share journal commits).
func (res *Result) syncDirs() {
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, d := range res.dirs {
		sem <- struct{}{}
		wg.Go(func() {
			durable.SyncDir(d)
			<-sem
		})
	}
	wg.Wait()
	res.dirs = nil
}

// Store prunes the logs of s, which holds runtime.lock unless opts.DryRun.
func Store(ctx context.Context, s *store.Store, opts Options) (*Result, error) {
	if !opts.DryRun && !s.Writable() {
		return nil, errors.New("prune needs the store opened with the exclusive lock (a dry run does not)")
	}
	tree, err := s.Walk()
	if err != nil {
		return nil, err
	}
	res := &Result{DryRun: opts.DryRun}
	defer res.syncDirs()
	for _, c := range tree.Conversations {
		for _, l := range c.Logs {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			var older []generation
			for _, g := range l.Generations[1:] {
				if g.Version < l.Current.Version {
					older = append(older, generation{path: filepath.Join(c.Path, g.String()), version: g.Version})
				}
			}
			if l.Current.Version != convlog.CurrentVersion || len(older) == 0 {
				continue
			}
			pruneLog(res, opts, l.Path, older, l.ReaderOptions(convlog.ReaderOptions{}), nil)
		}
	}
	return res, nil
}

// Sessions prunes the runtime-layout root r, each session under its session.lock.
func Sessions(ctx context.Context, r *dshroot.Root, opts Options) (*Result, error) {
	tree, err := r.Walk()
	if err != nil {
		return nil, err
	}
	res := &Result{DryRun: opts.DryRun}
	defer res.syncDirs()
	for _, e := range tree.Entries {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		s := e.Session
		if s == nil || s.Err != nil {
			continue
		}
		cur, ok := s.Current()
		if !ok || !cur.Regular || cur.Version != convlog.CurrentVersion {
			continue
		}
		var older []generation
		for _, g := range s.Generations[1:] {
			if g.Version < cur.Version && g.Regular {
				older = append(older, generation{path: filepath.Join(s.Dir, g.File), version: g.Version})
			}
		}
		if len(older) == 0 {
			continue
		}
		successor := s.Path()
		var lock *dshroot.SessionLock // a dry run locks nothing
		if !opts.DryRun {
			if lock, err = r.LockSession(s); err != nil {
				for _, g := range older {
					res.keep(opts, g, successor, err.Error())
				}
				continue
			}
		}
		pruneLog(res, opts, successor, older, convlog.ReaderOptions{WantID: s.ID}, r)
		lock.Release()
	}
	return res, nil
}

type generation struct {
	path    string
	version int
}

func (res *Result) keep(opts Options, g generation, successor, reason string) {
	res.Kept++
	if opts.OnEvent != nil {
		opts.OnEvent(Generation{Action: ActionKept, Path: g.path, Version: g.version, Successor: successor, Reason: reason})
	}
}

// pruneLog removes each older generation of a log that its successor holds.
func pruneLog(res *Result, opts Options, successor string, older []generation, want convlog.ReaderOptions, root *dshroot.Root) {
	removed := false
	for _, g := range older {
		before, err := os.Lstat(g.path)
		if err != nil || !before.Mode().IsRegular() {
			continue // gone meanwhile, or not a file a prune removes
		}
		if err := holds(successor, g.path, want, root); err != nil {
			res.keep(opts, g, successor, err.Error())
			continue
		}
		f := Generation{Action: ActionRemovable, Path: g.path, Version: g.version, Bytes: before.Size(), Successor: successor}
		if !opts.DryRun {
			f.Action = ActionRemoved
			// The file checked is the one removed: an append shows in its size or times.
			after, err := os.Lstat(g.path)
			if err != nil || !os.SameFile(before, after) || after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
				res.keep(opts, g, successor, "it changed while it was checked")
				continue
			}
			if err := os.Remove(g.path); err != nil {
				res.keep(opts, g, successor, err.Error())
				continue
			}
		}
		removed = true
		res.Files++
		res.Bytes += f.Bytes
		if opts.OnEvent != nil {
			opts.OnEvent(f)
		}
	}
	if removed {
		res.Logs++
		if dir := filepath.Dir(successor); !opts.DryRun && (len(res.dirs) == 0 || res.dirs[len(res.dirs)-1] != dir) {
			res.dirs = append(res.dirs, dir)
		}
	}
}

// holds returns nil when the successor reads strictly, names old's log and
// holds every event the upgrade chain derives from old.
func holds(successor, old string, want convlog.ReaderOptions, root *dshroot.Root) error {
	sr, err := convlog.Open(successor, convlog.ReaderOptions{WantID: want.WantID, WantType: want.WantType, LowMemory: true})
	if err != nil {
		return fmt.Errorf("the successor %s does not read: %w", successor, err)
	}
	defer sr.Close()
	if root != nil {
		if err := root.CheckIdentity(successor, sr.Header()); err != nil {
			return fmt.Errorf("the successor does not name its place: %w", err)
		}
	}
	or, err := upgrade.Open(old, upgrade.Options{WantID: want.WantID, WantType: want.WantType})
	if err != nil {
		return fmt.Errorf("the upgrade chain does not read it: %w", err)
	}
	defer or.Close()
	sh, oh := sr.Header().AppendJSON(nil), or.Header().AppendJSON(nil)
	if !bytes.Equal(sh, oh) {
		return fmt.Errorf("the successor's header %s is not the one the upgrade chain derives from it, %s", sh, oh)
	}
	v := convlog.NewValidator(sr.Header())
	n := 0
	// What was appended since the derived events must read too.
	next, stop := iter.Pull2(or.Events())
	defer stop()
	for se, serr := range sr.Events() {
		oe, oerr, derived := next()
		if oerr != nil {
			return fmt.Errorf("the upgrade chain does not read it: %w", oerr)
		}
		if serr != nil {
			return fmt.Errorf("the successor %s does not read: %w", successor, serr)
		}
		if err := v.Check(se); err != nil {
			return fmt.Errorf("the successor %s breaks a rule: %w", successor, err)
		}
		if derived {
			if why := differ(oe, se); why != "" {
				return fmt.Errorf("the successor's event of seq %d is not the one the upgrade chain derives from it: %s", oe.Seq, why)
			}
			n++
		}
	}
	if oe, oerr, derived := next(); oerr != nil {
		return fmt.Errorf("the upgrade chain does not read it: %w", oerr)
	} else if derived {
		return fmt.Errorf("the successor %s ends after %d events, before the event of seq %d the upgrade chain derives from it", successor, n, oe.Seq)
	}
	if err := v.Finish(); err != nil {
		return fmt.Errorf("the successor %s breaks a rule: %w", successor, err)
	}
	return nil
}

// differ says how s differs from derived o ("" if not), data compared as JSON:
// another writer may order keys otherwise.
func differ(o, s *convlog.Event) string {
	switch {
	case o.Type != s.Type:
		return fmt.Sprintf("type %q, derived %q", s.Type, o.Type)
	case o.Seq != s.Seq:
		return fmt.Sprintf("seq %d", s.Seq)
	case o.Time != s.Time:
		return fmt.Sprintf("time %d, derived %d", s.Time, o.Time)
	case o.Ignorable != s.Ignorable:
		return "its ignorable mark differs"
	case (o.SurfaceOp == nil) != (s.SurfaceOp == nil) || o.SurfaceOp != nil && *o.SurfaceOp != *s.SurfaceOp:
		return "its surfaceOp differs"
	case !slices.Equal(o.SourceEventSeqs, s.SourceEventSeqs):
		return "its sourceEventSeqs differ"
	case !bytes.Equal(o.Data, s.Data) && !sameJSON(o.Data, s.Data):
		return "its data differs"
	}
	return ""
}

// sameJSON reports whether a and b are the same JSON value (numbers as written).
func sameJSON(a, b []byte) bool {
	va, ok := decode(a)
	if !ok {
		return false
	}
	vb, ok := decode(b)
	return ok && reflect.DeepEqual(va, vb)
}

func decode(b []byte) (any, bool) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}
