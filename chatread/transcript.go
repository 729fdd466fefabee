package chatread

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"path/filepath"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/convlog/upgrade"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// TranscriptItem is one message of a transcript, or a turn's incomplete end.
type TranscriptItem struct {
	// Conversation and Session are where it is recorded (a fork's source's
	// when Inherited); Seq, Time and Type the event's that recorded it.
	Conversation string          `json:"conversation"`
	Session      string          `json:"session"`
	Seq          int64           `json:"seq"`
	Time         int64           `json:"time"`
	Type         string          `json:"type"`
	Turn         int64           `json:"turn,omitempty"`
	ID           string          `json:"id"`
	Role         string          `json:"role"`
	Source       json.RawMessage `json:"source"`
	Message      json.RawMessage `json:"message"`
	Inherited    bool            `json:"inherited,omitempty"`   // read from the fork's source
	Summary      bool            `json:"summary,omitempty"`     // a compaction's checkpoint; what it replaced stays
	Empty        bool            `json:"empty,omitempty"`       // an answer with no content
	Interrupted  bool            `json:"interrupted,omitempty"` // an answer the user cut off
	// Ended is how a turn that did not complete ended (no message then).
	Ended  string `json:"ended,omitempty"`
	Detail string `json:"detail,omitempty"` // its error's message
}

// ErrMissingSource is wrapped when a fork's source is not in the store.
var ErrMissingSource = errors.New("the conversation a fork reads its older history from is missing")

// maxDepth bounds the chain of forks followed.
const maxDepth = 64

// ReadTranscript streams to fn the transcript of session sessionID of convID in s.
func ReadTranscript(ctx context.Context, s *store.Store, convID, sessionID string, fn func(*TranscriptItem) error) error {
	l, err := s.FindLog(convID, sessionID)
	if err != nil {
		return err
	}
	r := &transcriptReader{ctx: ctx, s: s, fn: fn, seen: map[[2]string]bool{}}
	return r.session(convID, sessionID, l.Path, -1, false, 0)
}

// ReadTranscriptLog streams to fn the transcript of the session log at path;
// a fork's inherited history is found in s (nil: such a log is refused).
func ReadTranscriptLog(ctx context.Context, s *store.Store, path string, fn func(*TranscriptItem) error) error {
	r := &transcriptReader{ctx: ctx, s: s, fn: fn, seen: map[[2]string]bool{}}
	convID, sessionID := "", ""
	if s != nil {
		if id, err := store.DecodeSegment(filepath.Base(filepath.Dir(path))); err == nil {
			convID = id
		}
		if n, ok := convlog.ParseName(filepath.Base(path)); ok {
			if id, err := store.DecodeBase(n.Base); err == nil {
				sessionID = id
			}
		}
	}
	return r.session(convID, sessionID, path, -1, false, 0)
}

// ReadTranscriptHeld streams the transcript of the unnamed log open reads (a copy
// of stdin), called name; a seeded one is refused.
func ReadTranscriptHeld(ctx context.Context, name string, open func() (*upgrade.Reader, error), fn func(*TranscriptItem) error) error {
	r := &transcriptReader{ctx: ctx, fn: fn, seen: map[[2]string]bool{}, heldName: name, held: open}
	return r.session("", "", name, -1, false, 0)
}

type transcriptReader struct {
	ctx  context.Context
	s    *store.Store
	fn   func(*TranscriptItem) error
	seen map[[2]string]bool
	// held opens the log named heldName (ReadTranscriptHeld).
	heldName string
	held     func() (*upgrade.Reader, error)
}

// open reads a log of any version as version 4, refusing another session's.
func (r *transcriptReader) open(path, sessionID string) (*upgrade.Reader, error) {
	if r.held != nil && path == r.heldName {
		return r.held()
	}
	return upgrade.Open(path, upgrade.Options{WantType: convlog.SessionLog, WantID: sessionID})
}

// session emits one session log's transcript through seq through (-1: all).
func (r *transcriptReader) session(convID, sessionID, path string, through int64, inherited bool, depth int) error {
	if depth > maxDepth || r.seen[[2]string{convID, sessionID}] {
		return fmt.Errorf("%s: the chain of forks it inherits from goes round or is longer than %d", path, maxDepth)
	}
	r.seen[[2]string{convID, sessionID}] = true
	lr, err := r.open(path, sessionID)
	if err != nil {
		return err
	}
	defer lr.Close()
	h := lr.Header()
	if h.Type != convlog.SessionLog {
		return fmt.Errorf("%s: a transcript is read from a session log, not a %s log", path, h.Type)
	}
	emit := func(it *TranscriptItem) error {
		it.Inherited = inherited
		return r.fn(it)
	}
	if !h.IsSeeded {
		return r.each(lr, convID, sessionID, through, false, false, emit)
	}
	src, err := r.source(convID, sessionID, path)
	if err != nil {
		return err
	}
	// The seed is the source's history at the cut, so its messages are read
	// from the source; what the fork added to it follows.
	var seed []TranscriptItem
	ids := map[string]bool{} // the seed's messages the source has not given
	err = r.each(lr, convID, sessionID, through, true, true, func(it *TranscriptItem) error {
		if it.ID != "" {
			ids[it.ID] = true
			it.Message = append(json.RawMessage(nil), it.Message...)
			it.Source = append(json.RawMessage(nil), it.Source...)
			seed = append(seed, *it)
		}
		return nil
	})
	if err != nil {
		return err
	}
	lr.Close()
	sl, err := r.s.FindLog(src.SourceConversation, src.SourceSession)
	if err != nil {
		return fmt.Errorf("%s: conversation %s session %s reads its older history from conversation %s session %s: %w (%v)",
			path, termtext.Quote(convID), termtext.Quote(sessionID), termtext.Quote(src.SourceConversation), termtext.Quote(src.SourceSession), ErrMissingSource, err)
	}
	outer := r.fn
	r.fn = func(it *TranscriptItem) error {
		if it.ID != "" {
			delete(ids, it.ID)
		}
		return outer(it)
	}
	err = r.session(src.SourceConversation, src.SourceSession, sl.Path, src.ThroughSeq, true, depth+1)
	r.fn = outer
	if err != nil {
		return err
	}
	for i := range seed {
		if ids[seed[i].ID] {
			if err := emit(&seed[i]); err != nil {
				return err
			}
		}
	}
	if lr, err = r.open(path, sessionID); err != nil {
		return err
	}
	defer lr.Close()
	return r.each(lr, convID, sessionID, through, true, false, emit)
}

