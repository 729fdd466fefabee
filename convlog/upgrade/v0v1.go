package upgrade

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/convkit/convkit/internal/rawjson"
)

// v0v1 is the v0→v1 step (docs/UPGRADE.md, "v0 → v1"); seqs do not change.
type v0v1 struct {
	info         srcInfo
	out          []*event
	retryIDs     map[string]string
	compactionID []byte           // raw JSON string of the open compaction group
	messageIDs   map[int64][]byte // for a legacy tool/result replacement
}

func (s *v0v1) finish() ([]*event, error) { return nil, nil }

func (s *v0v1) legacyID(prefix string, seq int64) []byte {
	return jsonString(prefix + ":" + s.info.id + ":" + itoa(seq))
}

func itoa(v int64) string { return string(rawjson.AppendInt(nil, v)) }

func (s *v0v1) malformed(typ string, seq int64) error {
	return corrupt("session %s contains malformed pre-react-loop %s at seq %d", jsonString(s.info.id), typ, seq)
}

func (s *v0v1) transform(e *event) ([]*event, error) {
	s.out = append(s.out[:0], e)
	if e.typ == "assistant/chunk" {
		return s.out, nil
	}
	switch e.typ {
	case "compact/start", "compact/summary", "compact/end", "compact/prune":
		e.typ = "compaction/" + strings.TrimPrefix(e.typ, "compact/")
	case "request/header-delta", "mode/set":
		return nil, refusal("session %s contains unsupported legacy %s event at seq %d", jsonString(s.info.id), e.typ, e.seq)
	}
	if !v0Types[e.typ] && e.typ != "steering/message" {
		return nil, refusal("format v0 contains unknown event type %s at seq %d", jsonString(e.typ), e.seq)
	}
	if handle := v0Rules[e.typ]; handle != nil {
		d, err := s.data(e)
		if err == nil {
			err = handle(s, e, d)
		}
		if err != nil {
			return nil, err
		}
	}
	for _, pass := range v0Passes {
		if err := pass(s, e); err != nil {
			return nil, err
		}
	}
	return s.out, nil
}

// v0Passes are the rules of several event types, in order.
var v0Passes = []func(*v0v1, *event) error{(*v0v1).compaction, (*v0v1).message, (*v0v1).delivery}

// v0Rules are the rules of one event type, given its data.
var v0Rules = map[string]func(*v0v1, *event, *object) error{
	"request/header": (*v0v1).requestHeader, "turn/start": (*v0v1).turnStart, "turn/end": (*v0v1).turnEnd,
	"steering/message": (*v0v1).steering, "llm/retry": (*v0v1).retry,
}

func (s *v0v1) data(e *event) (*object, error) {
	d, err := parseObject(e.data)
	if err != nil {
		return nil, corrupt("%s %d data must be an object", e.typ, e.seq)
	}
	return d, nil
}

func (s *v0v1) requestHeader(e *event, d *object) error {
	if rawjson.StringIs(d.get("reason"), "fallback") {
		return refusal(`session %s contains unsupported request/header reason "fallback" at seq %d`, jsonString(s.info.id), e.seq)
	}
	h, err := parseObject(d.get("header"))
	if err != nil {
		return corrupt("request/header %d header must be an object", e.seq)
	}
	p := h.get("messagePrefix")
	if p == nil {
		return nil
	}
	if !isArr(p) {
		return corrupt("session %s contains malformed request/header messagePrefix at seq %d", jsonString(s.info.id), e.seq)
	}
	h.remove("messagePrefix")
	d.set("header", h.bytes())
	e.data = d.bytes()
	return nil
}

func (s *v0v1) turnStart(e *event, d *object) error {
	// A retry chain never spans turns: the map holds one turn's.
	clear(s.retryIDs)
	if !d.has("trigger") {
		return nil
	}
	if len(d.m) != 2 {
		return s.malformed("turn/start", e.seq)
	}
	turn, ok := count(d.get("turn"))
	kind, okKind := rawjson.String(rawjson.Get(d.get("trigger"), "kind"))
	if !ok || turn < 1 || !okKind || kind == "" {
		return s.malformed("turn/start", e.seq)
	}
	e.data = fmt.Appendf(nil, `{"turn":%d}`, turn)
	return nil
}

