package convlog

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"

	"github.com/convkit/convkit/internal/termtext"
)

// Interpreter applies one surface event's message to the derived history.
// Each surface type has exactly one.
type Interpreter func(h *History, e *Event, msg StoredMessage) error

// TypeInfo describes one event type.
type TypeInfo struct {
	Name string
	// Surface types change the history a model reads, through Interpret;
	// log-only types are kept for the record.
	Surface bool
	// MessagePath says where a surface event carries its message: "" for
	// the whole data object (user/message), else the member of data.
	MessagePath string
	Interpret   Interpreter

	// role is what the type is to a turn's path (turnpath.go).
	role pathRole
	// schema is the type's place and payload (schemas.go); nil for a
	// plugin's type, whose payload is its own.
	schema *eventSchema
}

// Registry is the set of event types a reader admits.
type Registry struct {
	mu    sync.RWMutex
	types map[string]*TypeInfo
}

// Surface event types of format version 4.
const (
	TypeSystemMessage    = "system/message"
	TypeDeveloperMessage = "developer/message"
	TypeUserMessage      = "user/message"
	TypeAssistantMessage = "assistant/message"
	TypeToolResult       = "tool/result"
	TypeTurnEnd          = "turn/end"
)

// ConversationLogTypes are the log-only types of a conversation log, in
// name order.
var ConversationLogTypes = func() []string {
	var names []string
	for n, s := range eventSchemas {
		if s.log == inConversation {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}()

// NewRegistry returns a registry holding the version 4 vocabulary (the
// types eventSchemas gives), the five surface types with their
// interpreters.
func NewRegistry() *Registry {
	r := &Registry{types: map[string]*TypeInfo{}}
	for _, t := range surfaceTypes() {
		t := t
		t.role, t.schema = pathRoles[t.Name], eventSchemas[t.Name]
		r.types[t.Name] = &t
	}
	for n, s := range eventSchemas {
		if r.types[n] == nil {
			r.types[n] = &TypeInfo{Name: n, role: pathRoles[n], schema: s}
		}
	}
	return r
}

// DefaultRegistry is used by readers and writers given no registry.
var DefaultRegistry = NewRegistry()

// Register adds a type (a plugin's). A name already registered is refused,
// and a surface type must bring its interpreter.
func (r *Registry) Register(t TypeInfo) error {
	if t.Name == "" {
		return fmt.Errorf("event type name is empty")
	}
	if t.Surface && t.Interpret == nil {
		return fmt.Errorf("surface event type %s has no interpreter", termtext.Quote(t.Name))
	}
	if !t.Surface && t.Interpret != nil {
		return fmt.Errorf("log-only event type %s cannot have an interpreter", termtext.Quote(t.Name))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.types[t.Name]; ok {
		return fmt.Errorf("event type %s is already registered", termtext.Quote(t.Name))
	}
	r.types[t.Name] = &t
	return nil
}

// Lookup returns the type's description, or nil for an unknown type.
func (r *Registry) Lookup(name string) *TypeInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.types[name]
}

// lookupBytes is Lookup of a name held in bytes, without converting it.
func (r *Registry) lookupBytes(name []byte) *TypeInfo {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.types[string(name)]
}

// Names lists the registered types in order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return slices.Sorted(maps.Keys(r.types))
}

// releasedV3Types is the closed vocabulary of format version 3, an event of
// another type refused unless it is marked ignorable: version 4's session
// log types but developer/message.
var releasedV3Types = func() map[string]bool {
	m := map[string]bool{}
	for n, s := range eventSchemas {
		if s.log == inSession && n != TypeDeveloperMessage {
			m[n] = true
		}
	}
	return m
}()
