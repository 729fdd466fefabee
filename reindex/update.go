package reindex

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// KeeperOptions configure a Keeper.
type KeeperOptions struct {
	Machine *store.Machine // as Options.Machine
	// OnError receives what could not be written to the index; the store's
	// change stands and the rows are read whole at the next change.
	OnError func(error)
}

// Keeper keeps metadata.db current while the runtime writes the store
// (store.IndexKeeper), writing only what each change touched so its cost
// does not grow with the conversation; new conversations, forks and outside
// writes are read whole. A running turn reaches the index at its end.
type Keeper struct {
	s    *store.Store
	db   *index.DB
	opts KeeperOptions
	mu   sync.Mutex
	// whole: conversations whose rows could not be advanced, read whole next.
	whole map[string]bool
}

// NewKeeper brings metadata.db of s up to date with an incremental reindex
// (one another process holds locked is an error wrapping index.ErrLocked,
// never replaced), opens it and sets itself as the store's keeper. The store
// must be open with the exclusive lock; close the Keeper before the store.
func NewKeeper(ctx context.Context, s *store.Store, opts KeeperOptions) (*Keeper, *Result, error) {
	res, err := Run(ctx, s, Options{Incremental: true, Machine: opts.Machine})
	if err != nil {
		return nil, nil, err
	}
	db, err := index.Open(s.IndexPath())
	if err != nil {
		return nil, nil, err
	}
	k := &Keeper{s: s, db: db, opts: opts, whole: map[string]bool{}}
	s.SetIndexKeeper(k)
	return k, res, nil
}

// Close stops keeping the index and closes it.
func (k *Keeper) Close() error {
	k.s.SetIndexKeeper(nil)
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.db.Close()
}

// Changed writes one change of the store to the index.
func (k *Keeper) Changed(ch *store.IndexChange) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := k.changed(context.Background(), ch); err != nil {
		k.whole[ch.ID] = true
		if k.opts.OnError != nil {
			k.opts.OnError(fmt.Errorf("metadata.db: conversation %s: %w", termtext.Quote(ch.ID), err))
		}
	}
}

func (k *Keeper) changed(ctx context.Context, ch *store.IndexChange) error {
	if ch.Conversation == nil {
		return k.db.Delete(ctx, ch.ID)
	}
	if !ch.Whole && !k.whole[ch.ID] {
		err := k.advance(ctx, ch)
		if !errors.Is(err, index.ErrNotIndexed) {
			return err
		}
	}
	if _, err := Update(ctx, k.db, k.s, ch.ID, UpdateOptions{Machine: k.opts.Machine}); err != nil {
		return err
	}
	delete(k.whole, ch.ID)
	return nil
}

// advance writes what ch changed, as a rebuild would write it.
func (k *Keeper) advance(ctx context.Context, ch *store.IndexChange) error {
	info := ch.Conversation
	c, _, err := k.s.WalkConversation(ch.ID)
	if err != nil {
		return err
	}
	fp, logID, _ := dirFingerprintSize(c)
	conv := rowOf(c, info, fp, logID, ch.Turns, k.opts.Machine.Check(store.NeedsOf(info), inStore(k.s)))
	for _, st := range ch.Sessions {
		sess := sessionRow(info, st.ID, st.Path, convlog.CurrentVersion)
		sess.Events, sess.Bytes = st.Events, st.Bytes
		conv.Sessions = append(conv.Sessions, sess)
	}
	var msgs []index.Message
	for i := range ch.Messages {
		e := &ch.Messages[i].Event
		if m, ok := indexedMessage(e, convlog.MessageOf(e), ch.Messages[i].Session); ok {
			msgs = append(msgs, m)
		}
	}
	w, err := k.db.Begin(ctx)
	if err != nil {
		return err
	}
	if err := w.Advance(ctx, conv, len(c.SessionLogs()), len(info.Turns), msgs); err != nil {
		w.Rollback()
		return err
	}
	return w.Commit()
}

// inStore reports whether a conversation's directory is in s.
func inStore(s *store.Store) func(id string) bool {
	return func(id string) bool {
		p, err := s.ConversationPath(id)
		if err == nil {
			_, err = os.Lstat(p)
		}
		return err == nil
	}
}

