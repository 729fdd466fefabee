package store

import (
	"encoding/json"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/termtext"
)

// DependencyClosure returns convIDs and every conversation they depend on,
// sorted; a missing one is an error wrapping ErrNoConversation.
func (s *Store) DependencyClosure(convIDs ...string) ([]string, error) {
	seen := map[string]bool{}
	queue := append([]string(nil), convIDs...)
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if seen[id] {
			continue
		}
		seen[id] = true
		info, err := s.ReadConversation(id)
		if err != nil {
			return nil, err
		}
		queue = append(queue, Dependencies(info)...)
	}
	return slices.Sorted(maps.Keys(seen)), nil
}

type convState struct {
	info    ConversationInfo
	renamed bool
	open    map[string]int // session id -> index in info.Turns of its running turn
	// turns refuses a log recording a turn twice (the index keys turns by
	// session and number) as the Validator does.
	turns convlog.TurnRecords
}

func newConvState(h *convlog.Header) *convState {
	return &convState{
		info: ConversationInfo{ID: h.ID, CreatedAt: msTime(h.CreatedAt), UpdatedAt: msTime(h.CreatedAt)},
		open: map[string]int{},
	}
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func addUnique(list []string, v string) []string {
	if v == "" || slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// on decodes e's data by fast (nil: none), or where it gives up by
// json.Unmarshal into a zero value, and applies it with fn.
func on[T any](e *convlog.Event, fast func([]byte, *T) bool, fn func(d *T)) error {
	d := new(T)
	if fast == nil || !fast(e.Data, d) {
		*d = *new(T)
		if err := json.Unmarshal(e.Data, d); err != nil {
			return fmt.Errorf("%s at seq %d: invalid data: %v", e.Type, e.Seq, err)
		}
	}
	fn(d)
	return nil
}

// apply replays one event; types this build does not know are skipped.
func (s *convState) apply(e *convlog.Event) error {
	c := &s.info
	t := msTime(e.Time)
	var err, dup error
	switch e.Type {
	case EventConversationCreated:
		err = on(e, fastCreated, func(d *CreatedData) {
			c.Cwd = d.Cwd
			for _, a := range d.Agents {
				c.Agents = addUnique(c.Agents, a)
			}
			for _, m := range d.Models {
				c.Models = addUnique(c.Models, m)
			}
			if d.Title != "" {
				c.Title, c.TitleIsAuto, s.renamed = d.Title, false, true
			}
		})
	case EventConversationTitle:
		err = on(e, fastTitle, func(d *TitleData) {
			if !s.renamed {
				c.Title, c.TitleIsAuto = d.Title, true
			}
		})
	case eventConversationRenamed:
		err = on(e, nil, func(d *renamedData) { c.Title, c.TitleIsAuto, s.renamed = d.Title, false, true })
	case eventConversationArchived:
		c.Archived = true
	case eventConversationUnarchived:
		c.Archived = false
	case EventSessionStarted:
		err = on(e, fastSessionStarted, func(d *SessionStartedData) {
			si := SessionInfo{ID: d.SessionID, Agent: d.Agent, Model: d.Model, ParentSession: d.ParentSession}
			if p := c.Session(d.ParentSession); p != nil {
				si.delegationDepth = p.delegationDepth + 1
			} else if d.ParentSession != "" {
				si.delegationDepth = 1
			}
			c.Sessions = append(c.Sessions, si)
			c.Agents = addUnique(c.Agents, d.Agent)
			c.Models = addUnique(c.Models, d.Model)
		})
	case EventTurnStarted:
		fast := func(b []byte, d *TurnStartedData) bool { return fastTurn(b, &d.SessionID, &d.Turn, nil, c.Sessions) }
		err = on(e, fast, func(d *TurnStartedData) {
			if _, dup = s.turns.Add(e, d.SessionID, d.Turn); dup == nil {
				c.Turns = append(c.Turns, TurnInfo{SessionID: d.SessionID, Turn: d.Turn, StartedAt: t})
				s.open[d.SessionID] = len(c.Turns) - 1
			}
		})
	case EventTurnEnded:
		fast := func(b []byte, d *TurnEndedData) bool {
			return fastTurn(b, &d.SessionID, &d.Turn, &d.Outcome, c.Sessions)
		}
		err = on(e, fast, func(d *TurnEndedData) {
			var closes bool
			switch closes, dup = s.turns.Add(e, d.SessionID, d.Turn); {
			case dup != nil:
			case closes:
				i := s.open[d.SessionID]
				c.Turns[i].EndedAt, c.Turns[i].Outcome = t, d.Outcome
				delete(s.open, d.SessionID)
			default:
				// An end without its start is kept, so nothing recorded is lost.
				c.Turns = append(c.Turns, TurnInfo{SessionID: d.SessionID, Turn: d.Turn, EndedAt: t, Outcome: d.Outcome})
			}
		})
	case eventConversationForked:
		err = on(e, nil, func(d *ForkedData) {
			c.ForkedFrom, c.AfterCompaction, c.Fork = d.SourceConversation, d.AfterCompaction, d
			c.Inherited = append(c.Inherited, d.InheritedSessions...)
		})
	case eventConversationRewound:
		err = on(e, nil, func(d *RewoundData) {
			c.Rewind = d
			if c.ForkedFrom == "" {
				c.ForkedFrom = d.SourceConversation
			}
		})
	case EventConversationCwdMapped:
		err = on(e, nil, func(d *cwdMappedData) { c.Cwd = d.To })
	case eventDeleteStarted:
		c.Deleting = true
	}
	if err != nil {
		return err
	}
	if dup != nil {
		return dup
	}
	c.UpdatedAt = t
	c.RunningTurn = len(s.open) > 0
	return nil
}

// ReadConversation replays conversation convID's log without a lock; a torn
// tail is ignored (TornTail), a missing one wraps ErrNoConversation.
func (s *Store) ReadConversation(convID string) (*ConversationInfo, error) {
	l, err := s.FindLog(convID, "")
	if err != nil {
		return nil, err
	}
	return l.ReadConversation()
}

// ReadConversation replays the log, a conversation log; one naming another
// conversation is a *convlog.IdentityError.
func (l Log) ReadConversation() (*ConversationInfo, error) {
	st, err := l.replay()
	if err != nil {
		return nil, err
	}
	return &st.info, nil
}

func (l Log) replay() (*convState, error) {
	r, err := l.Open(convlog.ReaderOptions{})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	p := l.Replayer(r)
	for e, err := range r.Events() {
		if err != nil {
			return nil, err
		}
		if p.Add(e); p.err != nil {
			return nil, p.err
		}
	}
	if _, err := p.Finish(r); err != nil {
		return nil, err
	}
	return p.st, nil
}

// A Replayer replays a conversation log from the events of a read its
// caller makes anyway, finding what Log.ReadConversation finds.
type Replayer struct {
	st   *convState
	path string
	err  error
}

// Replayer starts the replay of the log from r, opened with its
// ReaderOptions.
func (l Log) Replayer(r *convlog.Reader) *Replayer {
	h := r.Header()
	if h.Type != convlog.ConversationLog {
		return &Replayer{path: l.Path, err: fmt.Errorf("%s: not a conversation log (header type %s)", l.Path, termtext.Quote(h.Type))}
	}
	return &Replayer{st: newConvState(h), path: l.Path}
}

// Add replays one event. After an error nothing more is replayed.
func (p *Replayer) Add(e *convlog.Event) {
	if p.err != nil {
		return
	}
	if err := p.st.apply(e); err != nil {
		p.err = fmt.Errorf("%s: %w", p.path, err)
	}
}

// Finish ends the replay once r returned io.EOF.
func (p *Replayer) Finish(r *convlog.Reader) (*ConversationInfo, error) {
	if p.err != nil {
		return nil, p.err
	}
	return &p.st.info, nil
}

// A log's place in the store says whose it is, and a log whose header names
// another is refused when opened (*convlog.IdentityError); readers get Log
// values from the handle and open them through their methods.

// LogAt is the log at name, a slash-separated path in the data directory (an
// archive's entry), with that generation as its current one. It reads
// nothing.
func (s *Store) LogAt(name string) (Log, error) {
	dir, file := path.Split(name)
	conv := path.Base(dir)
	if path.Clean(dir) != path.Join(ConversationsDirName, conv) || conv == "." || conv == ".." {
		return Log{}, fmt.Errorf("%s: not a log of the store (%s/<conversation>/<log>)", name, ConversationsDirName)
	}
	return logIn(filepath.Join(s.dataDir, filepath.FromSlash(name)), conv, file)
}

// LooseLog is the log at path, laid out as a store's but in no open store.
func LooseLog(path string) (Log, error) {
	return logIn(path, filepath.Base(filepath.Dir(path)), filepath.Base(path))
}

// logIn is the Log of the file at p in conversation directory convDir.
func logIn(p, convDir, file string) (Log, error) {
	n, ok := convlog.ParseName(file)
	if !ok {
		return Log{}, fmt.Errorf("%s: not a log file name (<base>[.vN].jsonl[.zst])", p)
	}
	conv, err := DecodeSegment(convDir)
	if err != nil {
		return Log{}, fmt.Errorf("%s: not in a conversation directory: %w", p, err)
	}
	l := Log{Base: n.Base, Conversation: conv, Generations: []convlog.Name{n}, Current: n, Path: p}
	if n.Base == ConversationLogBase {
		l.IsConversationLog = true
	} else if l.ID, err = DecodeBase(n.Base); err != nil {
		return Log{}, fmt.Errorf("%s: %w", p, err)
	}
	return l, nil
}

// identity is the header type and id the log's place implies.
func (l Log) identity() (typ, id string) {
	if l.IsConversationLog {
		return convlog.ConversationLog, l.Conversation
	}
	return convlog.SessionLog, l.ID
}

// ReaderOptions is opts with the identity the log's place implies, for
// readers with a descriptor of their own.
func (l Log) ReaderOptions(opts convlog.ReaderOptions) convlog.ReaderOptions {
	opts.WantType, opts.WantID = l.identity()
	return opts
}

// Open opens the log's current generation as convlog.Open does, checking
// the identity its place implies.
func (l Log) Open(opts convlog.ReaderOptions) (*convlog.Reader, error) {
	return convlog.Open(l.Path, l.ReaderOptions(opts))
}

// CheckHeader refuses h unless it names the log its place implies.
func (l Log) CheckHeader(h *convlog.Header) error {
	typ, id := l.identity()
	if err := convlog.CheckIdentity(h, typ, id); err != nil {
		return fmt.Errorf("%s: %w", l.Path, err)
	}
	return nil
}
