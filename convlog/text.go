package convlog

import "strings"

// MessageOf returns the raw stored message a surface event carries: the data
// of user/message, data.message of the other surface types; nil for other
// events. The event must come from a Reader (its data is validated JSON).
func MessageOf(e *Event) []byte {
	switch e.Type {
	case TypeUserMessage:
		return e.Data
	case TypeSystemMessage, TypeDeveloperMessage, TypeAssistantMessage, TypeToolResult:
		return memberOf(e.Data, "message")
	}
	return nil
}

// memberOf returns the raw value of one member of a validated JSON object.
func memberOf(obj []byte, key string) []byte {
	var buf [12]member
	ms, err := scanTrusted(obj, buf[:0])
	if err != nil {
		return nil
	}
	for _, m := range ms {
		if m.key == key {
			return m.valueBytes
		}
	}
	return nil
}

// MessageText returns a stored message's role and the text of its text
// blocks joined by newlines (reasoning, tool calls and attachments are left
// out). msg must be validated JSON, as MessageOf returns it.
func MessageText(msg []byte) (role, text string) {
	var buf [12]member
	ms, err := scanTrusted(msg, buf[:0])
	if err != nil {
		return "", ""
	}
	var content []byte
	for _, m := range ms {
		switch m.key {
		case "role":
			switch string(m.valueBytes) {
			case `"user"`:
				role = "user"
			case `"assistant"`:
				role = "assistant"
			default:
				role, _ = parseJSONString(m.valueBytes)
			}
		case "content":
			content = m.valueBytes
		}
	}
	if s, ok := parseJSONString(content); ok {
		return role, s
	}
	var parts []string
	i := skipWS(content, 0)
	if i >= len(content) || content[i] != '[' {
		return role, ""
	}
	i = skipWS(content, i+1)
	for i < len(content) && content[i] != ']' {
		end, err := skipTrusted(content, i, 1)
		if err != nil {
			break
		}
		if t, ok := blockText(content[i:end]); ok && t != "" {
			parts = append(parts, t)
		}
		i = skipWS(content, end)
		if i < len(content) && content[i] == ',' {
			i = skipWS(content, i+1)
		}
	}
	return role, strings.Join(parts, "\n")
}

// blockText returns the text of a content block of type "text".
func blockText(block []byte) (string, bool) {
	var buf [8]member
	ms, err := scanTrusted(block, buf[:0])
	if err != nil {
		return "", false
	}
	var typ, text []byte
	for _, m := range ms {
		switch m.key {
		case "type":
			typ = m.valueBytes
		case "text":
			text = m.valueBytes
		}
	}
	if string(typ) != `"text"` {
		if t, _ := parseJSONString(typ); t != "text" {
			return "", false
		}
	}
	return parseJSONString(text)
}
