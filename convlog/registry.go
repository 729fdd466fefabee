package convlog

// interpreter applies one surface event's message to the derived history;
// its error is said of the event (History.Apply names the event).
type interpreter func(h *History, e *Event, msg StoredMessage) error

// Surface event types of format version 4.
const (
	TypeSystemMessage    = "system/message"
	TypeDeveloperMessage = "developer/message"
	TypeUserMessage      = "user/message"
	TypeAssistantMessage = "assistant/message"
	TypeToolResult       = "tool/result"
	TypeTurnEnd          = "turn/end"
)

// IsKnown reports whether typ is a type of the version 4 vocabulary.
func IsKnown(typ string) bool { return eventTypes[typ] != nil }

// IsSurface reports whether events of type typ change the history a model
// reads.
func IsSurface(typ string) bool {
	t := eventTypes[typ]
	return t != nil && t.surface
}

// releasedV3 reports whether t is of the closed vocabulary of format
// version 3, an event of another type refused unless it is marked
// ignorable: version 4's session log types but developer/message.
func releasedV3(t *eventType) bool {
	return t != nil && t.log == inSession && t.name != TypeDeveloperMessage
}
