package convlog

import (
	"strings"

	"github.com/convkit/convkit/internal/rawjson"
)

// MessageOf returns the raw stored message a surface event carries: the data
// of user/message, data.message of the other surface types; nil for other
// events. The event must come from a Reader (its data is validated JSON).
func MessageOf(e *Event) []byte {
	switch e.Type {
	case TypeUserMessage:
		return e.Data
	case TypeSystemMessage, TypeDeveloperMessage, TypeAssistantMessage, TypeToolResult:
		return rawjson.Get(e.Data, "message")
	}
	return nil
}

// MessageText returns a stored message's role and the text of its text
// blocks joined by newlines (reasoning, tool calls and attachments are left
// out): what search indexes and a title is made of. msg must be validated
// JSON, as MessageOf returns it. ReadableText is the text for people.
func MessageText(msg []byte) (role, text string) { return EventMessageText(nil, msg) }

// EventMessageText is MessageText(msg) for msg, the message of event e (nil:
// none), from the members the line's check kept when it kept them.
func EventMessageText(e *Event, msg []byte) (role, text string) {
	var buf [12]member
	ms, ok := keptMembers(e, msg)
	if !ok {
		var err error
		if ms, err = rawjson.Members(msg, buf[:0]); err != nil {
			return "", ""
		}
	}
	return roleOf(memberValue(ms, "role")), contentText(memberValue(ms, "content"), false)
}

// ReadableText is a stored message's text as a person reads it (inspect,
// the transcript): its text blocks, and the others named in parentheses
// (reasoning with its text, a tool call with its name and arguments, a
// tool added or removed with its name), one block a line; a block the
// user's interrupt cut off ends " (interrupted)". msg must be JSON.
func ReadableText(msg []byte) string {
	var buf [12]member
	ms, err := rawjson.Members(msg, buf[:0])
	if err != nil {
		return ""
	}
	return contentText(memberValue(ms, "content"), true)
}

// contentText is the text of a message's content: its non-empty text
// blocks, or (readable) every block as ReadableText says.
func contentText(content []byte, readable bool) string {
	if s, ok := rawjson.String(content); ok {
		return s
	}
	var parts []string
	var buf [8]member
	for _, block := range elements(content) {
		ms, _ := rawjson.Members(block, buf[:0])
		get := func(key string) string { return str(memberValue(ms, key)) }
		typ, text := memberValue(ms, "type"), memberValue(ms, "text")
		if !readable {
			if rawjson.StringIs(typ, "text") && nonEmptyString(text) {
				parts = append(parts, str(text))
			}
			continue
		}
		cut := ""
		if string(memberValue(ms, "interrupted")) == "true" {
			cut = " (interrupted)"
		}
		switch typ := str(typ); typ {
		case "text":
			parts = append(parts, str(text)+cut)
		case "reasoning":
			parts = append(parts, "(reasoning) "+str(text)+cut)
		case "tool-call":
			parts = append(parts, "(tool call "+get("name")+" "+get("arguments")+")")
		case "tool-addition", "tool-removal":
			parts = append(parts, "("+typ+" "+get("toolName")+")")
		default:
			parts = append(parts, "("+typ+")")
		}
	}
	return strings.Join(parts, "\n")
}

// keptMembers returns the members the check of e's line kept of msg, when
// msg is e's data or data.message (the same bytes, not a copy).
func keptMembers(e *Event, msg []byte) ([]member, bool) {
	if e == nil || len(msg) == 0 {
		return nil, false
	}
	same := func(b []byte) bool { return len(b) == len(msg) && &b[0] == &msg[0] }
	if e.scanned && same(e.Data) {
		return e.dataMembers, true
	}
	if !e.scanned || !e.msgScanned {
		return nil, false
	}
	if m := memberValue(e.dataMembers, "message"); m != nil {
		return e.msgMembers, same(m)
	}
	return nil, false
}
