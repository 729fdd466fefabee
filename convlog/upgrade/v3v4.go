package upgrade

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"unicode/utf16"

	"github.com/convkit/convkit/internal/rawjson"
)

// v3v4 is the v3→v4 step (docs/UPGRADE.md, "v3 → v4").
type v3v4 struct {
	info     srcInfo
	children []ChildFact
	catalogs [][]byte // own subagent/catalog payloads after the latest inherited cut
	cutSet   bool
	cut      int64 // target seq of the last inherited end-seed marker
	srcCut   int64
	m        seqMap
	next     int64
	time     int64
	foreign  int64 // seq of the last delivery marker naming another session; -1 when none
	restart  restartTracker
	out      []*event
	room     *lineRoom // where lifted data is written
}

// byCreation orders children by creation, then by id in UTF-16 code units,
// as JavaScript compares strings.
func byCreation(a, b ChildFact) int {
	return cmp.Or(cmp.Compare(a.ChildCreatedAt, b.ChildCreatedAt),
		slices.Compare(utf16.Encode([]rune(a.ChildID)), utf16.Encode([]rune(b.ChildID))))
}

func (s *v3v4) transform(e *event) ([]*event, error) {
	s.out = s.out[:0]
	if t, ok := s.restart.observe(e); ok {
		ev := interruptedTurnEnd(t, e.time)
		ev.seq = s.next
		s.next++
		s.out = append(s.out, ev)
	}
	target := s.next
	s.next++
	s.time = e.time
	switch e.typ {
	case "session/end-seed":
		if string(rawjson.Get(e.data, "inherited")) == "true" {
			if !s.info.seeded {
				return nil, corrupt("unseeded format v3 Session contains an inherited end-seed marker")
			}
			s.srcCut, s.cut, s.cutSet = e.seq, target, true
			s.catalogs = s.catalogs[:0]
		}
	case "subagent/catalog":
		s.catalogs = append(s.catalogs, bytes.Clone(e.data))
	case "session-log-deepseek/delivery-accepted":
		if err := s.delivery(e); err != nil {
			return nil, err
		}
	}
	if !releasedV3Types[e.typ] {
		if !e.ignorable {
			return nil, refusal("format v3 contains unknown event type %s at seq %d", jsonString(e.typ), e.seq)
		}
		// Unknown ignorable events stay opaque: only their seq moves (rewrite
		// knows no plugin: type).
		e.typ = "plugin:" + e.typ
	} else if target != e.seq {
		if err := remapRefs(e, &s.m, func(ref int64) error {
			return corrupt("V3 reference must name an earlier source event")
		}); err != nil {
			return nil, err
		}
	}
	s.m.add(e.seq, target)
	if err := s.rewrite(e); err != nil {
		return nil, err
	}
	e.seq = target
	s.out = append(s.out, e)
	return s.out, nil
}

// rewrite applies the payload rules to a first-party event (source seq),
// parsing its data once and re-encoding it only if changed.
func (s *v3v4) rewrite(e *event) error {
	subject := "format v3 " + e.typ + " at seq " + itoa(e.seq)
	msgFn := func(msg []byte) ([]byte, error) { return s.message(e, msg, subject) }
	switch e.typ {
	case "user/message":
		_, err := mapMessages(e, nil, msgFn)
		return err
	case "request/header":
		if !bytes.Contains(e.data, []byte("deferLoading")) {
			return nil
		}
		tools, err := rawjson.Elements(rawjson.Get(rawjson.Get(e.data, "header"), "tools"), nil)
		if err != nil {
			return nil
		}
		for i, t := range tools {
			if isObj(t) && rawjson.Get(t, "deferLoading") != nil {
				return refusal("%s.header.tools[%d] contains deferLoading, which is only defined in V4", subject, i)
			}
		}
		return nil
	case "system/message", "developer/message", "assistant/message", "tool/result",
		"agent/inbox/spliced", "session/title-llm-request",
		"compaction/summary", "tool/ptc-dispatch", "team/message/queued", "assistant/attempt":
	default:
		return nil
	}
	d, err := e.parse(e.data)
	if err != nil {
		return corrupt("%s: data must be an object", subject)
	}
	if msg := d.get("message"); e.typ == "tool/result" && isObj(msg) {
		data, err := s.lift(e, d, msg, subject)
		if data != nil {
			s.room.lend(data)
			e.data = data
		}
		if err != nil || data != nil {
			return err
		}
	}
	changed, err := mapMessages(e, d, msgFn)
	// The content tags outside messages.
	migrate := func(key, label string, f func([]byte, string) ([]byte, error)) {
		if err == nil {
			var v []byte
			if v, err = f(d.get(key), label); v != nil {
				d.set(key, v)
				changed = true
			}
		}
	}
	switch e.typ {
	case "compaction/summary":
		migrate("summary", subject+".summary", migrateContent)
		if d.has("rawOutput") {
			migrate("rawOutput", subject+".rawOutput", migrateContent)
		}
	case "tool/ptc-dispatch":
		migrate("content", subject+".content", migrateContent)
	case "team/message/queued":
		if isObj(d.get("message")) {
			migrate("message", subject, migrateMessageContent)
		}
	case "assistant/message", "assistant/attempt":
		if isArr(d.get("stream")) {
			migrate("stream", subject, migrateStream)
		}
	}
	if changed && err == nil {
		e.data = d.bytes()
	}
	return err
}

