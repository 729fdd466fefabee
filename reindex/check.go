package reindex

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/contract"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// Difference is one way the index disagrees with the logs.
type Difference struct {
	ID string `json:"id"`
	// Kind is "missing" (in the logs, not the index), "extra" (in the index
	// only, or deleted), "stale" (both, but different), or InFlight.
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

// InFlight is the Kind of rows that lag only by the turns running in their
// conversation: no difference.
const InFlight = "in-flight"

// CheckResult is what Check found.
type CheckResult struct {
	SchemaVersion int           `json:"schemaVersion"`
	Index         string        `json:"index"`
	IndexProblem  string        `json:"indexProblem,omitempty"`
	Conversations int           `json:"conversations"`
	Differences   []Difference  `json:"differences"`
	Skipped       []store.Item  `json:"skipped"`
	WillNotOpen   []WillNotOpen `json:"willNotOpen"` // checked now
	Warnings      []string      `json:"warnings"`
	// InFlight rows lag only by running turns: no difference.
	InFlight []Difference `json:"inFlight"`
}

// Drift reports whether the index disagrees with the logs.
func (r *CheckResult) Drift() bool { return r.IndexProblem != "" || len(r.Differences) > 0 }

// Check compares the logs with metadata.db and writes nothing. It takes no
// lock, so it runs beside the runtime: rows that lag by the turns in flight
// are InFlight, and a differing conversation is read again (recheck).
func Check(ctx context.Context, s *store.Store, opts Options) (*CheckResult, error) {
	opts.defaults()
	tree, err := s.WalkJobs(opts.Jobs)
	if err != nil {
		return nil, err
	}
	res := &CheckResult{SchemaVersion: contract.Version, Index: s.IndexPath(), Differences: []Difference{}, Skipped: walkSkips(tree),
		WillNotOpen: []WillNotOpen{}, Warnings: opts.warnings(), InFlight: []Difference{}}
	ix, err := readIndexed(ctx, res.Index, !opts.NoText)
	if index.IsLocked(err) {
		// Nothing to compare yet, and nothing wrong with the index.
		return nil, err
	}
	if err != nil {
		res.IndexProblem = err.Error()
	}
	present := presentIn(tree)
	// Forks are compared once all are read, as finishForks checks them.
	judge := func(conv, got *index.Conversation, msgs []index.Message) {
		d, lag := ix.judge(conv, got, msgs)
		res.Differences = append(res.Differences, d...)
		if lag != nil {
			res.InFlight = append(res.InFlight, *lag)
		}
	}
	var forks []*built
	// readSkips: what the first reading skipped, which a second may take back.
	readSkips := map[string]store.Item{}
	gone := map[string]bool{}
	reasons := map[string][]string{}
	opts.Progress.SetTotal(int64(len(tree.Conversations)))
	err = build(ctx, tree.Conversations, present, opts, nil, func(b *built) error {
		defer opts.Progress.Add(1)
		id := b.dir.ID
		got := ix.convs[id]
		skipped, wasSkipped := ix.skipped[id]
		diff := func(kind, format string, args ...any) {
			res.Differences = append(res.Differences, Difference{ID: id, Kind: kind, Detail: fmt.Sprintf(format, args...)})
		}
		switch {
		case b.skip != nil:
			res.Skipped = append(res.Skipped, *b.skip)
			readSkips[id] = *b.skip
			switch {
			case ix.problem:
			case got != nil:
				diff("stale", "indexed, but a rebuild skips it: %s", b.skip.Reason)
			case !wasSkipped:
				diff("missing", "skipped (%s), but not recorded as skipped in the index", b.skip.Reason)
			case skipped.Reason != storedReason(b.dir.Path, b.skip):
				diff("stale", "skipped: logs %s, index %s", termtext.Quote(storedReason(b.dir.Path, b.skip)), termtext.Quote(skipped.Reason))
			case skipped.Fingerprint != b.fingerprint:
				diff("stale", "skipped, but its logs changed since (fingerprint: logs %s, index %s)", b.fingerprint, skipped.Fingerprint)
			}
		case b.deleting || b.empty:
			gone[id] = true
			if got != nil || wasSkipped {
				diff("extra", "deleted (tombstone recorded) but still indexed")
			}
		default:
			res.Conversations++
			if len(b.conv.ForkSources) > 0 {
				forks = append(forks, b)
				break
			}
			reasons[id] = b.conv.WillNotOpen
			judge(b.conv, got, b.msgs)
		}
		return nil
	})
	if err = interrupted(ctx, err); err != nil {
		return nil, err
	}
	for _, f := range forks {
		f.conv.WillNotOpen = opts.Machine.Check(needsOf(f.conv), func(id string) bool { return present[id] && !gone[id] })
		reasons[f.conv.ID] = f.conv.WillNotOpen
		judge(f.conv, ix.convs[f.conv.ID], f.msgs)
	}
	betweenReadings()
	if len(res.Differences) > 0 && !ix.problem {
		if st, err := s.LockStatus(); err == nil && st.Held && !s.Writable() {
			if err := recheckAll(ctx, s, res, opts, present, readSkips); err != nil {
				return nil, err
			}
		}
	}
	for _, c := range tree.Conversations {
		// Directory order, as reindex reports them.
		if r := reasons[c.ID]; len(r) > 0 {
			res.WillNotOpen = append(res.WillNotOpen, WillNotOpen{ID: c.ID, Reasons: r})
		}
	}
	for id := range ix.convs {
		if !present[id] {
			res.Differences = append(res.Differences, Difference{ID: id, Kind: "extra", Detail: "in the index but no conversation directory exists"})
		}
	}
	for id := range ix.skipped {
		if !present[id] {
			res.Differences = append(res.Differences, Difference{ID: id, Kind: "extra", Detail: "recorded as skipped in the index, but no conversation directory exists"})
		}
	}
	sort.Slice(res.InFlight, func(i, j int) bool { return res.InFlight[i].ID < res.InFlight[j].ID })
	sort.Slice(res.Differences, func(i, j int) bool {
		a, b := res.Differences[i], res.Differences[j]
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		return a.Kind < b.Kind
	})
	return res, nil
}

// betweenReadings lets a test change the logs between Check's readings.
var betweenReadings = func() {}

// compare is how the row got (nil: none) differs from what the logs give.
func (ix *indexed) compare(conv, got *index.Conversation, digest index.MessageDigest) []Difference {
	if got == nil {
		return []Difference{{ID: conv.ID, Kind: "missing", Detail: "in the logs but not in the index"}}
	}
	d := compare(conv, got)
	if ix.digests != nil {
		if g := ix.digests[conv.ID]; g != digest {
			msgs := fmt.Sprintf("messages: logs %d, index %d%s", digest.Count, g.Count,
				map[bool]string{true: " (their text differs)"}[g.Count == digest.Count])
			d = strings.TrimPrefix(d+"; "+msgs, "; ")
		}
	}
	if d == "" {
		return nil
	}
	return []Difference{{ID: conv.ID, Kind: "stale", Detail: d}}
}

// indexed is what Check reads of the index.
type indexed struct {
	convs   map[string]*index.Conversation
	skipped map[string]index.SkippedRow
	digests map[string]index.MessageDigest // when text is compared
	// problem: the index could not be read; every conversation is missing.
	problem bool
}

// readIndexed reads the index at path; after an error the result is empty.
func readIndexed(ctx context.Context, path string, text bool) (*indexed, error) {
	unread := &indexed{convs: map[string]*index.Conversation{}, skipped: map[string]index.SkippedRow{}, problem: true}
	db, err := index.OpenRead(ctx, path, index.ReadOptions{})
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return unread, errors.New("metadata.db does not exist")
	case err != nil:
		return unread, err
	}
	defer db.Close()
	ix := &indexed{skipped: map[string]index.SkippedRow{}}
	var rows []index.SkippedRow
	ix.convs, err = db.All(ctx)
	if err == nil {
		rows, err = db.Skipped(ctx)
	}
	if err == nil && text {
		ix.digests, err = db.MessageDigests(ctx, "")
	}
	if err != nil {
		return unread, fmt.Errorf("reading %s: %w", path, err)
	}
	for _, r := range rows {
		ix.skipped[r.ID] = r
	}
	return ix, nil
}

