package store

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"time"
)

// The conversation log, conversations/<EncodeSegment(id)>/metadata.v4.jsonl[.zst],
// holds the log-only events below, its sessions' logs beside it; replaying it
// alone gives everything listing needs.

// Conversation log event types (convlog.ConversationLogTypes).
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
	// ErrNoConversation wraps os.ErrNotExist.
	ErrNoConversation = fmt.Errorf("no such conversation: %w", os.ErrNotExist)
	// ErrConversationExists wraps os.ErrExist.
	ErrConversationExists = fmt.Errorf("conversation already exists: %w", os.ErrExist)
	ErrTurnRunning        = errors.New("a turn is running")
	ErrDeleting           = errors.New("conversation is being deleted")
	ErrReadOnly           = errors.New("store is open without the exclusive runtime.lock; writing needs it")
)

// Data of the conversation log events as stored; empty-object events
// (archived, unarchived, delete-started) have no struct.

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

// ForkedData is conversation/forked, recorded by a fork or a rewind.
type ForkedData struct {
	// SessionID is this conversation's root session, made from the source.
	SessionID          string `json:"sessionId"`
	SourceConversation string `json:"sourceConversation"`
	SourceSession      string `json:"sourceSession"`
	// ThroughSeq is the last source session seq the fork took history from
	// (-1: none).
	ThroughSeq int64 `json:"throughSeq"`
	// AfterCompaction: the source had compacted its history before ThroughSeq,
	// so the fork reads the older history from the source.
	AfterCompaction bool `json:"afterCompaction"`
	// InheritedSessions are the sessions whose older history lives in another
	// conversation, which this one depends on.
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
