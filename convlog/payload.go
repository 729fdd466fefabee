package convlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
)

// Payload types: the data of the events a turn records, encoding to the
// members docs/FORMAT.md gives each type in the runtime's order.

// Block is one content block of a stored message; Type says which members
// it uses (Arguments is the model's raw JSON text).
type Block struct {
	Type       string
	Text       string
	ID         string
	Name       string
	Arguments  string
	Attachment *Attachment
}

// Attachment is the file an image or file block names; MediaType, Width and
// Height are an image's, Name a file's (optional on an image).
type Attachment struct {
	ID        string
	MediaType string
	Bytes     int64
	Width     int64
	Height    int64
	Name      string
}

func TextBlock(text string) Block { return Block{Type: BlockText, Text: text} }

// Check says what is wrong with the block, or nil: its kind one of the
// five this build writes, its members as the format's block schema says.
func (b Block) Check() error {
	switch b.Type {
	case BlockText, BlockReasoning, BlockToolCall:
	case BlockImage, BlockFile:
		if b.Attachment == nil {
			return fmt.Errorf("a %s block needs an attachment", b.Type)
		}
	case "":
		return fmt.Errorf("a content block needs a type")
	default:
		return fmt.Errorf("content block type %s is not one this build writes (text, reasoning, tool-call, image, file)", termtext.Quote(b.Type))
	}
	w := walk{b: b.appendJSON(nil)}
	if p := w.block(slotPlain, nil); p != nil {
		return fmt.Errorf("a %s block: %s: %s", b.Type, strings.TrimPrefix(p.path, "."), p.msg)
	}
	return nil
}

// MarshalJSON writes exactly the block type's members.
func (b Block) MarshalJSON() ([]byte, error) {
	if err := b.Check(); err != nil {
		return nil, err
	}
	return b.appendJSON(nil), nil
}

func (b Block) appendJSON(d []byte) []byte {
	d = rawjson.AppendString(append(d, `{"type":`...), b.Type)
	switch b.Type {
	case BlockText, BlockReasoning:
		d = rawjson.AppendString(append(d, `,"text":`...), b.Text)
	case BlockToolCall:
		d = rawjson.AppendString(append(d, `,"id":`...), b.ID)
		d = rawjson.AppendString(append(d, `,"name":`...), b.Name)
		d = rawjson.AppendString(append(d, `,"arguments":`...), b.Arguments)
	case BlockImage, BlockFile:
		a := b.Attachment
		d = rawjson.AppendString(append(d, `,"attachment":{"attachmentId":`...), a.ID)
		if b.Type == BlockImage {
			d = rawjson.AppendString(append(d, `,"mediaType":`...), a.MediaType)
		}
		d = rawjson.AppendInt(append(d, `,"bytes":`...), a.Bytes)
		if b.Type == BlockImage {
			d = rawjson.AppendInt(append(d, `,"width":`...), a.Width)
			d = rawjson.AppendInt(append(d, `,"height":`...), a.Height)
		}
		if a.Name != "" {
			d = rawjson.AppendString(append(d, `,"name":`...), a.Name)
		}
		d = append(d, '}')
	}
	return append(d, '}')
}

// BlocksJSON is the JSON array of blocks, each checked.
func BlocksJSON(blocks []Block) (json.RawMessage, error) {
	d := []byte{'['}
	for i, b := range blocks {
		if err := b.Check(); err != nil {
			return nil, fmt.Errorf("content block %d: %w", i, err)
		}
		if i > 0 {
			d = append(d, ',')
		}
		d = b.appendJSON(d)
	}
	return append(d, ']'), nil
}

// NewMessage builds a stored message in the runtime's key order role,
// content, source, id.
func NewMessage(id, role string, source Source, blocks []Block) (StoredMessage, error) {
	content, err := BlocksJSON(blocks)
	if err != nil {
		return StoredMessage{}, fmt.Errorf("message %s: %w", termtext.Quote(id), err)
	}
	return NewStoredMessage(id, role, source, content)
}

// NewUserMessage is a message the user sent (source kind user).
func NewUserMessage(id string, blocks ...Block) (StoredMessage, error) {
	return NewMessage(id, "user", Source{Kind: SourceUser}, blocks)
}

// NewToolMessage is the result of tool call callID, in the runtime's key
// order role, source, toolCallId, content, isError, id.
func NewToolMessage(id, callID string, isError bool, blocks []Block) (StoredMessage, error) {
	if callID == "" {
		return StoredMessage{}, fmt.Errorf("tool result %s needs the id of its call", termtext.Quote(id))
	}
	content, err := BlocksJSON(blocks)
	if err != nil {
		return StoredMessage{}, fmt.Errorf("message %s: %w", termtext.Quote(id), err)
	}
	src := sourceJSON(SourceTool, "callId", callID)
	d := append([]byte(`{"role":"tool","source":`), src...)
	d = rawjson.AppendString(append(d, `,"toolCallId":`...), callID)
	d = append(append(d, `,"content":`...), content...)
	d = fmt.Appendf(d, `,"isError":%t,"id":`, isError)
	d = append(rawjson.AppendString(d, id), '}')
	return ParseStoredMessage(d)
}

