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
func MessageText(msg []byte) (role, text string) {
	var buf [12]member
	ms, err := rawjson.Members(msg, buf[:0])
	if err != nil {
		return "", ""
	}
	return messageText(ms)
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
	content := memberValue(ms, "content")
	if s, ok := rawjson.String(content); ok {
		return s
	}
	var parts []string
	for _, block := range elements(content) {
		parts = append(parts, readableBlock(block))
	}
	return strings.Join(parts, "\n")
}

// readableBlock is one content block as ReadableText shows it.
func readableBlock(block []byte) string {
	var buf [8]member
	ms, _ := rawjson.Members(block, buf[:0])
	var typ, text, name, args, tool, cut string
	for _, m := range ms {
		v, _ := rawjson.String(m.Value)
		switch string(m.Key) {
		case "type":
			typ = v
		case "text":
			text = v
		case "name":
			name = v
		case "arguments":
			args = v
		case "toolName":
			tool = v
		case "interrupted":
			if string(m.Value) == "true" {
				cut = " (interrupted)"
			}
		}
	}
	switch typ {
	case "text":
		return text + cut
	case "reasoning":
		return "(reasoning) " + text + cut
	case "tool-call":
		return "(tool call " + name + " " + args + ")"
	case "tool-addition", "tool-removal":
		return "(" + typ + " " + tool + ")"
	}
	return "(" + typ + ")"
}

// EventMessageText is MessageText(msg) for msg, the message of event e,
// from the members the line's check kept when it kept them.
func EventMessageText(e *Event, msg []byte) (role, text string) {
	if ms, ok := keptMembers(e, msg); ok {
		return messageText(ms)
	}
	return MessageText(msg)
}

// keptMembers returns the members the check of e's line kept of msg, when
// msg is e's data or data.message (the same bytes, not a copy).
func keptMembers(e *Event, msg []byte) ([]member, bool) {
	if len(msg) == 0 {
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

// messageText is MessageText of a message's members.
func messageText(ms []member) (role, text string) {
	var content []byte
	for _, m := range ms {
		switch string(m.Key) {
		case "role":
			switch string(m.Value) {
			case `"user"`:
				role = "user"
			case `"assistant"`:
				role = "assistant"
			default:
				role, _ = rawjson.String(m.Value)
			}
		case "content":
			content = m.Value
		}
	}
	if s, ok := rawjson.String(content); ok {
		return role, s
	}
	var parts []string
	for _, block := range elements(content) {
		if t, ok := blockText(block); ok && t != "" {
			parts = append(parts, t)
		}
	}
	return role, strings.Join(parts, "\n")
}

// blockText returns the text of a content block of type "text".
func blockText(block []byte) (string, bool) {
	var buf [8]member
	ms, err := rawjson.Members(block, buf[:0])
	if err != nil {
		return "", false
	}
	typ, text := twoMembers(ms, "type", "text")
	if string(typ) != `"text"` {
		if t, _ := rawjson.String(typ); t != "text" {
			return "", false
		}
	}
	return rawjson.String(text)
}