// message rewrites a message's source and content tags (nil: unchanged).
func (s *v3v4) message(e *event, msg []byte, subject string) ([]byte, error) {
	o, err := e.parse(msg)
	if err != nil {
		return nil, corrupt("%s: message must be an object", subject)
	}
	role, _ := rawjson.String(o.get("role"))
	changed := false
	ns, err := rewriteSource(o.get("source"), role, e.seq)
	if err != nil {
		return nil, err
	}
	if ns != nil {
		o.set("source", ns)
		changed = true
	}
	c, err := migrateContent(o.get("content"), subject)
	if err != nil {
		return nil, err
	}
	if c != nil {
		o.set("content", c)
		changed = true
	}
	if !changed {
		return nil, nil
	}
	return o.bytes(), nil
}

// lift applies the tool-result rule to a tool/result whose message msg has
// role user, returning the new data (nil: another role), written where its
// line will put it (lineBuf): a tool result is often megabytes.
func (s *v3v4) lift(e *event, d *object, msg []byte, subject string) ([]byte, error) {
	o, err := e.parse(msg)
	if err != nil {
		return nil, corrupt("%s: message must be an object", subject)
	}
	if role, _ := rawjson.String(o.get("role")); role != "user" {
		return nil, nil
	}
	ns, err := rewriteSource(o.get("source"), "user", e.seq)
	if err != nil {
		return nil, err
	}
	if ns != nil {
		o.set("source", ns)
	}
	i := d.index("message")
	buf, err := liftObject(d.encodeBefore(s.room.lineBuf(e, len(e.data)+256), i), o, len(msg), e.seq, subject)
	if err != nil {
		return nil, err
	}
	return d.encodeAfter(buf, i), nil
}

// delivery checks a session-log-deepseek/delivery-accepted marker.
func (s *v3v4) delivery(e *event) error {
	d := e.data
	if !isObj(d) {
		return corrupt("delivery-accepted data must be an object")
	}
	version := int64(0)
	if v := rawjson.Get(d, "sessionFormatVersion"); v != nil {
		var ok bool
		if version, ok = count(v); !ok {
			return corrupt("delivery sessionFormatVersion must be a non-negative integer")
		}
	}
	if version == 4 {
		return refusal("format v3 delivery marker claims target format v4")
	}
	if version != 3 {
		return nil
	}
	through, ok := count(rawjson.Get(d, "throughSeq"))
	if !ok {
		return corrupt("delivery throughSeq must be a non-negative integer")
	}
	if through >= e.seq {
		return corrupt("delivery throughSeq must precede its marker")
	}
	id, ok := rawjson.String(rawjson.Get(d, "sessionId"))
	if !ok || id == "" {
		return corrupt("delivery requires a nonempty Session id")
	}
	if id != s.info.id {
		s.foreign = e.seq
	}
	return nil
}

func (s *v3v4) finish() ([]*event, error) {
	s.out = s.out[:0]
	if !s.info.seeded {
		s.cutSet, s.srcCut = true, 0
	}
	if !s.cutSet {
		return nil, corrupt("seeded format v3 Session lacks an inherited end-seed marker (V3 inherited event count)")
	}
	existing := map[string]*catalogEntry{}
	for _, data := range s.catalogs {
		c, err := parseCatalogFact(data, "subagent/catalog")
		if err != nil {
			return nil, err
		}
		if existing[c.childID] != nil {
			return nil, refusal("duplicate catalog child %s", c.childID)
		}
		existing[c.childID] = c
	}
	if s.foreign >= 0 && (!s.info.parent || s.foreign >= s.srcCut) {
		return nil, corrupt("current-generation delivery marker names the wrong Session")
	}
	for i := range s.children {
		ch := &s.children[i]
		if ch.ChildCreatedAt < 0 || ch.DescriptorCount < 0 {
			return nil, refusal("%s: catalog migration requires historical child identity and descriptor evidence", ch.subject())
		}
		fact, err := ch.catalogFact()
		if err != nil {
			return nil, err
		}
		if ex := existing[ch.ChildID]; ex != nil {
			if ex.createdAt != ch.ChildCreatedAt ||
				fact != nil && (ex.mode != fact.mode || ex.hasLabel != fact.hasLabel || ex.label != fact.label) {
				return nil, refusal("%s conflicts with its parent catalog", ch.subject())
			}
			continue
		}
		var data []byte
		if fact != nil {
			data = fact.raw
		} else {
			fact = &catalogEntry{childID: ch.ChildID, createdAt: ch.ChildCreatedAt, mode: "unknown"}
			data = fmt.Appendf(nil, `{"version":1,"childId":%s,"childCreatedAt":%d,"mode":"unknown"}`, jsonString(ch.ChildID), ch.ChildCreatedAt)
		}
		existing[ch.ChildID] = fact
		s.out = append(s.out, &event{typ: "subagent/catalog", seq: s.next, time: s.time, data: data})
		s.next++
	}
	return s.out, nil
}
