package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/durable"
)

// The conversation log: <data-dir>/conversations/<EncodeSegment(id)>/
// metadata.v4.jsonl[.zst]. Its header is {"type":"conversation","version":4,
// "id":...,"createdAt":...}; every event is log-only and one of the types
// below. Session logs live beside it as <EncodeBase(sessionID)>.v4.jsonl[.zst].
//
// Replaying the conversation log alone gives everything listing needs
// (ReadConversation): title, working directory, agents and models, sessions,
// turns, archive state, fork lineage and a pending deletion.

// Conversation log event types (all log-only, registered in
// convlog.ConversationLogTypes).
const (
	EventConversationCreated    = "conversation/created"
	EventConversationTitle      = "conversation/title"
	EventConversationRenamed    = "conversation/renamed"
	EventConversationArchived   = "conversation/archived"
	EventConversationUnarchived = "conversation/unarchived"
	EventConversationForked     = "conversation/forked"
	EventConversationRewound    = "conversation/rewound"
	EventConversationCwdMapped  = "conversation/cwd-mapped"
	EventDeleteStarted          = "conversation/delete-started"
	EventSessionStarted         = "session/started"
	EventTurnStarted            = "turn/started"
	EventTurnEnded              = "turn/ended"
)

// Turn outcomes recorded by turn/ended.
const (
	OutcomeCompleted   = "completed"
	OutcomeFailed      = "failed"
	OutcomeInterrupted = "interrupted"
)

// MaxAutoTitleRunes bounds an automatic title: the first line of the first
// user message, cut to this many characters (Unicode code points).
const MaxAutoTitleRunes = 40

// Errors of the conversation API. Each is wrapped with the conversation id.
var (
	// ErrNoConversation wraps fs.ErrNotExist.
	ErrNoConversation = fmt.Errorf("no such conversation: %w", fs.ErrNotExist)
	// ErrConversationExists wraps fs.ErrExist.
	ErrConversationExists = fmt.Errorf("conversation already exists: %w", fs.ErrExist)
	ErrTurnRunning        = errors.New("a turn is running")
	ErrDeleting           = errors.New("conversation is being deleted")
	ErrReadOnly           = errors.New("store is open without the exclusive runtime.lock; writing needs it")
)

// Data of the conversation log events, as stored (JSON member names in the
// tags). Empty-object events (archived, unarchived, delete-started) have no
// struct.

// CreatedData is conversation/created, always the first event.
type CreatedData struct {
	Cwd    string   `json:"cwd"`
	Agents []string `json:"agents"`
	Models []string `json:"models"`
	// Title, when present, is a title chosen by the user (a fork of a renamed
	// conversation); it is not automatic.
	Title string `json:"title,omitempty"`
}

// TitleData is conversation/title: the automatic title.
type TitleData struct {
	Title string `json:"title"`
	// MessageSeqs, when known, are the session seqs of the message(s) the
	// title was taken from.
	MessageSeqs []int64 `json:"messageSeqs,omitempty"`
}

// RenamedData is conversation/renamed: a title set by the user. From then on
// automatic titles are ignored.
type RenamedData struct {
	Title string `json:"title"`
}

// SessionStartedData is session/started. ParentSession names the parent of a
// subagent session in the same conversation; it is absent for the root.
type SessionStartedData struct {
	SessionID     string `json:"sessionId"`
	Agent         string `json:"agent"`
	Model         string `json:"model"`
	ParentSession string `json:"parentSession,omitempty"`
}

// TurnStartedData is turn/started.
type TurnStartedData struct {
	SessionID string `json:"sessionId"`
	Turn      int64  `json:"turn"`
}

// TurnEndedData is turn/ended; Outcome is completed, failed or interrupted.
type TurnEndedData struct {
	SessionID string `json:"sessionId"`
	Turn      int64  `json:"turn"`
	Outcome   string `json:"outcome"`
}

// ForkedData is conversation/forked, recorded when the conversation was
// created as a fork (or a rewind) of another one.
type ForkedData struct {
	// SessionID is this conversation's root session, made from the source.
	SessionID          string `json:"sessionId"`
	SourceConversation string `json:"sourceConversation"`
	SourceSession      string `json:"sourceSession"`
	// ThroughSeq is the last source session seq the fork took history from
	// (-1: none).
	ThroughSeq int64 `json:"throughSeq"`
	// AfterCompaction: the source had compacted its history before
	// ThroughSeq, so the fork holds only the compacted history and reads the
	// older history from the source conversation.
	AfterCompaction bool `json:"afterCompaction"`
	// InheritedSessions are this conversation's sessions whose older history
	// lives in another conversation. Each names a conversation this one
	// depends on.
	InheritedSessions []InheritedSession `json:"inheritedSessions,omitempty"`
}

// InheritedSession is one session whose history begins in another
// conversation: SourceSession of SourceConversation through ThroughSeq.
type InheritedSession struct {
	SessionID          string `json:"sessionId"`
	SourceConversation string `json:"sourceConversation"`
	SourceSession      string `json:"sourceSession"`
	ThroughSeq         int64  `json:"throughSeq"`
}

// RewoundData is conversation/rewound, recorded (after conversation/forked)
// when the fork stopped just before one of the user's messages.
type RewoundData struct {
	SourceConversation string `json:"sourceConversation"`
	SourceSession      string `json:"sourceSession"`
	BeforeSeq          int64  `json:"beforeSeq"`
	ComposerText       string `json:"composerText"`
}

// CwdMappedData is conversation/cwd-mapped: the working directory changed
// (an import onto a machine with another layout).
type CwdMappedData struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// ConversationInfo is a conversation log replayed.
type ConversationInfo struct {
	ID string
	// Title is the automatic title (TitleIsAuto) or the one the user chose;
	// "" before the first user message.
	Title       string
	TitleIsAuto bool
	Cwd         string
	// Agents and Models the conversation used, in first-use order.
	Agents    []string
	Models    []string
	CreatedAt time.Time
	// UpdatedAt is the time of the last event.
	UpdatedAt time.Time
	Archived  bool
	// Deleting: a delete was recorded (the tombstone) but the directory was
	// not removed yet. FinishDeletion completes it.
	Deleting bool
	// ForkedFrom is the source conversation of a fork or rewind.
	ForkedFrom      string
	AfterCompaction bool
	Fork            *ForkedData
	Rewind          *RewoundData
	// Inherited are the sessions whose older history lives in another
	// conversation; see Dependencies.
	Inherited   []InheritedSession
	Sessions    []SessionInfo
	Turns       []TurnInfo
	RunningTurn bool

	// LogPath is the conversation log read; Version its format version.
	LogPath  string
	Version  int
	Events   int64
	TornTail bool
	// LogBytes and LogModTime are the log's size and modification time
	// when it was opened for this replay.
	LogBytes   int64
	LogModTime time.Time
}