// judge is compare, but a row behind only by running turns is in flight.
func (ix *indexed) judge(conv, got *index.Conversation, msgs []index.Message) ([]Difference, *Difference) {
	var digest index.MessageDigest
	for _, m := range msgs {
		digest.Add(m)
	}
	diffs := ix.compare(conv, got, digest)
	if len(diffs) == 0 || got == nil {
		return diffs, nil
	}
	running := map[string]int64{} // the sessions with a turn running, to the turn
	for _, t := range conv.Turns {
		if t.Outcome == "" {
			running[t.SessionID] = t.Turn
		}
	}
	if len(running) == 0 {
		return diffs, nil
	}
	gs := byKey(got.Sessions, sessionID)
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
	return nil, &Difference{ID: conv.ID, Kind: InFlight, Detail: "the index lags by the turn in flight: " + strings.Join(parts, "; ")}
}

// recheckTries bounds the readings of a differing conversation while another
// process holds runtime.lock: it updates the index just after its logs.
const recheckTries = 5

// recheck reads id's logs and rows again, a few milliseconds apart, until
// they agree or lag by the turn in flight.
func recheck(ctx context.Context, s *store.Store, path string, id string, opts Options, present map[string]bool, diffs []Difference) ([]Difference, *Difference, error) {
	for try := range recheckTries {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		time.Sleep(time.Duration(try+1) * 20 * time.Millisecond)
		db, err := index.OpenRead(ctx, path, index.ReadOptions{})
		if err != nil {
			return diffs, nil, nil
		}
		got, err := db.One(ctx, id)
		ix := &indexed{}
		if err == nil && !opts.NoText {
			ix.digests, err = db.MessageDigests(ctx, id)
		}
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
		var lag *Difference
		diffs, lag = ix.judge(b.conv, got, b.msgs)
		if len(diffs) == 0 {
			return nil, lag, nil
		}
	}
	return diffs, nil, nil
}

// recheckAll rechecks each conversation res finds stale or missing.
func recheckAll(ctx context.Context, s *store.Store, res *CheckResult, opts Options, present map[string]bool, readSkips map[string]store.Item) error {
	ids := map[string][]Difference{}
	keep := []Difference{}
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
		if i := slices.Index(res.Skipped, readSkips[id]); i >= 0 && d == nil {
			// Read whole now: the first reading's skip (a create the
			// runtime had not finished) is taken back.
			res.Skipped = slices.Delete(res.Skipped, i, i+1)
			res.Conversations++
		}
		keep = append(keep, d...)
		if lag != nil {
			res.InFlight = append(res.InFlight, *lag)
		}
	}
	res.Differences = keep
	return nil
}

// UpdateOptions configure Update as Options do Run.
type UpdateOptions struct {
	Machine  *store.Machine
	Prereads Prereads
}

// UpdateResult is what Update did.
type UpdateResult struct {
	FromPrereads int // session logs indexed from their Preread
}

// Update writes one conversation's rows in db as a rebuild would.
func Update(ctx context.Context, db *index.DB, s *store.Store, convID string, opts UpdateOptions) (UpdateResult, error) {
	c, _, err := s.WalkConversation(convID)
	if err != nil {
		dir, perr := s.ConversationPath(convID)
		if perr != nil {
			return UpdateResult{}, perr
		}
		if _, serr := os.Lstat(dir); errors.Is(serr, fs.ErrNotExist) {
			return UpdateResult{}, db.Delete(ctx, convID)
		}
		return UpdateResult{}, err
	}
	b := readConversationWith(ctx, c, readEnv{present: inStore(s), withText: true, machine: opts.Machine, prereads: opts.Prereads})
	if b.err != nil {
		return UpdateResult{}, b.err
	}
	w, err := db.Begin(ctx)
	if err != nil {
		return UpdateResult{}, err
	}
	if err := write(ctx, w, b); err != nil {
		w.Rollback()
		return UpdateResult{}, fmt.Errorf("update %s in the index: %w", termtext.Quote(convID), interrupted(ctx, err))
	}
	var res UpdateResult
	if b.conv != nil {
		res.FromPrereads = b.fromPrereads
	}
	return res, w.Commit()
}

// Stale lists those of ids whose rows were not read from their current logs.
func Stale(ctx context.Context, db *index.DB, s *store.Store, ids []string) ([]string, error) {
	stored, err := db.Stored(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		st, indexed := stored[id]
		c, _, err := s.WalkConversation(id)
		switch {
		case err != nil:
			// Only a directory that is gone is Update's to settle.
			dir, perr := s.ConversationPath(id)
			if _, serr := os.Lstat(dir); indexed && perr == nil && errors.Is(serr, fs.ErrNotExist) {
				out = append(out, id)
			}
		case !indexed:
			if !deleting(c) {
				out = append(out, id)
			}
		case st.Fingerprint != dirFingerprint(c):
			out = append(out, id)
		}
	}
	return out, nil
}
