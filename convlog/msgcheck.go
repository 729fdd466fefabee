package convlog

import (
	"bytes"
	"fmt"

	"github.com/convkit/convkit/internal/rawjson"
)

// The message-identity rule: every stored message carries a non-empty id, a
// role and a source object with a producer-owned kind. It is checked here
// once, for the writer (before anything is written), the validator and the
// history replay.

// messageFields are the members of a stored message the rules read, as raw
// JSON spans of validated bytes.
type messageFields struct {
	id, role, kind string
	source         []byte
	content        []byte
	// toolCallID is the message's toolCallId, sourceCallID its source's
	// callId (tool results).
	toolCallID, sourceCallID string
	hasToolCallID            bool
}

// scanMessage reads the members of a stored message (validated JSON) and
// checks its identity. The error says what is missing, naming the message
// by its id when it has one.
func scanMessage(raw []byte, buf []member) (messageFields, []member, error) {
	var f messageFields
	members, err := rawjson.Members(raw, buf[:0])
	if err != nil {
		return f, members, fmt.Errorf("message is not a JSON object")
	}
	var id, role, toolCallID []byte
	for _, m := range members {
		switch string(m.Key) {
		case "id":
			id = m.Value
		case "role":
			role = m.Value
		case "source":
			f.source = m.Value
		case "content":
			f.content = m.Value
		case "toolCallId":
			toolCallID = m.Value
		}
	}
	if toolCallID != nil {
		f.toolCallID, f.hasToolCallID = rawjson.String(toolCallID)
	}
	var sbuf [8]member
	var sourceMembers []member
	if f.source != nil {
		if sm, err := rawjson.Members(f.source, sbuf[:0]); err == nil {
			sourceMembers = sm
		}
	}
	for _, m := range sourceMembers {
		switch string(m.Key) {
		case "kind":
			f.kind, _ = rawjson.String(m.Value)
		case "callId":
			f.sourceCallID, _ = rawjson.String(m.Value)
		}
	}
	f.id, f.role, err = checkMessageIdentity(id, role, f.source, sourceMembers != nil, f.kind)
	return f, members, err
}

// checkMessageIdentity is the identity rule over the raw id and role, whether the
// source is an object, and its kind.
func checkMessageIdentity(id, role, source []byte, sourceIsObject bool, kind string) (idStr, roleStr string, err error) {
	idStr, ok := rawjson.String(id)
	if !ok || idStr == "" {
		if source == nil {
			return "", "", fmt.Errorf("stored message has no id and no source")
		}
		return "", "", fmt.Errorf("stored message has no id")
	}
	roleStr, ok = rawjson.String(role)
	if !ok || roleStr == "" {
		return "", "", fmt.Errorf("stored message %q has no role", idStr)
	}
	if source == nil {
		return "", "", fmt.Errorf("stored message %q has no source", idStr)
	}
	if !sourceIsObject || kind == "" {
		return "", "", fmt.Errorf("stored message %q: source must be an object with a non-empty kind", idStr)
	}
	if SourceKind(kind) == SourcePlugin {
		return "", "", fmt.Errorf("stored message %q requires a producer-owned source kind, not %q", idStr, SourcePlugin)
	}
	return idStr, roleStr, nil
}

// toolCallIDs appends the ids of the tool-call blocks of a message's
// content (validated JSON) to dst.
func toolCallIDs(content []byte, dst []string) []string {
	if !bytes.Contains(content, []byte(`"tool-call"`)) {
		return dst
	}
	var buf [8]member
	for it := rawjson.Array(content); ; {
		blk, ok := it.Next()
		if !ok {
			return dst
		}
		ms, err := rawjson.Members(blk, buf[:0])
		if err != nil {
			continue
		}
		var typ, id []byte
		for _, m := range ms {
			switch string(m.Key) {
			case "type":
				typ = m.Value
			case "id":
				id = m.Value
			}
		}
		if string(typ) == `"tool-call"` {
			if s, ok := rawjson.String(id); ok && s != "" {
				dst = append(dst, s)
			}
		}
	}
}
