package reindex

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"sort"
	"strings"

	"github.com/convkit/convkit/contract"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/store"
)

// Difference is one way the index disagrees with the logs.
type Difference struct {
	ID string `json:"id"`
	// Kind is "missing" (in the logs, not the index), "extra" (in the index
	// only, or deleted), or "stale" (both, but different).
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

// CheckResult is what Check found.
type CheckResult struct {
	SchemaVersion int          `json:"schemaVersion"`
	Index         string       `json:"index"`
	IndexProblem  string       `json:"indexProblem,omitempty"`
	Conversations int          `json:"conversations"`
	Differences   []Difference `json:"differences"`
	Skipped       []Skip       `json:"skipped"`
	// WillNotOpen are the conversations the logs hold that will not open
	// on this machine, checked now (an index row records what was found
	// when it was written; a difference is stale).
	WillNotOpen []WillNotOpen `json:"willNotOpen"`
	// Warnings: see Result.Warnings.
	Warnings []string `json:"warnings"`
}

// Drift reports whether the index disagrees with the logs.
func (r *CheckResult) Drift() bool { return r.IndexProblem != "" || len(r.Differences) > 0 }

// Check compares the logs with metadata.db and writes nothing. It takes no
// lock, so it runs beside the runtime; a log appended to while it runs can
// show as stale. Message text (the search index) is not compared.
func Check(ctx context.Context, s *store.Store, opts Options) (*CheckResult, error) {
	opts.defaults()
	res := &CheckResult{SchemaVersion: contract.Version, Index: s.IndexPath(), Differences: []Difference{}, Skipped: []Skip{},
		WillNotOpen: []WillNotOpen{}, Warnings: opts.warnings()}
	tree, err := s.WalkJobs(opts.Jobs)
	if err != nil {
		return nil, err
	}
	for _, p := range tree.Problems {
		if p.Reason != store.ReasonUnexpected {
			res.Skipped = append(res.Skipped, Skip{Path: p.Path, Reason: p.Reason})
		}
	}
	indexed := map[string]*index.Conversation{}
	db, err := index.OpenRead(ctx, res.Index, index.ReadOptions{})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		res.IndexProblem = "metadata.db does not exist"
	case err != nil:
		res.IndexProblem = err.Error()
	default:
		indexed, err = db.All(ctx)
		db.Close()
		if err != nil {
			res.IndexProblem = fmt.Sprintf("reading %s: %v", res.Index, err)
			indexed = map[string]*index.Conversation{}
		}
	}
	present := map[string]bool{}
	for _, c := range tree.Conversations {
		present[c.ID] = true
	}
	seen := map[string]bool{}
	opts.Progress.SetTotal(int64(len(tree.Conversations)))
	err = build(ctx, tree.Conversations, present, opts, func(b *built) error {
		defer opts.Progress.Add(1)
		id := b.dir.ID
		seen[id] = true
		got := indexed[id]
		switch {
		case b.skip != nil:
			res.Skipped = append(res.Skipped, *b.skip)
		case b.deleting || b.empty:
			if got != nil {
				res.Differences = append(res.Differences, Difference{ID: id, Kind: "extra", Detail: "deleted (tombstone recorded) but still indexed"})
			}
		default:
			res.Conversations++
			if len(b.conv.WillNotOpen) > 0 {
				res.WillNotOpen = append(res.WillNotOpen, WillNotOpen{ID: id, Reasons: b.conv.WillNotOpen})
			}
			if got == nil {
				res.Differences = append(res.Differences, Difference{ID: id, Kind: "missing", Detail: "in the logs but not in the index"})
			} else if d := compare(b.conv, got); d != "" {
				res.Differences = append(res.Differences, Difference{ID: id, Kind: "stale", Detail: d})
			}
		}
		return nil
	})
	if err = interrupted(ctx, err); err != nil {
		return nil, err
	}
	for id := range indexed {
		if !seen[id] {
			res.Differences = append(res.Differences, Difference{ID: id, Kind: "extra", Detail: "in the index but no conversation directory exists"})
		}
	}
	sort.Slice(res.Differences, func(i, j int) bool {
		a, b := res.Differences[i], res.Differences[j]
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		return a.Kind < b.Kind
	})
	return res, nil
}

// compare names the fields where the index row differs from the logs.
func compare(want, got *index.Conversation) string {
	var diffs []string
	field := func(name string, w, g any) {
		if !reflect.DeepEqual(w, g) {
			diffs = append(diffs, fmt.Sprintf("%s: logs %v, index %v", name, w, g))
		}
	}
	field("title", want.Title, got.Title)
	field("cwd", want.Cwd, got.Cwd)
	field("created", want.CreatedAt, got.CreatedAt)
	field("updated", want.UpdatedAt, got.UpdatedAt)
	field("archived", want.Archived, got.Archived)
	field("forked from", want.ForkedFrom, got.ForkedFrom)
	field("running turn", want.RunningTurn, got.RunningTurn)
	field("agents", nonNil(want.Agents), nonNil(got.Agents))
	field("models", nonNil(want.Models), nonNil(got.Models))
	if w, g := nonNil(want.WillNotOpen), nonNil(got.WillNotOpen); !reflect.DeepEqual(w, g) {
		diffs = append(diffs, fmt.Sprintf("will not open: now [%s], index [%s]", strings.Join(w, "; "), strings.Join(g, "; ")))
	}
	ws, gs := sessionsByID(want.Sessions), sessionsByID(got.Sessions)
	for id, s := range ws {
		g, ok := gs[id]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("session %q missing from the index", id))
		case s != g:
			diffs = append(diffs, fmt.Sprintf("session %q: logs %d events/%d bytes v%d, index %d events/%d bytes v%d",
				id, s.Events, s.Bytes, s.FormatVersion, g.Events, g.Bytes, g.FormatVersion))
		}
	}
	for id := range gs {
		if _, ok := ws[id]; !ok {
			diffs = append(diffs, fmt.Sprintf("session %q indexed but has no log", id))
		}
	}
	if len(want.Turns) != len(got.Turns) {
		diffs = append(diffs, fmt.Sprintf("turns: logs %d, index %d", len(want.Turns), len(got.Turns)))
	} else {
		wt, gt := turnsByKey(want.Turns), turnsByKey(got.Turns)
		for k, t := range wt {
			if gt[k] != t {
				diffs = append(diffs, fmt.Sprintf("turn %s differs", k))
			}
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "; ")
}

func nonNil(v []string) []string {
	if v == nil {
		return []string{}
	}
	return v
}

func sessionsByID(ss []index.Session) map[string]index.Session {
	m := map[string]index.Session{}
	for _, s := range ss {
		m[s.ID] = s
	}
	return m
}

func turnsByKey(ts []index.Turn) map[string]index.Turn {
	m := map[string]index.Turn{}
	for _, t := range ts {
		m[fmt.Sprintf("%s#%d", t.SessionID, t.Turn)] = t
	}
	return m
}
