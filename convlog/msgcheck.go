package convlog

import (
	"bytes"
	"fmt"

	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
)

// The message-identity rule, checked here once for the writer, the
// validator and the history replay.

// messageFields are the members of a stored message the rules read, as raw
// JSON spans: nothing is decoded unless it is needed.
type messageFields struct {
	id, role, kind, source, content []byte
	// toolCallID is the message's toolCallId, sourceCallID its source's
	// callId (tool results).
	toolCallID, sourceCallID []byte
	isError                  []byte
	sourceIsObject           bool
	// Of the source too: its members counted, and those the strict
	// sources hold (content.go).
	srcProvider, srcModel []byte
	srcMembers            int
	srcReplay             bool
}

// scanMessage reads the members of a stored message (validated JSON).
func scanMessage(raw []byte) (messageFields, bool) {
	var buf [8]member
	ms, err := rawjson.Members(raw, buf[:0])
	return messageOf(ms), err == nil
}

// messageOf is scanMessage of members a reader kept as it checked them.
func messageOf(ms []member) messageFields {
	var f messageFields
	for _, m := range ms {
		f.member(m)
	}
	f.readSource()
	return f
}

func (f *messageFields) member(m member) {
	switch string(m.Key) {
	case "id":
		f.id = m.Value
	case "role":
		f.role = m.Value
	case "source":
		f.source = m.Value
	case "content":
		f.content = m.Value
	case "toolCallId":
		f.toolCallID = m.Value
	case "isError":
		f.isError = m.Value
	}
}

func (f *messageFields) readSource() {
	if f.source == nil {
		return
	}
	w := walk{b: f.source}
	if f.sourceIsObject = w.enterObject(); !f.sourceIsObject {
		return
	}
	for {
		k, ok := w.nextKey()
		if !ok {
			return
		}
		f.srcMembers++
		switch v := w.value(); string(k) {
		case "kind":
			f.kind = v
		case "callId":
			f.sourceCallID = v
		case "provider":
			f.srcProvider = v
		case "model":
			f.srcModel = v
		case "replayState":
			f.srcReplay = true
		}
	}
}

// identityError says what a stored message lacks of a non-empty id, a role
// and a source object with a producer-owned kind, or nil.
func (f *messageFields) identityError() error {
	if !nonEmptyString(f.id) {
		if f.source == nil {
			return fmt.Errorf("stored message has no id and no source")
		}
		return fmt.Errorf("stored message has no id")
	}
	if !nonEmptyString(f.role) {
		return fmt.Errorf("stored message %s has no role", termtext.Quote(str(f.id)))
	}
	if f.source == nil {
		return fmt.Errorf("stored message %s has no source", termtext.Quote(str(f.id)))
	}
	if !f.sourceIsObject || !nonEmptyString(f.kind) {
		return fmt.Errorf("stored message %s: source must be an object with a non-empty kind", termtext.Quote(str(f.id)))
	}
	if rawjson.StringIs(f.kind, string(SourcePlugin)) {
		return fmt.Errorf("stored message %s requires a producer-owned source kind, not %s", termtext.Quote(str(f.id)), termtext.Quote(string(SourcePlugin)))
	}
	return nil
}

func nonEmptyString(raw []byte) bool { return len(raw) > 2 && raw[0] == '"' }

// str decodes a raw JSON string ("" when it is not one).
func str(raw []byte) string {
	s, _ := rawjson.String(raw)
	return s
}

// unquoted is the content of a raw JSON string, decoded only when it holds
// an escape; nil when raw is not a string.
func unquoted(raw []byte) []byte {
	if len(raw) < 2 || raw[0] != '"' {
		return nil
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1]
	}
	s, ok := rawjson.String(raw)
	if !ok {
		return nil
	}
	return []byte(s)
}

// roleOf is a message's role, the usual ones without an allocation.
func roleOf(raw []byte) string {
	for _, r := range slotRoles[1:] {
		if len(raw) == len(r)+2 && raw[0] == '"' && string(raw[1:len(raw)-1]) == r {
			return r
		}
	}
	return str(raw)
}

// toolCallIDs appends the ids of the tool-call blocks of content to dst.
func toolCallIDs(content []byte, dst []string) []string {
	if !bytes.Contains(content, []byte(`"tool-call"`)) {
		return dst
	}
	for _, blk := range elements(content) {
		// Get stops at the member it finds (type comes first as written):
		// a text block's text is not walked.
		if string(rawjson.Get(blk, "type")) == `"tool-call"` {
			if s := str(rawjson.Get(blk, "id")); s != "" {
				dst = append(dst, s)
			}
		}
	}
	return dst
}