func (s *v0v1) turnEnd(e *event, d *object) error {
	turn, ok := count(d.get("turn"))
	if !ok || turn < 1 {
		return s.malformed("turn/end", e.seq)
	}
	r, err := parseObject(d.get("reason"))
	if err != nil {
		return s.malformed("turn/end", e.seq)
	}
	kind, ok := rawjson.String(r.get("kind"))
	if !ok {
		return s.malformed("turn/end", e.seq)
	}
	var current []byte
	switch kind {
	case "aborted":
		if r.has("reason") {
			return nil
		}
		current = []byte(`{"kind":"aborted","reason":{"kind":"legacy"}}`)
	case "disposed":
		current = []byte(`{"kind":"aborted","reason":{"kind":"disposed"}}`)
	case "error":
		if r.has("error") {
			return nil
		}
		if _, ok := count(r.get("step")); !ok {
			return s.malformed("turn/end", e.seq)
		}
		if f := r.get("failure"); f != nil {
			if !isObj(f) {
				return s.malformed("turn/end", e.seq)
			}
			current = append(append([]byte(`{"kind":"error","error":`), f...), '}')
			break
		}
		msg := r.get("message")
		code := r.get("code")
		if !isStr(msg) || code != nil && !isStr(code) {
			return s.malformed("turn/end", e.seq)
		}
		if code == nil {
			code = []byte(`"UNKNOWN"`)
		}
		current = fmt.Appendf(nil, `{"kind":"error","error":{"message":%s,"code":%s}}`, msg, code)
	default:
		return nil
	}
	d.set("reason", current)
	e.data = d.bytes()
	return nil
}

func (s *v0v1) steering(e *event, d *object) error {
	if _, ok := count(d.get("turn")); !ok {
		return corrupt("steering/message %d data lacks a turn", e.seq)
	}
	e.typ = "user/message"
	if w := d.get("message"); w != nil {
		if len(d.m) != 2 || !isObj(w) {
			return corrupt("steering/message %d data has unexpected members", e.seq)
		}
		e.data = w
		return nil
	}
	if len(d.m) != 3 || !d.has("content") || !d.has("source") {
		return corrupt("steering/message %d data must hold turn, content and source", e.seq)
	}
	d.remove("turn")
	d.set("id", s.legacyID("legacy-message", e.seq))
	d.set("role", []byte(`"user"`))
	e.data = d.bytes()
	return nil
}

func (s *v0v1) retry(e *event, d *object) error {
	var chain []byte
	for _, k := range []string{"turn", "step", "provider", "policyKey"} {
		chain = append(chain, d.get(k)...)
		chain = append(chain, 0)
	}
	id := d.get("retryId")
	if v, ok := rawjson.String(id); ok && v != "" {
		s.retryIDs[string(chain)] = string(id)
		return nil
	}
	if id != nil {
		return nil
	}
	migrated, ok := s.retryIDs[string(chain)]
	if !ok {
		migrated = string(s.legacyID("legacy-retry", e.seq))
		s.retryIDs[string(chain)] = migrated
	}
	d.set("retryId", []byte(migrated))
	e.data = d.bytes()
	return nil
}

