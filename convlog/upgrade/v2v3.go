package upgrade

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/convkit/convkit/internal/rawjson"
)

// systemIDPrefix begins the ids of the system messages v2→v3 generates.
const systemIDPrefix = "v2-to-v3-system-"

// v2v3 is the v2→v3 step (docs/UPGRADE.md, "v2 → v3").
type v2v3 struct {
	info            srcInfo
	m               seqMap
	next            int64
	out             []*event
	stepTurn        []byte // raw turn and step of the open step; nil when none
	stepStep        []byte
	head            int64 // target seq of the current system message; -1 before the first
	prompt          string
	sourceCut       int64 // seq of the last inherited end-seed marker; -1 when none
	foreignDelivery int64
}

func (s *v2v3) transform(e *event) ([]*event, error) {
	s.out = s.out[:0]
	if !v2Types[e.typ] {
		return nil, refusal("format v2 contains unknown event type %s at seq %d", jsonString(e.typ), e.seq)
	}
	surface := surfaceTypes[e.typ]
	if !surface && e.op != nil {
		return nil, corrupt("format v2 %s at seq %d has unexpected field surfaceOp", e.typ, e.seq)
	}
	if !surface && e.sources != nil {
		return nil, corrupt("format v2 %s at seq %d has unexpected field sourceEventSeqs", e.typ, e.seq)
	}
	if surface && e.op == nil {
		return nil, corrupt("format v2 %s at seq %d requires surfaceOp", e.typ, e.seq)
	}
	if e.typ == "assistant/message" && e.sources != nil {
		return nil, corrupt("format v2 assistant/message at seq %d embeds its stream and cannot carry sourceEventSeqs", e.seq)
	}
	if err := s.admit(e); err != nil {
		return nil, err
	}
	srcSeq := e.seq
	if e.typ == "request/header" {
		prompt, err := s.requestHeader(e)
		if err != nil {
			return nil, err
		}
		if prompt != s.prompt {
			if err := s.emitSystem(prompt, e); err != nil {
				return nil, err
			}
		}
	}
	if surface && s.head < 0 {
		return nil, refusal("format v2 surface before first step cannot acquire a system head without changing chronology")
	}
	switch e.typ {
	case "session/end-seed":
		if string(rawjson.Get(e.data, "inherited")) == "true" {
			if !s.info.seeded {
				return nil, corrupt("format v2 unseeded Session contains an inherited end-seed marker")
			}
			s.sourceCut = e.seq
		}
	case "session-log-deepseek/delivery-accepted":
		d := e.data
		v := rawjson.Get(d, "sessionFormatVersion")
		if string(v) == "3" {
			return nil, corrupt("format v2 delivery marker claims target format v3")
		}
		if string(v) == "2" && !rawjson.StringIs(rawjson.Get(d, "sessionId"), s.info.id) {
			s.foreignDelivery = e.seq
		}
	}
	if err := remapRefs(e, &s.m, func(ref int64) error {
		return corrupt("%s at seq %d: reference must name an earlier source event", e.typ, e.seq)
	}); err != nil {
		return nil, err
	}
	s.m.add(e.seq, s.next)
	e.seq = s.next
	s.next++
	if err := renamePTC(e); err != nil {
		return nil, err
	}
	s.out = append(s.out, e)
	switch e.typ {
	case "step/start":
		d := e.data
		s.stepTurn, s.stepStep = bytes.Clone(rawjson.Get(d, "turn")), bytes.Clone(rawjson.Get(d, "step"))
		if s.stepTurn == nil || s.stepStep == nil {
			return nil, corrupt("format v2 step/start at seq %d lacks turn or step", srcSeq)
		}
		if s.head < 0 {
			anchor := *e
			anchor.seq = srcSeq
			if err := s.emitSystem("", &anchor); err != nil {
				return nil, err
			}
		}
	case "step/end", "turn/end":
		s.stepTurn, s.stepStep = nil, nil
	}
	return s.out, nil
}

// admit applies the v2 refusals that concern payloads.
func (s *v2v3) admit(e *event) error {
	label := "format v2 " + e.typ + " at seq " + itoa(e.seq) + " data"
	err := rewriteMessages(e, func(msg []byte) ([]byte, error) {
		if id, ok := rawjson.String(rawjson.Get(msg, "id")); ok && strings.HasPrefix(id, systemIDPrefix) {
			return nil, refusal("source message id %s collides with a generated system message id", jsonString(id))
		}
		return nil, checkContentKinds(rawjson.Get(msg, "content"), label+".content")
	})
	if err != nil {
		return err
	}
	d := e.data
	switch e.typ {
	case "tool/code-dispatch":
		return checkContentKinds(rawjson.Get(d, "content"), label+".content")
	case "team/message/queued":
		return checkContentKinds(rawjson.Get(rawjson.Get(d, "message"), "content"), label+".message.content")
	case "compaction/summary":
		if err := checkContentKinds(rawjson.Get(d, "summary"), label+".summary"); err != nil {
			return err
		}
		if r := rawjson.Get(d, "rawOutput"); r != nil {
			return checkContentKinds(r, label+".rawOutput")
		}
	case "assistant/message", "assistant/attempt":
		st := rawjson.Get(d, "stream")
		if !isArr(st) {
			return corrupt("%s.stream: content must be an array", label)
		}
		return checkStreamKinds(st, label+".stream")
	case "tool/result":
		if rawjson.Get(d, "error") == nil {
			return nil
		}
		c, _ := rawjson.Elements(rawjson.Get(rawjson.Get(d, "message"), "content"), nil)
		if len(c) != 1 || !rawjson.StringIs(rawjson.Get(c[0], "type"), "tool-result") || string(rawjson.Get(c[0], "isError")) != "true" {
			return corrupt("format v3 tool/result at seq %d carries error metadata for a non-error tool result", e.seq)
		}
	}
	return nil
}