// SessionInfo is one session/started.
type SessionInfo struct {
	ID            string
	Agent         string
	Model         string
	ParentSession string
	// DelegationDepth is 0 for the root, parent + 1 for a subagent.
	DelegationDepth int64
	StartedAt       time.Time
}

// TurnInfo is one turn: EndedAt is zero and Outcome "" while it runs.
type TurnInfo struct {
	SessionID string
	Turn      int64
	StartedAt time.Time
	EndedAt   time.Time
	Outcome   string
}

// Running reports whether the turn has not ended.
func (t TurnInfo) Running() bool { return t.Outcome == "" }

// Session returns the session with the given id, or nil.
func (c *ConversationInfo) Session(id string) *SessionInfo {
	for i := range c.Sessions {
		if c.Sessions[i].ID == id {
			return &c.Sessions[i]
		}
	}
	return nil
}

// RootSession returns the session without a parent, or nil.
func (c *ConversationInfo) RootSession() *SessionInfo {
	for i := range c.Sessions {
		if c.Sessions[i].ParentSession == "" {
			return &c.Sessions[i]
		}
	}
	return nil
}

// Dependencies lists the conversations that must travel with c (export,
// backup checks): the conversations its inherited sessions read older
// history from. Sorted, without duplicates, never c itself.
func Dependencies(c *ConversationInfo) []string {
	var deps []string
	add := func(id string) {
		if id != "" && id != c.ID && !slices.Contains(deps, id) {
			deps = append(deps, id)
		}
	}
	for _, in := range c.Inherited {
		add(in.SourceConversation)
	}
	if c.AfterCompaction {
		add(c.ForkedFrom)
	}
	sort.Strings(deps)
	return deps
}