// sourceJSON is a source object: kind, then the key/value string pairs.
func sourceJSON(kind SourceKind, kv ...string) []byte {
	d := rawjson.AppendString([]byte(`{"kind":`), string(kind))
	for i := 0; i+1 < len(kv); i += 2 {
		d = append(d, ',')
		d = rawjson.AppendString(d, kv[i])
		d = append(d, ':')
		d = rawjson.AppendString(d, kv[i+1])
	}
	return append(d, '}')
}

// ModelSource is the source of a model's answer.
func ModelSource(provider, model string) Source {
	return Source{Kind: SourceModel, Raw: sourceJSON(SourceModel, "provider", provider, "model", model)}
}

// CheckpointSource is the source of a compaction's checkpoint; commandID
// ("": none) is the command that started the compaction.
func CheckpointSource(compactionID, commandID string) Source {
	kv := []string{"compactionId", compactionID}
	if commandID != "" {
		kv = append(kv, "sourceCommandId", commandID)
	}
	return Source{Kind: SourceCheckpoint, Raw: sourceJSON(SourceCheckpoint, kv...)}
}

// SourceSubagentSettled is the source kind of a subagent's report to its
// parent after each of its turns.
const SourceSubagentSettled SourceKind = "subagent-settled"

// SubagentSource is the source of a subagent's report.
func SubagentSource(senderSession, summary string) Source {
	return Source{Kind: SourceSubagentSettled, Raw: sourceJSON(SourceSubagentSettled, "form", "notice",
		"senderSessionId", senderSession, "summary", summary)}
}

// Usage is the token usage a provider reported for a model call.
type Usage struct {
	InputTokens      int64 `json:"inputTokens"`
	OutputTokens     int64 `json:"outputTokens"`
	CacheReadTokens  int64 `json:"cacheReadTokens,omitempty"`
	CacheWriteTokens int64 `json:"cacheWriteTokens,omitempty"`
	ReasoningTokens  int64 `json:"reasoningTokens,omitempty"`
	TotalTokens      int64 `json:"totalTokens,omitempty"`
}

// LLMFailure is why a model call failed.
type LLMFailure struct {
	Code                 string `json:"code"`
	Message              string `json:"message"`
	Status               int64  `json:"status,omitempty"`
	RequestID            string `json:"requestId,omitempty"`
	ProviderRetryAfterMs int64  `json:"providerRetryAfterMs,omitempty"`
}

// Check says what is wrong with the failure, or nil.
func (f *LLMFailure) Check() error {
	if f == nil || f.Code == "" || f.Message == "" {
		return fmt.Errorf("a model call's failure needs a code and a message")
	}
	return nil
}

// TurnStep is the data of step/start and step/end.
type TurnStep struct {
	Turn int64 `json:"turn"`
	Step int64 `json:"step"`
}

// TurnStartData is the data of turn/start.
type TurnStartData struct {
	Turn int64 `json:"turn"`
}

// TurnEndReason is how a turn ended: an aborted turn gives its Cause, a
// failed one its Error.
type TurnEndReason struct {
	Kind  string       `json:"kind"`
	Cause *CancelCause `json:"reason,omitempty"`
	Error *LLMFailure  `json:"error,omitempty"`
}

// CancelCause is who aborted a turn.
type CancelCause struct {
	Kind   string `json:"kind"`
	Reason string `json:"reason,omitempty"`
}

// TurnEndData is the data of turn/end.
type TurnEndData struct {
	Turn   int64         `json:"turn"`
	Reason TurnEndReason `json:"reason"`
}

// InboxSplicedData is the data of agent/inbox/spliced.
type InboxSplicedData struct {
	Target       string            `json:"target"`
	Start        int64             `json:"start"`
	RemovedCount int64             `json:"removedCount,omitempty"`
	Inserted     []json.RawMessage `json:"inserted"`
}

// RequestHeaderData is the data of request/header.
type RequestHeaderData struct {
	Header       EpochHeader `json:"header"`
	Reason       string      `json:"reason"`
	StartsSeries bool        `json:"startsSeries,omitempty"`
}

// EpochHeader is a request header: the configuration, which of its values
// the adapter chose, and the tools offered.
type EpochHeader struct {
	Config          LLMConfig        `json:"config"`
	AdapterDefaults *AdapterDefaults `json:"adapterDefaults,omitempty"`
	Tools           []ToolSchema     `json:"tools,omitempty"`
}

// LLMConfig is a model call's configuration.
type LLMConfig struct {
	Provider        string   `json:"provider"`
	Model           string   `json:"model"`
	MaxTokens       int64    `json:"maxTokens,omitempty"`
	ReasoningEffort string   `json:"reasoningEffort,omitempty"`
	Temperature     *float64 `json:"temperature,omitempty"`
	Stop            []string `json:"stop,omitempty"`
}

// AdapterDefaults marks the configuration values the adapter chose.
type AdapterDefaults struct {
	ReasoningEffort bool `json:"reasoningEffort,omitempty"`
	MaxTokens       bool `json:"maxTokens,omitempty"`
}

