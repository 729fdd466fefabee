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
// holds the events below, its sessions' logs beside it; replaying it alone
// gives everything listing needs.
const (
	EventConversationCreated    = "conversation/created"
	EventConversationTitle      = "conversation/title"
	eventConversationRenamed    = "conversation/renamed"
	eventConversationArchived   = "conversation/archived"
	eventConversationUnarchived = "conversation/unarchived"
	eventConversationForked     = "conversation/forked"
	eventConversationRewound    = "conversation/rewound"
	EventConversationCwdMapped  = "conversation/cwd-mapped"
	eventDeleteStarted          = "conversation/delete-started"
	EventSessionStarted         = "session/started"
	EventTurnStarted            = "turn/started"
	EventTurnEnded              = "turn/ended"
)

// Turn outcomes recorded by turn/ended (TurnInfo.Outcome, OutcomeOf).
// Session.EndTurn takes completed or failed; a turn ends interrupted
// through Session.Interrupt or a repair.
const (
	OutcomeCompleted   = "completed"
	OutcomeFailed      = "failed"
	OutcomeInterrupted = "interrupted"
)

// maxAutoTitleRunes bounds an automatic title, in characters.
const maxAutoTitleRunes = 40

// Errors of the conversation API, each wrapped with the conversation id.
var (
	ErrNoConversation     = fmt.Errorf("no such conversation: %w", os.ErrNotExist)
	ErrConversationExists = fmt.Errorf("conversation already exists: %w", os.ErrExist)
	ErrTurnRunning        = errors.New("a turn is running")
	ErrDeleting           = errors.New("conversation is being deleted")
	ErrReadOnly           = errors.New("store is open without the exclusive runtime.lock; writing needs it")
)

// Data of the conversation log events as stored (archived, unarchived and
// delete-started carry {}).

// CreatedData is conversation/created, always the first event; Title is one
// the user chose (a fork of a renamed conversation).
type CreatedData struct {
	Cwd    string   `json:"cwd"`
	Agents []string `json:"agents"`
	Models []string `json:"models"`
	Title  string   `json:"title,omitempty"`
}

// TitleData is conversation/title, the automatic title, and the session
// seqs of the messages it was taken from.
type TitleData struct {
	Title       string  `json:"title"`
	MessageSeqs []int64 `json:"messageSeqs,omitempty"`
}

// renamedData is conversation/renamed: the user's title, which ends
// automatic ones.
type renamedData struct {
	Title string `json:"title"`
}

// SessionStartedData is session/started; ParentSession is a subagent's
// parent ("" for the root).
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

// ForkedData is conversation/forked, recorded by a fork or a rewind of the
// source through ThroughSeq (-1: none) into root session SessionID. After a
// compaction the fork reads older history from the source; the sessions
// whose older history lives elsewhere are InheritedSessions.
type ForkedData struct {
	SessionID          string             `json:"sessionId"`
	SourceConversation string             `json:"sourceConversation"`
	SourceSession      string             `json:"sourceSession"`
	ThroughSeq         int64              `json:"throughSeq"`
	AfterCompaction    bool               `json:"afterCompaction"`
	InheritedSessions  []InheritedSession `json:"inheritedSessions,omitempty"`
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

// cwdMappedData is conversation/cwd-mapped: the working directory changed.
type cwdMappedData struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// ConversationInfo is a conversation log replayed. Title is "" before the
// first user message; Agents and Models are in first-use order; UpdatedAt is
// the last event's time; Deleting: the tombstone is recorded
// (FinishDeletion); ForkedFrom is a fork's or rewind's source; Inherited:
// see Dependencies.
type ConversationInfo struct {
	ID              string
	Title           string
	TitleIsAuto     bool
	Cwd             string
	Agents          []string
	Models          []string
	CreatedAt       time.Time
	UpdatedAt       time.Time
	Archived        bool
	Deleting        bool
	ForkedFrom      string
	AfterCompaction bool
	Fork            *ForkedData
	Rewind          *RewoundData
	Inherited       []InheritedSession
	Sessions        []SessionInfo
	Turns           []TurnInfo
	RunningTurn     bool
}

// SessionInfo is one session/started; delegationDepth is 0 for the root.
type SessionInfo struct {
	ID              string
	Agent           string
	Model           string
	ParentSession   string
	delegationDepth int64
}

// TurnInfo is one turn: EndedAt is zero and Outcome "" while it runs.
type TurnInfo struct {
	SessionID string
	Turn      int64
	StartedAt time.Time
	EndedAt   time.Time
	Outcome   string
}

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

// Dependencies lists, sorted, the other conversations c reads older history
// from: those that must travel with it.
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
