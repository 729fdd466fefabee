package convlog

import (
	"encoding/json"
	"fmt"

	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
)

// SourceKind names where a stored message came from.
type SourceKind string

// The reserved source kinds. A new kind cannot reuse these names; a kind a
// reader does not know is preserved as it is, never dropped.
const (
	SourceUser           SourceKind = "user"                  // you
	SourceModel          SourceKind = "model"                 // the model
	SourceTool           SourceKind = "tool"                  // a tool's result
	SourceSystemPrompt   SourceKind = "system-prompt"         // the system prompt
	SourceCheckpoint     SourceKind = "compact-checkpoint"    // a checkpoint saved when a chat is shortened
	SourceTitle          SourceKind = "dsh-session-title-llm" // a generated chat title
	SourceToolRegistry   SourceKind = "tool-registry"         // the tool registry
	SourceRuntimeContext SourceKind = "runtime-context"       // runtime context
	SourcePlugin         SourceKind = "plugin"                // a plugin (never valid as a stored kind itself)
	SourceReview         SourceKind = "auto-review"           // an automatic review
	SourceCompaction     SourceKind = "compact-basic"         // a compaction output
	SourcePTCMode        SourceKind = "ptc-mode"              // reserved by the runtime for its code-mode tools
)

// Source says where a stored message came from. Raw holds the source object
// exactly as stored, so members this build does not know survive a rewrite.
type Source struct {
	Kind SourceKind
	Raw  json.RawMessage
}

// StoredMessage is a message as kept in a log: it always has an identity and
// a source.
type StoredMessage struct {
	id     string
	role   string
	source Source
	raw    json.RawMessage
}

// ID is the message's identity.
func (m StoredMessage) ID() string { return m.id }

// Role is system, developer, user, assistant or tool.
func (m StoredMessage) Role() string { return m.role }

// Source says where the message came from.
func (m StoredMessage) Source() Source { return m.source }

// JSON is the message object exactly as stored.
func (m StoredMessage) JSON() json.RawMessage { return m.raw }

// Empty reports whether the message carries no content: its content array
// is empty. Such a model answer is recorded but left out of the history.
func (m StoredMessage) Empty() bool {
	return rawjson.EmptyArray(rawjson.Get(m.raw, "content"))
}

// ParseStoredMessage reads a stored message, requiring a non-empty id, a
// role and a source with a non-empty kind.
func ParseStoredMessage(raw []byte) (StoredMessage, error) {
	if err := rawjson.Valid(raw); err != nil {
		return StoredMessage{}, fmt.Errorf("message is not valid JSON: %v", err)
	}
	return parseStoredMessage(raw, true)
}

// parseStoredMessage reads a message from bytes already validated as JSON;
// the identity rule is msgcheck.go's.
func parseStoredMessage(raw []byte, keep bool) (StoredMessage, error) {
	f, ok := scanMessage(raw)
	if !ok {
		return StoredMessage{}, fmt.Errorf("message is not a JSON object")
	}
	if err := f.identityError(); err != nil {
		return StoredMessage{}, err
	}
	m := StoredMessage{id: str(f.id), role: roleOf(f.role), source: Source{Kind: SourceKind(str(f.kind))}}
	if keep {
		m.raw = append(json.RawMessage(nil), raw...)
		m.source.Raw = append(json.RawMessage(nil), f.source...)
	} else {
		m.raw = stubContent(f.content) // emptiness is decided now; the body is not kept
	}
	return m, nil
}

// NewStoredMessage builds a stored message with content blocks (raw JSON
// array), in the runtime's key order role, content, source, id.
func NewStoredMessage(id, role string, source Source, content json.RawMessage) (StoredMessage, error) {
	if id == "" {
		return StoredMessage{}, fmt.Errorf("stored message needs an id")
	}
	if role == "" {
		return StoredMessage{}, fmt.Errorf("stored message %s needs a role", termtext.Quote(id))
	}
	if source.Kind == "" || source.Kind == SourcePlugin {
		return StoredMessage{}, fmt.Errorf("stored message %s needs a producer-owned source kind", termtext.Quote(id))
	}
	srcRaw := source.Raw
	if len(srcRaw) == 0 {
		srcRaw = sourceJSON(source.Kind)
	}
	if len(content) == 0 {
		content = json.RawMessage("[]")
	}
	b := rawjson.AppendString([]byte(`{"role":`), role)
	b = append(append(b, `,"content":`...), content...)
	b = append(append(b, `,"source":`...), srcRaw...)
	b = append(rawjson.AppendString(append(b, `,"id":`...), id), '}')
	return StoredMessage{id: id, role: role, source: Source{Kind: source.Kind, Raw: srcRaw}, raw: b}, nil
}