// requestHeader removes header.system, returned, and empty optional members.
func (s *v2v3) requestHeader(e *event) (string, error) {
	d, err := parseObject(e.data)
	if err != nil {
		return "", corrupt("format v2 request/header at seq %d: data must be an object", e.seq)
	}
	h, err := parseObject(d.get("header"))
	if err != nil {
		return "", corrupt("format v2 request/header at seq %d: header must be an object", e.seq)
	}
	prompt, _ := rawjson.String(h.get("system"))
	changed := h.remove("system")
	if t := h.get("tools"); t != nil && rawjson.EmptyArray(t) {
		changed = h.remove("tools") || changed
	}
	if a := h.get("adapterDefaults"); a != nil && rawjson.EmptyObject(a) {
		changed = h.remove("adapterDefaults") || changed
	}
	if changed {
		d.set("header", h.bytes())
		e.data = d.bytes()
	}
	return prompt, nil
}

// emitSystem appends the system/message installing prompt at anchor.
func (s *v2v3) emitSystem(prompt string, anchor *event) error {
	if s.stepTurn == nil {
		return refusal("format v2 changed request prompt outside an open step cannot retain source chronology")
	}
	sum := sha256.Sum256(fmt.Appendf(nil, `["session-format-v2-to-v3",%s,%d,%s]`, jsonString(s.info.id), anchor.seq, jsonString(anchor.typ)))
	content := []byte("[]")
	if prompt != "" {
		content = fmt.Appendf(nil, `[{"type":"text","text":%s}]`, jsonString(prompt))
	}
	d := fmt.Appendf(nil, `{"turn":%s,"step":%s,"message":{"id":"%s%x","role":"system","source":{"kind":"plugin","plugin":"@deepseek-ai/dsh-system-prompt"},"content":%s}}`,
		s.stepTurn, s.stepStep, systemIDPrefix, sum, content)
	ev := &event{typ: "system/message", seq: s.next, time: anchor.time, data: d, op: &surfaceOp{}}
	if s.head >= 0 {
		ev.op = &surfaceOp{replace: true, start: s.head, end: s.head}
		ev.sources = []int64{s.head}
	}
	s.head = s.next
	s.next++
	s.prompt = prompt
	s.out = append(s.out, ev)
	return nil
}

// renamePTC applies the code → ptc renames.
func renamePTC(e *event) error {
	switch e.typ {
	case "tool/code-dispatch-start":
		e.typ = "tool/ptc-dispatch-start"
	case "tool/code-dispatch":
		e.typ = "tool/ptc-dispatch"
	case "agent-preset/selected":
		d, err := parseObject(e.data)
		if err == nil && rawjson.StringIs(d.get("agentPreset"), "code") {
			d.set("agentPreset", []byte(`"ptc"`))
			e.data = d.bytes()
		}
	case "user/message", "agent/inbox/spliced", "session/title-llm-request":
		if !bytes.Contains(e.data, []byte("tools-code-mode")) {
			return nil
		}
		return rewriteMessages(e, func(msg []byte) ([]byte, error) {
			o, err := parseObject(msg)
			if err != nil {
				return nil, nil
			}
			src := o.get("source")
			if !rawjson.StringIs(rawjson.Get(src, "kind"), "plugin") || !rawjson.StringIs(rawjson.Get(src, "plugin"), "tools-code-mode") {
				return nil, nil
			}
			so, err := parseObject(src)
			if err != nil {
				return nil, nil
			}
			so.set("plugin", []byte(`"tools-ptc"`))
			o.set("source", so.bytes())
			return o.bytes(), nil
		})
	}
	return nil
}

func (s *v2v3) finish() ([]*event, error) {
	if s.info.seeded && s.sourceCut < 0 {
		return nil, corrupt("released v2 seeded Session lacks an inherited end-seed marker")
	}
	if s.foreignDelivery >= 0 && (!s.info.parent || s.foreignDelivery >= s.sourceCut) {
		return nil, corrupt("current-generation delivery marker names the wrong Session")
	}
	return nil, nil
}
