package reindex

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// InFlight is a conversation whose index rows lag behind its logs by the
// turns running in it, and by nothing else: the runtime updates the index
// when a turn starts and ends (and after every change between turns),
// not at each append of a running turn. It is no disagreement.
type InFlight struct {
	ID     string `json:"id"`
	Detail string `json:"detail"`
}

// runningSessions are the sessions of conv with a turn running, and the
// turn.
func runningSessions(conv *index.Conversation) map[string]int64 {
	r := map[string]int64{}
	for _, t := range conv.Turns {
		if t.Outcome == "" {
			r[t.SessionID] = t.Turn
		}
	}
	return r
}

// judge compares the row got (nil: none) with what the logs give: conv
// and msgs. A row that differs only by the turns in flight is an
// InFlight, not a difference: its sessions with a running turn have
// grown (same log file, more events and bytes), their messages past the
// events indexed are not indexed yet, the fingerprint (which covers them)
// differs, and everything else agrees.
func (ix *indexed) judge(conv, got *index.Conversation, msgs []index.Message) ([]Difference, *InFlight) {
	var digest index.MessageDigest
	for _, m := range msgs {
		digest.Add(m)
	}
	diffs := ix.compare(conv, got, digest)
	if len(diffs) == 0 || got == nil {
		return diffs, nil
	}
	running := runningSessions(conv)
	if len(running) == 0 {
		return diffs, nil
	}
	gs := sessionsByID(got.Sessions)
	lagged := *conv
	lagged.Sessions = append([]index.Session(nil), conv.Sessions...)
	lagged.Fingerprint = got.Fingerprint
	indexed := map[string]int64{}
	var parts []string
	for i, s := range lagged.Sessions {
		if _, ok := running[s.ID]; !ok {
			continue
		}
		g, ok := gs[s.ID]
		if !ok || g.File != s.File || g.FormatVersion != s.FormatVersion || g.Events > s.Events || g.Bytes > s.Bytes {
			return diffs, nil
		}
		lagged.Sessions[i].Events, lagged.Sessions[i].Bytes = g.Events, g.Bytes
		indexed[s.ID] = g.Events
		if g.Events < s.Events {
			parts = append(parts, fmt.Sprintf("turn %d of session %s (the index has %d of its log's %d events)",
				running[s.ID], termtext.Quote(s.ID), g.Events, s.Events))
		}
	}
	var lagDigest index.MessageDigest
	for _, m := range msgs {
		if n, ok := indexed[m.SessionID]; !ok || m.Seq < n {
			lagDigest.Add(m)
		}
	}
	if len(parts) == 0 || len(ix.compare(&lagged, got, lagDigest)) > 0 {
		return diffs, nil
	}
	return nil, &InFlight{ID: conv.ID, Detail: "the index lags by the turn in flight: " + strings.Join(parts, "; ")}
}

// recheckTries bounds how often a conversation that differs is read again
// while another process holds runtime.lock: the runtime updates the index
// just after its logs, and a check that read one between the two sees a
// difference that is gone a moment later.
const recheckTries = 5

// recheck reads conversation id's logs and index rows again, up to
// recheckTries times a few milliseconds apart, until they agree (or lag
// by the turn in flight); it returns what the last reading found (diffs,
// the first reading's, when none could be made).
func recheck(ctx context.Context, s *store.Store, path string, id string, opts Options, present map[string]bool, diffs []Difference) ([]Difference, *InFlight, error) {
	for try := range recheckTries {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		time.Sleep(time.Duration(try+1) * 20 * time.Millisecond)
		db, err := index.OpenRead(ctx, path, index.ReadOptions{})
		if err != nil {
			return diffs, nil, nil
		}
		got, gotDigest, err := db.One(ctx, id, !opts.NoText)
		db.Close()
		if err != nil {
			return diffs, nil, nil
		}
		c, _, err := s.WalkConversation(id)
		if err != nil {
			return diffs, nil, nil
		}
		b := readConversationWith(ctx, c, readEnv{present: func(x string) bool { return present[x] }, withText: !opts.NoText, machine: opts.Machine})
		if b.err != nil {
			return nil, nil, b.err
		}
		if b.conv == nil {
			return diffs, nil, nil
		}
		ix := &indexed{convs: map[string]*index.Conversation{}}
		if !opts.NoText {
			ix.digests = map[string]index.MessageDigest{id: gotDigest}
		}
		var lag *InFlight
		diffs, lag = ix.judge(b.conv, got, b.msgs)
		if len(diffs) == 0 {
			return nil, lag, nil
		}
	}
	return diffs, nil, nil
}

// recheckAll reads again each conversation res finds stale or missing
// from the index (see recheck), and keeps what the last reading found.
func recheckAll(ctx context.Context, s *store.Store, res *CheckResult, opts Options, present map[string]bool) error {
	ids := map[string][]Difference{}
	var keep []Difference
	for _, d := range res.Differences {
		if d.Kind == "stale" || d.Kind == "missing" {
			ids[d.ID] = append(ids[d.ID], d)
		} else {
			keep = append(keep, d)
		}
	}
	for id, first := range ids {
		d, lag, err := recheck(ctx, s, res.Index, id, opts, present, first)
		if err != nil {
			return err
		}
		if d == nil && lag == nil {
			continue
		}
		keep = append(keep, d...)
		if lag != nil {
			res.InFlight = append(res.InFlight, *lag)
		}
	}
	if keep == nil {
		keep = []Difference{}
	}
	res.Differences = keep
	return nil
}
