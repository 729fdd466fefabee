package reindex

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// KeeperOptions configure a Keeper.
type KeeperOptions struct {
	// Machine checks whether each conversation will open here, as
	// Options.Machine.
	Machine *store.Machine
	// OnError receives what could not be written to the index. The
	// store's change stands; the conversation's rows are read whole at
	// its next change.
	OnError func(error)
}

// Keeper keeps metadata.db current while the runtime writes the store: the
// store tells it every durable change listing and search depend on
// (store.IndexKeeper), and it writes what changed, in time that depends on
// the change and not on the conversation's length: the conversation's
// row, the turns started or ended, the session logs appended to and the
// messages they recorded (index.Writer.Advance). A new conversation, a
// fork, logs a caller wrote itself or a crash's turn closed are read
// whole (Update). The appends of a running turn reach the index with the
// turn's end: until then it lags by the turn in flight, which reindex
// --check reports as such.
type Keeper struct {
	s    *store.Store
	db   *index.DB
	opts KeeperOptions
	mu   sync.Mutex
	// whole: conversations whose rows could not be advanced, read whole
	// at their next change.
	whole map[string]bool
}

// NewKeeper brings metadata.db of s up to date with an incremental
// reindex (a rebuild when it is missing, unusable or of an older schema;
// the Result says what it did; one another process holds locked is an
// error wrapping index.ErrLocked, never replaced), opens it, and sets itself as the store's
// keeper: from then on the store keeps the index current as it writes.
// The store must be open with the exclusive lock. Close it before the
// store.
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
	present := func(id string) bool {
		p, err := k.s.ConversationPath(id)
		if err != nil {
			return false
		}
		_, err = os.Lstat(p)
		return err == nil
	}
	conv := rowOf(c, info, dirFingerprint(c), logIdentity(c), ch.Turns, k.opts.Machine.Check(store.NeedsOf(info), present))
	sessions := 0
	for _, l := range c.Logs {
		if !l.IsConversationLog {
			sessions++
		}
	}
	for _, st := range ch.Sessions {
		sess := index.Session{ID: st.ID, File: filepath.Base(st.Path), FormatVersion: convlog.CurrentVersion, Events: st.Events, Bytes: st.Bytes}
		if si := info.Session(st.ID); si != nil {
			sess.Agent, sess.Model, sess.ParentSession = si.Agent, si.Model, si.ParentSession
		}
		conv.Sessions = append(conv.Sessions, sess)
	}
	var msgs []index.Message
	for i := range ch.Messages {
		e := &ch.Messages[i].Event
		raw := e.Data
		if e.Type == convlog.TypeAssistantMessage {
			raw = rawjson.Get(e.Data, "message")
		}
		if role, text := convlog.EventMessageText(e, raw); text != "" {
			msgs = append(msgs, index.Message{SessionID: ch.Messages[i].Session, Seq: e.Seq, Role: role, Text: clip(text, MaxIndexedText)})
		}
	}
	w, err := k.db.Begin(ctx)
	if err != nil {
		return err
	}
	if err := w.Advance(ctx, conv, sessions, len(info.Turns), msgs); err != nil {
		w.Rollback()
		return err
	}
	return w.Commit()
}
