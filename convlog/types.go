package convlog

// Log-only event types of a version 4 session log that a turn records
// (docs/FORMAT.md, "What a turn records"); the surface types and turn/end
// are in registry.go. store.Session records each through a typed call, so
// a runtime never spells one.
const (
	TypeTurnStart         = "turn/start"
	TypeStepStart         = "step/start"
	TypeStepEnd           = "step/end"
	TypeRequestHeader     = "request/header"
	TypeRequestContext    = "request/context"
	TypeAssistantAttempt  = "assistant/attempt"
	TypeRetry             = "llm/retry"
	TypeRetryStarted      = "llm/retry-started"
	TypeToolCall          = "tool/call"
	TypeInboxSpliced      = "agent/inbox/spliced"
	TypeCompactionStart   = "compaction/start"
	TypeCompactionSummary = "compaction/summary"
	TypeCompactionEnd     = "compaction/end"
	TypeCompactionPrune   = "compaction/prune"
	TypeImageOffload      = "image/offload"
	TypeEndSeed           = "session/end-seed"
	TypeSubagentCatalog   = "subagent/catalog"
	TypeSessionTitle      = "session/title"
	TypeTitleRequest      = "session/title-llm-request"
	TypeCommandRun        = "command/run"
	TypeCommandDone       = "command/done"
	TypePTCStart          = "tool/ptc-dispatch-start"
	TypePTC               = "tool/ptc-dispatch"
)

// Turn end reason kinds (TurnEndReason.Kind; TurnEndKinds lists them all).
const (
	EndCompleted   = "completed"
	EndAborted     = "aborted"
	EndBlocked     = "blocked"
	EndError       = "error"
	EndMaxTokens   = "max-tokens"
	EndInterrupted = "interrupted"
	EndForked      = "forked"
)

// Content block types.
const (
	BlockText      = "text"
	BlockReasoning = "reasoning"
	BlockToolCall  = "tool-call"
	BlockImage     = "image"
	BlockFile      = "file"
)

// Inbox splice targets (InboxSplicedData.Target).
const (
	// SpliceNextTurn admits a prompt that starts the next turn.
	SpliceNextTurn = "next-turn"
	// SpliceNextStep hands a message to the running turn, which reads it
	// before its next model call (steering, a subagent's report).
	SpliceNextStep = "next-step"
)

// Request header reasons (RequestHeaderData.Reason).
const (
	// HeaderInitial: the first request/header of the log.
	HeaderInitial = "initial"
	// HeaderResume: the first request of a runtime over a log that has
	// headers already (a restart, a fork).
	HeaderResume = "resume"
	// HeaderChange: a later request whose header differs.
	HeaderChange = "change"
	// HeaderSeries: an unchanged header that starts a new message series,
	// after a surface replacement (a compaction).
	HeaderSeries = "series"
)

// Finish reason kinds of a model call's stream (FinishReason.Kind).
const (
	FinishStop      = "stop"
	FinishToolCalls = "tool-calls"
	FinishMaxTokens = "max-tokens"
	FinishError     = "error"
	FinishAborted   = "aborted"
)

// Retry modes (RetryData.Mode): normal retries stop after MaxRetries,
// always ones do not.
const (
	RetryNormal = "normal"
	RetryAlways = "always"
)