func (s *v0v1) compaction(e *event) error {
	switch e.typ {
	case "session/end-seed":
		s.compactionID = nil
		return nil
	case "compaction/start":
		d, err := s.data(e)
		if err != nil {
			return err
		}
		id := d.get("compactionId")
		if v, ok := rawjson.String(id); ok && v != "" {
			s.compactionID = id
			return nil
		}
		if id != nil {
			return nil
		}
		s.compactionID = s.legacyID("legacy-compaction", e.seq)
		d.set("compactionId", s.compactionID)
		e.data = d.bytes()
		return nil
	case "compaction/summary", "compaction/end", "user/message":
	default:
		return nil
	}
	if s.compactionID == nil {
		return nil
	}
	d, err := s.data(e)
	if err != nil {
		return err
	}
	if e.typ == "user/message" {
		src, err := parseObject(d.get("source"))
		if err != nil || !rawjson.StringIs(src.get("kind"), "plugin") || !rawjson.StringIs(src.get("plugin"), "compact") || src.has("compactionId") {
			return nil
		}
		src.set("compactionId", s.compactionID)
		d.set("source", src.bytes())
		e.data = d.bytes()
		return nil
	}
	if !d.has("compactionId") {
		d.set("compactionId", s.compactionID)
		e.data = d.bytes()
	}
	if e.typ == "compaction/end" {
		s.compactionID = nil
	}
	return nil
}

// message wraps legacy messages and records message ids.
func (s *v0v1) message(e *event) error {
	switch e.typ {
	case "user/message", "assistant/message", "tool/result", "system/message":
	default:
		return nil
	}
	d, err := s.data(e)
	if err != nil {
		return err
	}
	changed := false
	switch e.typ {
	case "user/message":
		if !d.has("id") && !d.has("role") && !d.has("message") && d.has("content") && d.has("source") {
			d.set("id", s.legacyID("legacy-message", e.seq))
			d.set("role", []byte(`"user"`))
			changed = true
		}
	case "assistant/message":
		const legacySource = "provenance"
		if !d.has("message") && d.has("content") && d.has(legacySource) {
			content := d.get("content")
			src, err := parseObject(d.get(legacySource))
			if err != nil {
				return corrupt("assistant/message %d legacy source must be an object", e.seq)
			}
			src.set("kind", []byte(`"model"`))
			d.remove("content")
			d.remove(legacySource)
			d.set("message", fmt.Appendf(nil, `{"id":%s,"role":"assistant","content":%s,"source":%s}`,
				s.legacyID("legacy-message", e.seq), content, src.bytes()))
			changed = true
		}
	case "tool/result":
		callID, content, isErr := d.get("callId"), d.get("content"), d.get("isError")
		if !d.has("message") && callID != nil && content != nil && isErr != nil && isStr(callID) &&
			(string(isErr) == "true" || string(isErr) == "false") {
			id := s.legacyID("legacy-message", e.seq)
			if e.op != nil && e.op.replace {
				var ok bool
				if id, ok = s.messageIDs[e.op.start]; !ok {
					return corrupt("tool/result %d replacement cites a message without identity", e.seq)
				}
			}
			d.remove("callId")
			d.remove("content")
			d.remove("isError")
			d.set("message", fmt.Appendf(nil, `{"id":%s,"role":"user","content":[{"type":"tool-result","toolCallId":%s,"content":%s,"isError":%s}],"source":{"kind":"tool","callId":%s}}`,
				id, callID, content, isErr, callID))
			changed = true
		}
	}
	if changed {
		e.data = d.bytes()
	}
	msg := d
	if e.typ != "user/message" {
		if msg, err = parseObject(d.get("message")); err != nil {
			return nil
		}
	}
	if id := msg.get("id"); isStr(id) {
		s.messageIDs[e.seq] = bytes.Clone(id)
	}
	return nil
}

func (s *v0v1) delivery(e *event) error {
	if e.typ != "session-log-deepseek/delivery-accepted" {
		return nil
	}
	d, err := s.data(e)
	if err != nil {
		return err
	}
	version := int64(0)
	if v := d.get("sessionFormatVersion"); v != nil {
		var ok bool
		if version, ok = count(v); !ok {
			return corrupt("delivery sessionFormatVersion must be a non-negative integer")
		}
	}
	inherited := s.info.parent && s.info.seedLength >= 0 && e.seq < s.info.seedLength
	if version == 0 && !inherited && !rawjson.StringIs(d.get("sessionId"), s.info.id) {
		return corrupt("current-generation delivery marker names the wrong Session")
	}
	return nil
}