// source is the inherited session a seeded log reads its older history from.
func (r *transcriptReader) source(convID, sessionID, path string) (*store.InheritedSession, error) {
	if r.s == nil || convID == "" || sessionID == "" {
		return nil, fmt.Errorf("%s: the log's history begins in another conversation (its header is seeded); read it by its conversation and session in its store", path)
	}
	info, err := r.s.ReadConversation(convID)
	if err != nil {
		return nil, err
	}
	for i := range info.Inherited {
		if info.Inherited[i].SessionID == sessionID {
			return &info.Inherited[i], nil
		}
	}
	return nil, fmt.Errorf("%s: the log's header is seeded, but conversation %s records no conversation session %s inherits from", path, termtext.Quote(convID), termtext.Quote(sessionID))
}

func endSeed(e *convlog.Event) bool {
	if e.Type != convlog.TypeEndSeed {
		return false
	}
	var d struct {
		Inherited bool `json:"inherited"`
	}
	return json.Unmarshal(e.Data, &d) == nil && d.Inherited
}

// each streams to fn the items of lr through seq through (-1: all); of a
// seeded log, those of its inherited history (seed) or those after it.
func (r *transcriptReader) each(lr *upgrade.Reader, convID, sessionID string, through int64, seeded, seed bool, fn func(*TranscriptItem) error) error {
	var turn int64
	for e, err := range events(r.ctx, lr) {
		if err != nil {
			return err
		}
		if through >= 0 && e.Seq > through {
			return nil
		}
		if seeded && endSeed(e) {
			if seed {
				return nil
			}
			seeded = false
			continue
		}
		if seeded != seed {
			continue
		}
		it, ok, err := itemOf(e, convID, sessionID, &turn)
		if err != nil {
			return err
		}
		if ok {
			if err := fn(&it); err != nil {
				return err
			}
		}
	}
	return nil
}

// events is lr's events with ctx checked every 1024 reads and at the end.
func events(ctx context.Context, lr *upgrade.Reader) iter.Seq2[*convlog.Event, error] {
	return func(yield func(*convlog.Event, error) bool) {
		n := 0
		for e, err := range lr.Events() {
			if n&1023 == 0 && ctx.Err() != nil {
				yield(nil, ctx.Err())
				return
			}
			n++
			if !yield(e, err) {
				return
			}
		}
		if n&1023 == 0 && ctx.Err() != nil {
			yield(nil, ctx.Err())
		}
	}
}

// itemOf is the item a surface event records; turn follows turn/start.
func itemOf(e *convlog.Event, convID, sessionID string, turn *int64) (TranscriptItem, bool, error) {
	switch e.Type {
	case convlog.TypeTurnStart:
		var d convlog.TurnStartData
		if json.Unmarshal(e.Data, &d) == nil {
			*turn = d.Turn
		}
		return TranscriptItem{}, false, nil
	case convlog.TypeTurnEnd:
		// A turn that did not complete shows how it ended.
		defer func() { *turn = 0 }()
		var d convlog.TurnEndData
		if json.Unmarshal(e.Data, &d) != nil || d.Reason.Kind == "completed" || d.Reason.Kind == "" {
			return TranscriptItem{}, false, nil
		}
		it := TranscriptItem{Conversation: convID, Session: sessionID, Seq: e.Seq, Time: e.Time, Type: e.Type, Turn: *turn, Ended: d.Reason.Kind}
		if d.Reason.Error != nil {
			it.Detail = d.Reason.Error.Message
		}
		return it, true, nil
	}
	raw := convlog.MessageOf(e)
	if raw == nil {
		return TranscriptItem{}, false, nil
	}
	m, err := convlog.ParseStoredMessage(raw)
	if err != nil {
		return TranscriptItem{}, false, fmt.Errorf("%s at seq %d: %v", e.Type, e.Seq, err)
	}
	it := TranscriptItem{Conversation: convID, Session: sessionID, Seq: e.Seq, Time: e.Time, Type: e.Type, Turn: *turn,
		ID: m.ID(), Role: m.Role(), Source: m.Source().Raw, Message: m.JSON(),
		Summary: m.Source().Kind == convlog.SourceCheckpoint}
	if e.Type == convlog.TypeAssistantMessage {
		it.Empty = m.Empty()
		var d struct {
			Interrupted bool `json:"interrupted"`
		}
		json.Unmarshal(e.Data, &d)
		it.Interrupted = d.Interrupted
	}
	return it, true, nil
}