// ToolSchema is a tool offered to the model; Parameters is any value that
// encodes to a JSON object (its JSON Schema).
type ToolSchema struct {
	Name         string `json:"name"`
	Description  string `json:"description"`
	Parameters   any    `json:"parameters"`
	DeferLoading bool   `json:"deferLoading,omitempty"`
}

// Check says what is wrong with the tool, or nil.
func (t ToolSchema) Check() error {
	if t.Name == "" {
		return fmt.Errorf("a tool needs a name")
	}
	p, err := EncodeData(t.Parameters)
	if err != nil || len(p) == 0 || p[0] != '{' {
		return fmt.Errorf("tool %s: parameters must be a JSON object (a JSON Schema)", termtext.Quote(t.Name))
	}
	return nil
}

// ToolCallData is the data of tool/call.
type ToolCallData struct {
	Turn      int64  `json:"turn"`
	Step      int64  `json:"step"`
	CallID    string `json:"callId"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolError is the error a failed tool result carries.
type ToolError struct {
	Name   string `json:"name"`
	Code   string `json:"code"`
	Reason string `json:"reason,omitempty"`
}

// ToolResultData is the data of tool/result.
type ToolResultData struct {
	Turn    int64           `json:"turn"`
	Step    int64           `json:"step"`
	Message json.RawMessage `json:"message"`
	Error   *ToolError      `json:"error,omitempty"`
}

// MessageData is the data of system/message and developer/message;
// HeaderSeq names the request/header defining a developer message's added
// tools.
type MessageData struct {
	Turn      int64           `json:"turn"`
	Step      int64           `json:"step"`
	Message   json.RawMessage `json:"message"`
	HeaderSeq *int64          `json:"headerSeq,omitempty"`
}

// AnswerData is the data of assistant/message.
type AnswerData struct {
	Turn        int64           `json:"turn"`
	Step        int64           `json:"step"`
	Message     json.RawMessage `json:"message"`
	Usage       *Usage          `json:"usage,omitempty"`
	Stream      json.RawMessage `json:"stream"`
	Interrupted bool            `json:"interrupted,omitempty"`
}

// AttemptData is the data of assistant/attempt: a model call that gave no
// answer.
type AttemptData struct {
	Turn   int64           `json:"turn"`
	Step   int64           `json:"step"`
	Stream json.RawMessage `json:"stream"`
}

// RetryData is the data of llm/retry; Retry counts the attempts of one
// chain (turn, step, provider and PolicyKey) from 1 under one RetryID.
type RetryData struct {
	Mode       string     `json:"mode"`
	Turn       int64      `json:"turn"`
	Step       int64      `json:"step"`
	Provider   string     `json:"provider"`
	PolicyKey  string     `json:"policyKey"`
	RetryID    string     `json:"retryId"`
	Retry      int64      `json:"retry"`
	DelayMs    int64      `json:"delayMs"`
	MaxRetries *int64     `json:"maxRetries,omitempty"`
	Failure    LLMFailure `json:"failure"`
}

// RetryStartedData is the data of llm/retry-started.
type RetryStartedData struct {
	Turn    int64  `json:"turn"`
	Step    int64  `json:"step"`
	RetryID string `json:"retryId"`
	Retry   int64  `json:"retry"`
}

// SeqRange is an inclusive span of seqs.
type SeqRange struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// CompactionStartData is the data of compaction/start; Turn is nil
// between turns.
type CompactionStartData struct {
	CompactionID    string `json:"compactionId"`
	SourceCommandID string `json:"sourceCommandId,omitempty"`
	Turn            *int64 `json:"turn"`
}

// CompactionSummaryData is the data of compaction/summary.
type CompactionSummaryData struct {
	CompactionID       string   `json:"compactionId"`
	SourceCommandID    string   `json:"sourceCommandId,omitempty"`
	Summary            []Block  `json:"summary"`
	ShadowedRange      SeqRange `json:"shadowedRange"`
	ShadowedSeqs       []int64  `json:"shadowedSeqs"`
	ShadowedTokenCount int64    `json:"shadowedTokenCount"`
	Provider           string   `json:"provider"`
	Model              string   `json:"model"`
	MaxTokens          int64    `json:"maxTokens,omitempty"`
	Usage              *Usage   `json:"usage,omitempty"`
}

// CompactionEndData is the data of compaction/end.
type CompactionEndData struct {
	CompactionID    string `json:"compactionId"`
	SourceCommandID string `json:"sourceCommandId,omitempty"`
	Turn            *int64 `json:"turn"`
	Error           string `json:"error,omitempty"`
}

// SubagentCatalogData is the data of subagent/catalog in a parent's log.
type SubagentCatalogData struct {
	Version        int64  `json:"version"`
	Mode           string `json:"mode"`
	Label          string `json:"label"`
	ChildID        string `json:"childId"`
	ChildCreatedAt int64  `json:"childCreatedAt"`
}

// EncodeData is v as an event's data: JSON without HTML escaping.
func EncodeData(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
