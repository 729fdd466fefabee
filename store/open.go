package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/durable"
)

// OpenOptions configure Open.
type OpenOptions struct {
	// Lock: LockExclusive for the runtime and writing commands, LockNone
	// for readers (which then cannot write).
	Lock LockOptions
	// Compression of logs created from now on (existing logs keep theirs).
	Compression convlog.Compression
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Store is an open data directory: the conversation API the runtime and the
// writing commands use. Every change is one durable batch appended to the
// conversation's log through convlog.Writer. A Store is safe for concurrent
// use; operations are serialized.
type Store struct {
	dataDir string
	lock    *Lock
	now     func() time.Time

	mu    sync.Mutex
	comp  convlog.Compression
	convs map[string]*openConv
}

type openConv struct {
	dir string
	w   *convlog.Writer
	st  *convState
}

// Open opens the store in dataDir, taking runtime.lock as opts.Lock says.
// With the exclusive lock it creates the data directory and conversations/
// (0700) when missing.
func Open(ctx context.Context, dataDir string, opts OpenOptions) (*Store, error) {
	lock, err := AcquireLock(ctx, dataDir, opts.Lock)
	if err != nil {
		return nil, err
	}
	if lock.Mode() == LockExclusive {
		if err := durable.MkdirAll(ConversationsDir(dataDir)); err != nil {
			lock.Release()
			return nil, err
		}
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	return &Store{dataDir: dataDir, lock: lock, now: now, comp: opts.Compression, convs: map[string]*openConv{}}, nil
}

// DataDir is the store's directory.
func (s *Store) DataDir() string { return s.dataDir }

// Lock is the hold on runtime.lock.
func (s *Store) Lock() *Lock { return s.lock }

// SetCompression sets the compression of logs created from now on.
func (s *Store) SetCompression(c convlog.Compression) {
	s.mu.Lock()
	s.comp = c
	s.mu.Unlock()
}

// Close closes every open log and releases runtime.lock.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	ids := make([]string, 0, len(s.convs))
	for id := range s.convs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		errs = append(errs, s.convs[id].w.Close())
	}
	s.convs = map[string]*openConv{}
	errs = append(errs, s.lock.Release())
	return errors.Join(errs...)
}

func (s *Store) nowMs() int64 { return s.now().UnixMilli() }

func (s *Store) writable() error {
	if s.lock == nil || s.lock.Mode() != LockExclusive {
		return ErrReadOnly
	}
	return nil
}

// conv returns the open conversation, opening its log for appending.
func (s *Store) conv(convID string) (*openConv, error) {
	if oc := s.convs[convID]; oc != nil {
		return oc, nil
	}
	dir, path, st, err := replayConversation(s.dataDir, convID)
	if err != nil {
		return nil, err
	}
	w, err := convlog.OpenAppend(path, convlog.WriterOptions{})
	if err != nil {
		return nil, err
	}
	oc := &openConv{dir: dir, w: w, st: st}
	s.convs[convID] = oc
	return oc, nil
}

// liveConv is conv for a change: the conversation must not be deleting.
func (s *Store) liveConv(convID string) (*openConv, error) {
	if err := s.writable(); err != nil {
		return nil, err
	}
	oc, err := s.conv(convID)
	if err != nil {
		return nil, err
	}
	if oc.st.info.Deleting {
		return nil, fmt.Errorf("conversation %q: %w", convID, ErrDeleting)
	}
	return oc, nil
}

// event builds a conversation log event with data v (nil: {}).
func (s *Store) event(typ string, v any) (convlog.Event, error) {
	data := []byte("{}")
	if v != nil {
		var err error
		if data, err = encodeData(v); err != nil {
			return convlog.Event{}, fmt.Errorf("%s: %w", typ, err)
		}
	}
	return convlog.Event{Type: typ, Time: s.nowMs(), Data: data}, nil
}

// encodeData is encoding/json without HTML escaping and without the
// trailing newline.
func encodeData(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// appendEvents writes events as one durable batch and replays them.
func (oc *openConv) appendEvents(evs ...convlog.Event) error {
	seq := oc.w.NextSeq()
	if err := oc.w.Append(evs); err != nil {
		return err
	}
	for i := range evs {
		evs[i].Seq = seq + int64(i)
		if err := oc.st.apply(&evs[i]); err != nil {
			return err
		}
	}
	return nil
}

// Conversation returns conversation convID as this store sees it (a copy).
func (s *Store) Conversation(convID string) (*ConversationInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.writable() != nil {
		return ReadConversation(s.dataDir, convID)
	}
	oc, err := s.conv(convID)
	if err != nil {
		return nil, err
	}
	return oc.st.info.clone(), nil
}