// compare names the fields where the index row differs from the logs.
func compare(want, got *index.Conversation) string {
	var diffs []string
	field := func(name string, w, g any) {
		if !reflect.DeepEqual(w, g) {
			diffs = append(diffs, fmt.Sprintf("%s: logs %v, index %v", name, w, g))
		}
	}
	list := func(name string, w, g []string) {
		if !slices.Equal(w, g) { // nil and empty alike
			field(name, w, g)
		}
	}
	field("directory", want.Dir, got.Dir)
	field("title", want.Title, got.Title)
	field("automatic title", want.TitleIsAuto, got.TitleIsAuto)
	field("after compaction", want.AfterCompaction, got.AfterCompaction)
	list("fork sources", want.ForkSources, got.ForkSources)
	if want.Fingerprint != got.Fingerprint {
		diffs = append(diffs, fmt.Sprintf("fingerprint: logs %s, index %s (its logs changed, or were copied, since it was indexed)",
			want.Fingerprint, got.Fingerprint))
	}
	field("cwd", want.Cwd, got.Cwd)
	field("created", want.CreatedAt, got.CreatedAt)
	field("updated", want.UpdatedAt, got.UpdatedAt)
	field("archived", want.Archived, got.Archived)
	field("forked from", want.ForkedFrom, got.ForkedFrom)
	field("running turn", want.RunningTurn, got.RunningTurn)
	list("agents", want.Agents, got.Agents)
	list("models", want.Models, got.Models)
	if w, g := want.WillNotOpen, got.WillNotOpen; !slices.Equal(w, g) {
		diffs = append(diffs, fmt.Sprintf("will not open: now [%s], index [%s]", strings.Join(w, "; "), strings.Join(g, "; ")))
	}
	ws, gs := byKey(want.Sessions, sessionID), byKey(got.Sessions, sessionID)
	for id, s := range ws {
		g, ok := gs[id]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("session %s missing from the index", termtext.Quote(id)))
		case s != g:
			diffs = append(diffs, fmt.Sprintf("session %s: logs %d events/%d bytes v%d, index %d events/%d bytes v%d",
				termtext.Quote(id), s.Events, s.Bytes, s.FormatVersion, g.Events, g.Bytes, g.FormatVersion))
		}
	}
	for id := range gs {
		if _, ok := ws[id]; !ok {
			diffs = append(diffs, fmt.Sprintf("session %s indexed but has no log", termtext.Quote(id)))
		}
	}
	if len(want.Turns) != len(got.Turns) {
		diffs = append(diffs, fmt.Sprintf("turns: logs %d, index %d", len(want.Turns), len(got.Turns)))
	} else {
		turnKey := func(t index.Turn) string { return fmt.Sprintf("%s#%d", t.SessionID, t.Turn) }
		wt, gt := byKey(want.Turns, turnKey), byKey(got.Turns, turnKey)
		for k, t := range wt {
			if gt[k] != t {
				diffs = append(diffs, fmt.Sprintf("turn %s differs", k))
			}
		}
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "; ")
}

func sessionID(s index.Session) string { return s.ID }

// byKey maps each of list by its key.
func byKey[T any](list []T, key func(T) string) map[string]T {
	m := make(map[string]T, len(list))
	for _, v := range list {
		m[key(v)] = v
	}
	return m
}