// DependencyClosure returns convIDs and every conversation they depend on,
// directly or through other dependencies, sorted. A missing dependency is an
// error wrapping ErrNoConversation that names it.
func DependencyClosure(dataDir string, convIDs ...string) ([]string, error) {
	seen := map[string]bool{}
	queue := append([]string(nil), convIDs...)
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		if seen[id] {
			continue
		}
		seen[id] = true
		info, err := ReadConversation(dataDir, id)
		if err != nil {
			return nil, err
		}
		queue = append(queue, Dependencies(info)...)
	}
	out := make([]string, 0, len(seen))
	for id := range seen {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

// clone returns a deep copy.
func (c *ConversationInfo) clone() *ConversationInfo {
	n := *c
	n.Agents = slices.Clone(c.Agents)
	n.Models = slices.Clone(c.Models)
	n.Inherited = slices.Clone(c.Inherited)
	n.Sessions = slices.Clone(c.Sessions)
	n.Turns = slices.Clone(c.Turns)
	if c.Fork != nil {
		f := *c.Fork
		f.InheritedSessions = slices.Clone(c.Fork.InheritedSessions)
		n.Fork = &f
	}
	if c.Rewind != nil {
		r := *c.Rewind
		n.Rewind = &r
	}
	return &n
}

// convState replays a conversation log.
type convState struct {
	info    ConversationInfo
	renamed bool
	open    map[string]int // session id -> index in info.Turns of its running turn
}

func newConvState(h *convlog.Header, path string) *convState {
	return &convState{
		info: ConversationInfo{ID: h.ID, CreatedAt: msTime(h.CreatedAt), UpdatedAt: msTime(h.CreatedAt),
			LogPath: path, Version: h.Version},
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

// apply replays one event. Event types this build does not know (ignorable
// ones) are skipped.
func (s *convState) apply(e *convlog.Event) error {
	c := &s.info
	t := msTime(e.Time)
	decode := func(v any) error {
		if err := json.Unmarshal(e.Data, v); err != nil {
			return fmt.Errorf("%s at seq %d: invalid data: %v", e.Type, e.Seq, err)
		}
		return nil
	}
	switch e.Type {
	case EventConversationCreated:
		var d CreatedData
		if !fastCreated(e.Data, &d) {
			d = CreatedData{}
			if err := decode(&d); err != nil {
				return err
			}
		}
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
	case EventConversationTitle:
		var d TitleData
		if !fastTitle(e.Data, &d) {
			d = TitleData{}
			if err := decode(&d); err != nil {
				return err
			}
		}
		if !s.renamed {
			c.Title, c.TitleIsAuto = d.Title, true
		}
	case EventConversationRenamed:
		var d RenamedData
		if !fastRenamed(e.Data, &d) {
			d = RenamedData{}
			if err := decode(&d); err != nil {
				return err
			}
		}
		c.Title, c.TitleIsAuto, s.renamed = d.Title, false, true
	case EventConversationArchived:
		c.Archived = true
	case EventConversationUnarchived:
		c.Archived = false
	case EventSessionStarted:
		var d SessionStartedData
		if !fastSessionStarted(e.Data, &d) {
			d = SessionStartedData{}
			if err := decode(&d); err != nil {
				return err
			}
		}
		si := SessionInfo{ID: d.SessionID, Agent: d.Agent, Model: d.Model, ParentSession: d.ParentSession, StartedAt: t}
		if p := c.Session(d.ParentSession); p != nil {
			si.DelegationDepth = p.DelegationDepth + 1
		} else if d.ParentSession != "" {
			si.DelegationDepth = 1
		}
		c.Sessions = append(c.Sessions, si)
		c.Agents = addUnique(c.Agents, d.Agent)
		c.Models = addUnique(c.Models, d.Model)
	case EventTurnStarted:
		var d TurnStartedData
		if !fastTurnStarted(e.Data, &d, c.Sessions) {
			d = TurnStartedData{}
			if err := decode(&d); err != nil {
				return err
			}
		}
		c.Turns = append(c.Turns, TurnInfo{SessionID: d.SessionID, Turn: d.Turn, StartedAt: t})
		s.open[d.SessionID] = len(c.Turns) - 1
	case EventTurnEnded:
		var d TurnEndedData
		if !fastTurnEnded(e.Data, &d, c.Sessions) {
			d = TurnEndedData{}
			if err := decode(&d); err != nil {
				return err
			}
		}
		if i, ok := s.open[d.SessionID]; ok && c.Turns[i].Turn == d.Turn {
			c.Turns[i].EndedAt, c.Turns[i].Outcome = t, d.Outcome
			delete(s.open, d.SessionID)
		} else {
			// An end without its start is kept, so nothing recorded is lost.
			c.Turns = append(c.Turns, TurnInfo{SessionID: d.SessionID, Turn: d.Turn, EndedAt: t, Outcome: d.Outcome})
		}
	case EventConversationForked:
		var d ForkedData
		if err := decode(&d); err != nil {
			return err
		}
		c.ForkedFrom, c.AfterCompaction, c.Fork = d.SourceConversation, d.AfterCompaction, &d
		c.Inherited = append(c.Inherited, d.InheritedSessions...)
	case EventConversationRewound:
		var d RewoundData
		if err := decode(&d); err != nil {
			return err
		}
		c.Rewind = &d
		if c.ForkedFrom == "" {
			c.ForkedFrom = d.SourceConversation
		}
	case EventConversationCwdMapped:
		var d CwdMappedData
		if err := decode(&d); err != nil {
			return err
		}
		c.Cwd = d.To
	case EventDeleteStarted:
		c.Deleting = true
	}
	c.Events++
	c.UpdatedAt = t
	c.RunningTurn = len(s.open) > 0
	return nil
}

// ReadConversation replays conversation convID's log (its highest
// generation). It takes no lock and changes nothing: a torn tail is ignored
// (TornTail is set). A missing conversation gives an error wrapping
// ErrNoConversation.
func ReadConversation(dataDir, convID string) (*ConversationInfo, error) {
	_, _, st, err := replayConversation(dataDir, convID)
	if err != nil {
		return nil, err
	}
	return &st.info, nil
}

// replayConversation finds conversation convID's directory and current log
// and replays it, checking that the log names the conversation its
// directory does.
func replayConversation(dataDir, convID string) (dir, path string, st *convState, err error) {
	if dir, err = conversationDir(dataDir, convID); err != nil {
		return "", "", nil, err
	}
	if path, err = conversationLogPath(dir, convID); err != nil {
		return "", "", nil, err
	}
	if st, err = replayFile(path); err != nil {
		return "", "", nil, err
	}
	if st.info.ID != convID {
		return "", "", nil, fmt.Errorf("%s: header names conversation %q, but the directory is conversation %q", path, st.info.ID, convID)
	}
	return dir, path, st, nil
}

// ReadConversationFile replays the conversation log at path.
func ReadConversationFile(path string) (*ConversationInfo, error) {
	st, err := replayFile(path)
	if err != nil {
		return nil, err
	}
	return &st.info, nil
}

func replayFile(path string) (*convState, error) {
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	h := r.Header()
	if h.Type != convlog.ConversationLog {
		return nil, fmt.Errorf("%s: not a conversation log (header type %q)", path, h.Type)
	}
	st := newConvState(h, path)
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := st.apply(e); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	stats := r.Stats()
	st.info.TornTail = stats.TornTail
	st.info.LogBytes, st.info.LogModTime = stats.FileBytes, r.ModTime()
	return st, nil
}

// currentGeneration finds the highest generation of base in dir (ties: the
// first by name, as Walk decides). Only regular files count.
func currentGeneration(dir, base string) (convlog.Name, bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return convlog.Name{}, false, err
	}
	var best convlog.Name
	found := false
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		n, ok := convlog.ParseName(e.Name())
		if !ok || n.Base != base {
			continue
		}
		if !found || n.Version > best.Version || (n.Version == best.Version && n.String() < best.String()) {
			best, found = n, true
		}
	}
	return best, found, nil
}

func conversationLogPath(dir, convID string) (string, error) {
	n, ok, err := currentGeneration(dir, ConversationLogBase)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !ok) {
		return "", fmt.Errorf("conversation %q: %w", convID, ErrNoConversation)
	}
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, n.String()), nil
}

// SessionLogFile returns the path of the highest generation of session
// sessionID's log in conversation convID.
func SessionLogFile(dataDir, convID, sessionID string) (string, error) {
	dir, err := conversationDir(dataDir, convID)
	if err != nil {
		return "", err
	}
	base, err := EncodeBase(sessionID)
	if err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	n, ok, err := currentGeneration(dir, base)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !ok) {
		return "", fmt.Errorf("conversation %q has no log for session %q: %w", convID, sessionID, fs.ErrNotExist)
	}
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, n.String()), nil
}

// AutoTitle is the automatic title of a first user message: its first
// non-blank line, trimmed and cut to MaxAutoTitleRunes characters.
func AutoTitle(text string) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if utf8.RuneCountInString(line) > MaxAutoTitleRunes {
			r := []rune(line)
			line = strings.TrimRightFunc(string(r[:MaxAutoTitleRunes]), func(r rune) bool { return r == ' ' || r == '\t' })
		}
		return line
	}
	return ""
}

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

func nonNil(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

func checkCwd(cwd string) error {
	if !filepath.IsAbs(cwd) || !strings.HasPrefix(cwd, "/") {
		return fmt.Errorf("working directory %q is not an absolute path", cwd)
	}
	return nil
}

// newConversationDir checks that convID is free and returns its directory.
func (s *Store) newConversationDir(convID string) (string, error) {
	dir, err := ConversationPath(s.dataDir, convID)
	if err != nil {
		return "", err
	}
	if _, err := os.Lstat(dir); err == nil {
		return "", fmt.Errorf("conversation %q (%s): %w", convID, dir, ErrConversationExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	return dir, nil
}

// createLog publishes a new conversation log holding first as its first
// batch, and caches it.
func (s *Store) createLog(convID, dir string, first []convlog.Event) error {
	path := filepath.Join(dir, ConversationLogName(convlog.CurrentVersion, s.comp))
	h := &convlog.Header{Type: convlog.ConversationLog, Version: convlog.CurrentVersion, ID: convID}
	if len(first) > 0 {
		h.CreatedAt = first[0].Time // the creation's own time
	} else {
		h.CreatedAt = s.nowMs()
	}
	w, err := convlog.Create(path, h, first, convlog.WriterOptions{Compression: s.comp})
	if err != nil {
		return err
	}
	st := newConvState(h, path)
	for i := range first {
		first[i].Seq = int64(i)
		if err := st.apply(&first[i]); err != nil {
			w.Close()
			return err
		}
	}
	s.convs[convID] = &openConv{dir: dir, w: w, st: st}
	return nil
}

// CreateConversation creates conversation id working in cwd (an absolute
// path) with the agents and models named so far. The directory must not
// exist.
func (s *Store) CreateConversation(id, cwd string, agents, models []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	if err := checkCwd(cwd); err != nil {
		return err
	}
	dir, err := s.newConversationDir(id)
	if err != nil {
		return err
	}
	ev, err := s.event(EventConversationCreated, CreatedData{Cwd: cwd, Agents: nonNil(agents), Models: nonNil(models)})
	if err != nil {
		return err
	}
	if err := s.createLog(id, dir, []convlog.Event{ev}); err != nil {
		// Nothing refers to a directory without a conversation log.
		os.RemoveAll(dir)
		return err
	}
	return nil
}

// sessionHeader builds a new session's header in conversation info.
func (s *Store) sessionHeader(info *ConversationInfo, sessionID, parentSession string) (*convlog.Header, error) {
	h := &convlog.Header{Type: convlog.SessionLog, Version: convlog.CurrentVersion, ID: sessionID,
		CreatedAt: s.nowMs(), Cwd: info.Cwd}
	if parentSession != "" {
		p := info.Session(parentSession)
		if p == nil {
			return nil, fmt.Errorf("conversation %q has no session %q to be the parent of %q", info.ID, parentSession, sessionID)
		}
		h.ParentSession, h.Origin, h.DelegationDepth = parentSession, "subagent", p.DelegationDepth+1
	}
	return h, nil
}

func (s *Store) checkNewSession(info *ConversationInfo, sessionID, parentSession string) error {
	if _, err := EncodeBase(sessionID); err != nil {
		return fmt.Errorf("session id: %w", err)
	}
	if info.Session(sessionID) != nil {
		return fmt.Errorf("conversation %q already has session %q", info.ID, sessionID)
	}
	if parentSession == "" {
		if r := info.RootSession(); r != nil {
			return fmt.Errorf("conversation %q already has root session %q", info.ID, r.ID)
		}
	} else if info.Session(parentSession) == nil {
		return fmt.Errorf("conversation %q has no session %q to be the parent of %q", info.ID, parentSession, sessionID)
	}
	return nil
}

// StartSession creates session sessionID's log in conversation convID and
// records session/started. parentSession "" starts the root session (one per
// conversation); otherwise the session is a subagent of parentSession
// (origin "subagent", delegation depth parent+1). The caller appends the
// session's events to the returned writer and closes it.
func (s *Store) StartSession(convID, sessionID, agent, model, parentSession string) (*convlog.Writer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	oc, err := s.liveConv(convID)
	if err != nil {
		return nil, err
	}
	info := &oc.st.info
	if err := s.checkNewSession(info, sessionID, parentSession); err != nil {
		return nil, err
	}
	h, err := s.sessionHeader(info, sessionID, parentSession)
	if err != nil {
		return nil, err
	}
	name, err := SessionLogName(sessionID, convlog.CurrentVersion, s.comp)
	if err != nil {
		return nil, err
	}
	// The log first: the conversation log never names a session whose log
	// was not published.
	w, err := convlog.Create(filepath.Join(oc.dir, name), h, nil, convlog.WriterOptions{Compression: s.comp})
	if err != nil {
		return nil, err
	}
	ev, err := s.event(EventSessionStarted, SessionStartedData{SessionID: sessionID, Agent: agent, Model: model, ParentSession: parentSession})
	if err == nil {
		err = oc.appendEvents(ev)
	}
	if err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// RegisterSession records session/started for a session whose log the
// caller writes itself (import, fixtures writing historical logs). It checks
// the same as StartSession but creates no file.
func (s *Store) RegisterSession(convID, sessionID, agent, model, parentSession string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	oc, err := s.liveConv(convID)
	if err != nil {
		return err
	}
	if err := s.checkNewSession(&oc.st.info, sessionID, parentSession); err != nil {
		return err
	}
	ev, err := s.event(EventSessionStarted, SessionStartedData{SessionID: sessionID, Agent: agent, Model: model, ParentSession: parentSession})
	if err != nil {
		return err
	}
	return oc.appendEvents(ev)
}

// BeginTurn records turn/started for a session. For the root session's
// turns, until the conversation is renamed and while it has no title, the
// automatic title is taken from userText (the user's message) in the same
// batch. A session runs one turn at a time.
func (s *Store) BeginTurn(convID, sessionID string, turn int64, userText string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	oc, err := s.liveConv(convID)
	if err != nil {
		return err
	}
	info := &oc.st.info
	sess := info.Session(sessionID)
	if sess == nil {
		return fmt.Errorf("conversation %q has no session %q", convID, sessionID)
	}
	if i, ok := oc.st.open[sessionID]; ok {
		return fmt.Errorf("conversation %q session %q: turn %d is still running: %w", convID, sessionID, info.Turns[i].Turn, ErrTurnRunning)
	}
	ev, err := s.event(EventTurnStarted, TurnStartedData{SessionID: sessionID, Turn: turn})
	if err != nil {
		return err
	}
	evs := []convlog.Event{ev}
	if sess.ParentSession == "" && info.Title == "" && !oc.st.renamed {
		if title := AutoTitle(userText); title != "" {
			tev, err := s.event(EventConversationTitle, TitleData{Title: title})
			if err != nil {
				return err
			}
			evs = append(evs, tev)
		}
	}
	return oc.appendEvents(evs...)
}

// EndTurn records turn/ended for the session's running turn.
func (s *Store) EndTurn(convID, sessionID string, turn int64, outcome string) error {
	switch outcome {
	case OutcomeCompleted, OutcomeFailed, OutcomeInterrupted:
	default:
		return fmt.Errorf("turn outcome %q is not %s, %s or %s", outcome, OutcomeCompleted, OutcomeFailed, OutcomeInterrupted)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	oc, err := s.liveConv(convID)
	if err != nil {
		return err
	}
	i, ok := oc.st.open[sessionID]
	if !ok || oc.st.info.Turns[i].Turn != turn {
		return fmt.Errorf("conversation %q session %q has no running turn %d", convID, sessionID, turn)
	}
	ev, err := s.event(EventTurnEnded, TurnEndedData{SessionID: sessionID, Turn: turn, Outcome: outcome})
	if err != nil {
		return err
	}
	return oc.appendEvents(ev)
}

// Rename sets the title; automatic titles no longer apply.
func (s *Store) Rename(convID, title string) error {
	title = strings.TrimSpace(title)
	if title == "" {
		return errors.New("a title cannot be empty")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	oc, err := s.liveConv(convID)
	if err != nil {
		return err
	}
	ev, err := s.event(EventConversationRenamed, RenamedData{Title: title})
	if err != nil {
		return err
	}
	return oc.appendEvents(ev)
}

// Archive hides the conversation from the main list; it changes nothing
// else and does not stop a running turn. Archiving an archived conversation
// records nothing.
func (s *Store) Archive(convID string) error { return s.setArchived(convID, true) }

// Unarchive brings an archived conversation back.
func (s *Store) Unarchive(convID string) error { return s.setArchived(convID, false) }

func (s *Store) setArchived(convID string, archived bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	oc, err := s.liveConv(convID)
	if err != nil {
		return err
	}
	if oc.st.info.Archived == archived {
		return nil
	}
	typ := EventConversationUnarchived
	if archived {
		typ = EventConversationArchived
	}
	ev, err := s.event(typ, nil)
	if err != nil {
		return err
	}
	return oc.appendEvents(ev)
}

// MapCwd records a new working directory (an absolute path).
func (s *Store) MapCwd(convID, to string) error {
	if err := checkCwd(to); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	oc, err := s.liveConv(convID)
	if err != nil {
		return err
	}
	if oc.st.info.Cwd == to {
		return nil
	}
	ev, err := s.event(EventConversationCwdMapped, CwdMappedData{From: oc.st.info.Cwd, To: to})
	if err != nil {
		return err
	}
	return oc.appendEvents(ev)
}

// Delete removes a conversation for good: refused while a turn runs, it
// records the conversation/delete-started tombstone durably, then removes the
// directory and fsyncs conversations/. A crash in between leaves the
// tombstone, and FinishDeletion (reindex) completes the job. Deleting a
// conversation that already carries a tombstone finishes it.
func (s *Store) Delete(convID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.markDeleting(convID); err != nil {
		return err
	}
	return s.removeConversation(convID)
}

// MarkDeleting is Delete's first step alone: it checks that no turn runs and
// records the tombstone, leaving the directory in place as an interrupted
// deletion would. The runtime calls Delete; fixtures and crash tests use this
// to produce an interrupted deletion.
func (s *Store) MarkDeleting(convID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.markDeleting(convID)
}

func (s *Store) markDeleting(convID string) error {
	if err := s.writable(); err != nil {
		return err
	}
	oc, err := s.conv(convID)
	if err != nil {
		return err
	}
	info := &oc.st.info
	if info.Deleting {
		return nil
	}
	if info.RunningTurn {
		var running []string
		for _, t := range info.Turns {
			if t.Running() {
				running = append(running, fmt.Sprintf("session %q turn %d", t.SessionID, t.Turn))
			}
		}
		return fmt.Errorf("cannot delete conversation %q: %w (%s); wait for it to end or interrupt it",
			convID, ErrTurnRunning, strings.Join(running, ", "))
	}
	ev, err := s.event(EventDeleteStarted, nil)
	if err != nil {
		return err
	}
	return oc.appendEvents(ev) // durable: Append fsyncs
}

// FinishDeletion completes a deletion whose tombstone was found (reindex
// calls it). A conversation without a tombstone is refused; one already gone
// is done.
func (s *Store) FinishDeletion(convID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return err
	}
	oc, err := s.conv(convID)
	if errors.Is(err, ErrNoConversation) {
		dir, derr := ConversationPath(s.dataDir, convID)
		if derr != nil {
			return derr
		}
		if _, serr := os.Lstat(dir); errors.Is(serr, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	if !oc.st.info.Deleting {
		return fmt.Errorf("conversation %q has no deletion tombstone; delete it with Delete", convID)
	}
	return s.removeConversation(convID)
}

// removeConversation removes the directory of a tombstoned conversation. The
// conversation log (holding the tombstone) goes last, so a crash never
// leaves session logs without the record that they are being deleted.
func (s *Store) removeConversation(convID string) error {
	dir, err := conversationDir(s.dataDir, convID)
	if err != nil {
		return err
	}
	if oc := s.convs[convID]; oc != nil {
		oc.w.Close()
		delete(s.convs, convID)
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var last []string
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if n, ok := convlog.ParseName(e.Name()); ok && n.Base == ConversationLogBase && e.Type().IsRegular() {
			last = append(last, p)
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			return fmt.Errorf("delete conversation %q: %w", convID, err)
		}
	}
	if len(entries) > 0 {
		if err := durable.SyncDir(dir); err != nil {
			return err
		}
	}
	for _, p := range last {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete conversation %q: %w", convID, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("delete conversation %q: %w", convID, err)
	}
	return durable.SyncDir(ConversationsDir(s.dataDir))
}

// Fork copies conversation srcConv into the new conversation newConv: only
// the history of the root session srcSession through seq throughSeq (-1: its
// last event), as the root session newSession. Subagents, queued input and
// the archived state are not copied.
//
// When the source session compacted its history (a compaction/end, or a
// user/message with source kind "compact-checkpoint") at or before
// throughSeq, the fork does not copy the older history: newSession's log is
// seeded (isSeeded, parentSession = srcSession) with the history the model
// reads at throughSeq, closed by session/end-seed {"inherited":true}, and the
// fork's conversation log records afterCompaction and the dependency on
// srcConv. Otherwise events 0..throughSeq are copied as they are; a turn left
// open at the cut is closed (interrupted tool calls get error results, then
// step/end and turn/end with reason "forked").
func (s *Store) Fork(srcConv, srcSession, newConv, newSession string, throughSeq int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.fork(forkRequest{srcConv: srcConv, srcSession: srcSession, newConv: newConv, newSession: newSession,
		throughSeq: throughSeq, rewindSeq: -1})
	return err
}

// Rewind is a fork that stops just before one of the user's messages (the
// user/message with source kind "user" at beforeSeq of srcSession) and
// returns that message's text for the composer. When the message opens its
// turn, the fork stops before that turn. The source stays as it was.
func (s *Store) Rewind(srcConv, srcSession, newConv, newSession string, beforeSeq int64) (string, error) {
	if beforeSeq < 0 {
		return "", fmt.Errorf("rewind: seq %d is not an event", beforeSeq)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fork(forkRequest{srcConv: srcConv, srcSession: srcSession, newConv: newConv, newSession: newSession,
		rewindSeq: beforeSeq})
}

type forkRequest struct {
	srcConv, srcSession, newConv, newSession string
	throughSeq                               int64
	rewindSeq                                int64 // -1 for a plain fork
}

// forkScan is what a first pass over the source session finds.
type forkScan struct {
	header         *convlog.Header
	lastSeq        int64
	lastCompaction int64 // -1: none
	firstUser      int64 // first user/message of kind user, -1: none
	endSeed        int64 // last inherited session/end-seed, -1: none
	// rewind
	composer string
	cut      int64
}

func (s *Store) fork(req forkRequest) (string, error) {
	if err := s.writable(); err != nil {
		return "", err
	}
	if _, err := EncodeBase(req.newSession); err != nil {
		return "", fmt.Errorf("session id: %w", err)
	}
	src, err := s.conv(req.srcConv)
	if err != nil {
		return "", err
	}
	srcInfo := src.st.info.clone()
	if srcInfo.Deleting {
		return "", fmt.Errorf("conversation %q: %w", req.srcConv, ErrDeleting)
	}
	sess := srcInfo.Session(req.srcSession)
	if sess == nil {
		return "", fmt.Errorf("conversation %q has no session %q", req.srcConv, req.srcSession)
	}
	if sess.ParentSession != "" {
		return "", fmt.Errorf("session %q of conversation %q is a subagent; only the root session can be forked", req.srcSession, req.srcConv)
	}
	newDir, err := s.newConversationDir(req.newConv)
	if err != nil {
		return "", err
	}
	done := false
	defer func() {
		if !done {
			// Until its conversation log is published the new directory
			// is nobody's: a failed fork leaves nothing behind.
			os.RemoveAll(newDir)
		}
	}()
	srcPath, err := SessionLogFile(s.dataDir, req.srcConv, req.srcSession)
	if err != nil {
		return "", err
	}
	if n, _ := convlog.ParseName(filepath.Base(srcPath)); n.Version != convlog.CurrentVersion {
		return "", fmt.Errorf("%s: session log is format v%d; upgrade it to v%d (convkit migrate) before forking", srcPath, n.Version, convlog.CurrentVersion)
	}
	sc, err := scanForFork(srcPath, req.rewindSeq)
	if err != nil {
		return "", err
	}
	cut := req.throughSeq
	if req.rewindSeq >= 0 {
		cut = sc.cut
	} else if cut < 0 {
		cut = sc.lastSeq
	}
	if cut > sc.lastSeq {
		return "", fmt.Errorf("%s: seq %d is beyond the log's last event (%d)", srcPath, cut, sc.lastSeq)
	}
	afterCompaction := sc.lastCompaction >= 0 && sc.lastCompaction <= cut
	if !afterCompaction && sc.header.IsSeeded && cut < sc.endSeed {
		return "", fmt.Errorf("%s: seq %d is inside the inherited history (through seq %d); fork at or after it", srcPath, cut, sc.endSeed)
	}

	// The session log first, fully; the conversation log last: until it is
	// published the directory is no conversation.
	h := &convlog.Header{Type: convlog.SessionLog, Version: convlog.CurrentVersion, ID: req.newSession,
		CreatedAt: s.nowMs(), Cwd: srcInfo.Cwd, AgentPreset: sc.header.AgentPreset}
	var inherited []InheritedSession
	switch {
	case afterCompaction:
		h.IsSeeded, h.ParentSession = true, req.srcSession
		inherited = []InheritedSession{{SessionID: req.newSession, SourceConversation: req.srcConv,
			SourceSession: req.srcSession, ThroughSeq: cut}}
	case sc.header.IsSeeded:
		// A copy of a seeded session inherits what the source inherited.
		h.IsSeeded, h.ParentSession = true, sc.header.ParentSession
		for _, in := range srcInfo.Inherited {
			if in.SessionID == req.srcSession {
				in.SessionID = req.newSession
				inherited = append(inherited, in)
			}
		}
	}
	name, err := SessionLogName(req.newSession, convlog.CurrentVersion, s.comp)
	if err != nil {
		return "", err
	}
	sessPath := filepath.Join(newDir, name)
	if afterCompaction {
		err = s.writeSeed(srcPath, sessPath, h, cut)
	} else {
		err = s.copyHistory(srcPath, sessPath, h, cut)
	}
	if err != nil {
		return "", err
	}

	var evs []convlog.Event
	add := func(typ string, v any) {
		if err == nil {
			var ev convlog.Event
			ev, err = s.event(typ, v)
			evs = append(evs, ev)
		}
	}
	created := CreatedData{Cwd: srcInfo.Cwd, Agents: nonNil(nil), Models: nonNil(nil)}
	created.Agents = addUnique(created.Agents, sess.Agent)
	created.Models = addUnique(created.Models, sess.Model)
	autoTitle := ""
	if srcInfo.Title != "" {
		if !srcInfo.TitleIsAuto {
			created.Title = srcInfo.Title
		} else if sc.firstUser >= 0 && sc.firstUser <= cut {
			autoTitle = srcInfo.Title
		}
	}
	add(EventConversationCreated, created)
	add(EventSessionStarted, SessionStartedData{SessionID: req.newSession, Agent: sess.Agent, Model: sess.Model})
	if autoTitle != "" {
		add(EventConversationTitle, TitleData{Title: autoTitle})
	}
	add(EventConversationForked, ForkedData{SessionID: req.newSession, SourceConversation: req.srcConv,
		SourceSession: req.srcSession, ThroughSeq: cut, AfterCompaction: afterCompaction, InheritedSessions: inherited})
	if req.rewindSeq >= 0 {
		add(EventConversationRewound, RewoundData{SourceConversation: req.srcConv, SourceSession: req.srcSession,
			BeforeSeq: req.rewindSeq, ComposerText: sc.composer})
	}
	if err != nil {
		return "", err
	}
	if err := s.createLog(req.newConv, newDir, evs); err != nil {
		return "", err
	}
	done = true
	return sc.composer, nil
}

// messageProbe reads what fork needs of a message.
type messageProbe struct {
	Role       string          `json:"role"`
	ID         string          `json:"id"`
	ToolCallID string          `json:"toolCallId"`
	Source     json.RawMessage `json:"source"`
	Content    []struct {
		Type string `json:"type"`
		Text string `json:"text"`
		ID   string `json:"id"`
	} `json:"content"`
}

func (m *messageProbe) kind() string {
	var src struct {
		Kind string `json:"kind"`
	}
	json.Unmarshal(m.Source, &src)
	return src.Kind
}

func (m *messageProbe) text() string {
	var parts []string
	for _, b := range m.Content {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// eventMessage returns the message a surface event carries.
func eventMessage(e *convlog.Event) (*messageProbe, error) {
	var m messageProbe
	if e.Type == convlog.TypeUserMessage {
		if err := json.Unmarshal(e.Data, &m); err != nil {
			return nil, fmt.Errorf("%s at seq %d: %v", e.Type, e.Seq, err)
		}
		return &m, nil
	}
	var d struct {
		Message *messageProbe `json:"message"`
	}
	if err := json.Unmarshal(e.Data, &d); err != nil || d.Message == nil {
		return nil, fmt.Errorf("%s at seq %d: data has no message", e.Type, e.Seq)
	}
	return d.Message, nil
}

type turnStep struct {
	Turn int64 `json:"turn"`
	Step int64 `json:"step"`
}

func scanForFork(path string, rewindSeq int64) (*forkScan, error) {
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	sc := &forkScan{header: r.Header(), lastSeq: -1, lastCompaction: -1, firstUser: -1, endSeed: -1, cut: -1}
	turnStart := int64(-1) // seq of the open turn's turn/start
	turnContent := false   // the open turn has history beyond system/message
	foundRewind := false
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		sc.lastSeq = e.Seq
		switch e.Type {
		case "turn/start":
			turnStart, turnContent = e.Seq, false
		case convlog.TypeTurnEnd:
			turnStart = -1
		case "compaction/end":
			sc.lastCompaction = e.Seq
		case "session/end-seed":
			var d struct {
				Inherited bool `json:"inherited"`
			}
			if json.Unmarshal(e.Data, &d) == nil && d.Inherited {
				sc.endSeed = e.Seq
			}
		case convlog.TypeUserMessage:
			m, err := eventMessage(e)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			kind := m.kind()
			if kind == string(convlog.SourceCheckpoint) {
				sc.lastCompaction = e.Seq
			}
			if kind == string(convlog.SourceUser) && sc.firstUser < 0 {
				sc.firstUser = e.Seq
			}
			if e.Seq == rewindSeq {
				if kind != string(convlog.SourceUser) {
					return nil, fmt.Errorf("%s: seq %d is a %q message, not one of the user's", path, e.Seq, kind)
				}
				foundRewind = true
				sc.composer = m.text()
				sc.cut = e.Seq - 1
				if turnStart >= 0 && !turnContent {
					sc.cut = turnStart - 1
				}
			}
		}
		if e.Seq == rewindSeq && !foundRewind {
			return nil, fmt.Errorf("%s: seq %d is a %s event, not one of the user's messages", path, e.Seq, e.Type)
		}
		if info := convlog.DefaultRegistry.Lookup(e.Type); info != nil && info.Surface && e.Type != convlog.TypeSystemMessage {
			turnContent = true
		}
		if rewindSeq >= 0 && foundRewind && e.Seq >= rewindSeq {
			break
		}
	}
	if rewindSeq >= 0 && !foundRewind {
		return nil, fmt.Errorf("%s: no event at seq %d", path, rewindSeq)
	}
	if sc.lastCompaction <= sc.endSeed {
		// A checkpoint inside an inherited prefix was compacted in the
		// conversation this one inherits from: a copy keeps that dependency.
		sc.lastCompaction = -1
	}
	return sc, nil
}

// closer tracks the open turn, step and tool calls of a copied prefix, to
// close it at the cut.
type closer struct {
	turn, step int64
	turnOpen   bool
	stepOpen   bool
	calls      []string // tool calls of the open step without a result, in order
}

func (c *closer) observe(e *convlog.Event) {
	switch e.Type {
	case "turn/start":
		var d turnStep
		json.Unmarshal(e.Data, &d)
		c.turn, c.turnOpen, c.stepOpen, c.calls = d.Turn, true, false, nil
	case convlog.TypeTurnEnd:
		c.turnOpen, c.stepOpen, c.calls = false, false, nil
	case "step/start":
		var d turnStep
		json.Unmarshal(e.Data, &d)
		c.step, c.stepOpen, c.calls = d.Step, true, nil
	case "step/end":
		c.stepOpen = false
	case convlog.TypeAssistantMessage:
		if m, err := eventMessage(e); err == nil {
			for _, b := range m.Content {
				if b.Type == "tool-call" && b.ID != "" {
					c.calls = append(c.calls, b.ID)
				}
			}
		}
	case convlog.TypeToolResult:
		if m, err := eventMessage(e); err == nil {
			c.calls = slices.DeleteFunc(c.calls, func(id string) bool { return id == m.ToolCallID })
		}
	}
}

// forkedToolResult is the error result of a tool call a fork cut off.
func forkedToolResult(turn, step int64, callID string, seq int64) []byte {
	str := func(v string) string {
		b, _ := encodeData(v)
		return string(b)
	}
	id := fmt.Sprintf("forked-tool-result-%s-%d", callID, seq)
	return []byte(fmt.Sprintf(`{"turn":%d,"step":%d,"message":{"role":"tool","source":{"kind":"tool","callId":%s},`+
		`"toolCallId":%s,"content":[{"type":"text","text":"The tool call was cut off when the conversation was forked. `+
		`Retry it if it is still needed."}],"isError":true,"id":%s}}`, turn, step, str(callID), str(callID), str(id)))
}

// closing returns the events that close an open turn at the cut; next is the
// seq the first of them gets.
func (c *closer) closing(next int64, now int64) []convlog.Event {
	var evs []convlog.Event
	if !c.turnOpen {
		return nil
	}
	app := &convlog.SurfaceOp{}
	if c.stepOpen {
		for _, id := range c.calls {
			evs = append(evs, convlog.Event{Type: convlog.TypeToolResult, Time: now,
				Data: forkedToolResult(c.turn, c.step, id, next+int64(len(evs))), SurfaceOp: app})
		}
		evs = append(evs, convlog.Event{Type: "step/end", Time: now, Data: []byte(fmt.Sprintf(`{"turn":%d,"step":%d}`, c.turn, c.step))})
	}
	evs = append(evs, convlog.Event{Type: convlog.TypeTurnEnd, Time: now,
		Data: []byte(fmt.Sprintf(`{"turn":%d,"reason":{"kind":"forked"}}`, c.turn))})
	return evs
}

// batchLimit bounds a copy batch (events and bytes), so memory stays flat.
const (
	batchEvents = 1024
	batchBytes  = 4 << 20
)

// batcher streams events into a new log: the first batch is published with
// the header, later ones are appended.
type batcher struct {
	path  string
	h     *convlog.Header
	comp  convlog.Compression
	w     *convlog.Writer
	evs   []convlog.Event
	bytes int
}

func (b *batcher) add(e convlog.Event) error {
	b.evs = append(b.evs, e)
	b.bytes += len(e.Data)
	if len(b.evs) >= batchEvents || b.bytes >= batchBytes {
		return b.flush()
	}
	return nil
}

func (b *batcher) flush() error {
	var err error
	if b.w == nil {
		b.w, err = convlog.Create(b.path, b.h, b.evs, convlog.WriterOptions{Compression: b.comp})
	} else if len(b.evs) > 0 {
		err = b.w.Append(b.evs)
	}
	b.evs, b.bytes = b.evs[:0], 0
	return err
}

func (b *batcher) close() error {
	err := b.flush()
	if b.w != nil {
		err = errors.Join(err, b.w.Close())
	}
	return err
}

// nextSeq is the seq the next added event will get.
func (b *batcher) nextSeq() int64 {
	n := int64(len(b.evs))
	if b.w != nil {
		n += b.w.NextSeq()
	}
	return n
}

// copyHistory copies events 0..cut of src into a new log and closes a turn
// left open at the cut.
func (s *Store) copyHistory(src, dst string, h *convlog.Header, cut int64) error {
	b := &batcher{path: dst, h: h, comp: s.comp}
	var cl closer
	if cut >= 0 {
		r, err := convlog.Open(src, convlog.ReaderOptions{})
		if err != nil {
			return err
		}
		defer r.Close()
		for {
			e, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			if e.Seq > cut {
				break
			}
			cl.observe(e)
			if err := b.add(e.Clone()); err != nil {
				b.close()
				return err
			}
		}
	}
	for _, e := range cl.closing(b.nextSeq(), s.nowMs()) {
		if err := b.add(e); err != nil {
			b.close()
			return err
		}
	}
	return b.close()
}

// surfaceNode is one node of the source's current history.
type surfaceNode struct {
	seq       int64
	typ       string
	time      int64
	data      []byte
	ignorable bool
}

// writeSeed writes a seeded log holding the history the model reads at cut
// (each node re-appended), error results for tool calls that have none, and
// the inherited session/end-seed marker.
func (s *Store) writeSeed(src, dst string, h *convlog.Header, cut int64) error {
	r, err := convlog.Open(src, convlog.ReaderOptions{})
	if err != nil {
		return err
	}
	defer r.Close()
	var nodes []surfaceNode
	for {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if e.Seq > cut {
			break
		}
		if e.SurfaceOp == nil {
			continue
		}
		n := surfaceNode{seq: e.Seq, typ: e.Type, time: e.Time, data: bytes.Clone(e.Data), ignorable: e.Ignorable}
		if !e.SurfaceOp.Replace {
			nodes = append(nodes, n)
			continue
		}
		start := slices.IndexFunc(nodes, func(x surfaceNode) bool { return x.seq == e.SurfaceOp.StartSeq })
		end := slices.IndexFunc(nodes, func(x surfaceNode) bool { return x.seq == e.SurfaceOp.EndSeq })
		if start < 0 || end < start {
			return fmt.Errorf("%s: %s at seq %d replaces %d..%d, which is not a span of the current history",
				src, e.Type, e.Seq, e.SurfaceOp.StartSeq, e.SurfaceOp.EndSeq)
		}
		nodes = slices.Replace(nodes, start, end+1, n)
	}
	b := &batcher{path: dst, h: h, comp: s.comp}
	app := &convlog.SurfaceOp{}
	var pending []string
	var last turnStep
	for _, n := range nodes {
		e := convlog.Event{Type: n.typ, Time: n.time, Data: n.data, SurfaceOp: app, Ignorable: n.ignorable}
		if m, err := eventMessage(&e); err == nil {
			switch n.typ {
			case convlog.TypeAssistantMessage:
				json.Unmarshal(n.data, &last)
				for _, blk := range m.Content {
					if blk.Type == "tool-call" && blk.ID != "" {
						pending = append(pending, blk.ID)
					}
				}
			case convlog.TypeToolResult:
				pending = slices.DeleteFunc(pending, func(id string) bool { return id == m.ToolCallID })
			}
		}
		if err := b.add(e); err != nil {
			b.close()
			return err
		}
	}
	now := s.nowMs()
	for _, id := range pending {
		e := convlog.Event{Type: convlog.TypeToolResult, Time: now, Data: forkedToolResult(last.Turn, last.Step, id, b.nextSeq()), SurfaceOp: app}
		if err := b.add(e); err != nil {
			b.close()
			return err
		}
	}
	if err := b.add(convlog.Event{Type: "session/end-seed", Time: now, Data: []byte(`{"inherited":true}`)}); err != nil {
		b.close()
		return err
	}
	return b.close()
}
