package upgrade

import (
	"fmt"
	"slices"

	"github.com/convkit/convkit/internal/rawjson"
)

// messageKeys says where a first-party event carries messages: its data
// (""), data.message, or the array data.inserted or data.messages.
var messageKeys = map[string]string{
	"user/message": "", "system/message": "message", "developer/message": "message",
	"assistant/message": "message", "tool/result": "message",
	"agent/inbox/spliced": "inserted", "session/title-llm-request": "messages",
}

// mapMessages calls fn with every message e carries, which returns a
// replacement or nil; a replacement is set in d, e's data parsed (changed
// says so), or for user/message in e.
func mapMessages(e *event, d *object, fn func(msg []byte) ([]byte, error)) (changed bool, err error) {
	key, ok := messageKeys[e.typ]
	switch {
	case !ok:
		return false, nil
	case key == "":
		m, err := fn(e.data)
		if m != nil {
			e.data = m
		}
		return false, err
	case key == "message":
		msg := d.get(key)
		if !isObj(msg) {
			return false, corrupt("%s at seq %d requires a message", e.typ, e.seq)
		}
		m, err := fn(msg)
		if m != nil {
			d.set(key, m)
		}
		return m != nil, err
	}
	list, err := mapArray(d.get(key), func() error { return corrupt("%s at seq %d requires a message array", e.typ, e.seq) },
		func(_ int, el []byte) ([]byte, error) {
			if !isObj(el) {
				return nil, corrupt("%s at seq %d requires message objects", e.typ, e.seq)
			}
			return fn(el)
		})
	if list != nil {
		d.set(key, list)
	}
	return list != nil, err
}

// rewriteMessages is mapMessages over e's data, re-encoded if changed.
func rewriteMessages(e *event, fn func(msg []byte) ([]byte, error)) error {
	var d *object
	if key, ok := messageKeys[e.typ]; !ok {
		return nil
	} else if key != "" {
		var err error
		if d, err = e.parse(e.data); err != nil {
			return corrupt("%s at seq %d: data must be an object", e.typ, e.seq)
		}
	}
	changed, err := mapMessages(e, d, fn)
	if changed && err == nil {
		e.data = d.bytes()
	}
	return err
}

// mapArray calls fn, which returns a replacement or nil, with each element
// of arr until one fails; it returns arr re-encoded (nil: unchanged), or
// notArray's error.
func mapArray(arr []byte, notArray func() error, fn func(i int, el []byte) ([]byte, error)) ([]byte, error) {
	var elems [][]byte
	var err error
	perr := rawjson.EachElement(arr, func(i int, el []byte) bool {
		var nb []byte
		if nb, err = fn(i, el); err != nil || nb == nil {
			return err == nil
		}
		if elems == nil {
			elems, _ = rawjson.Elements(arr, nil)
		}
		elems[i] = nb
		return true
	})
	switch {
	case err != nil:
		return nil, err
	case perr != nil:
		return nil, notArray()
	case elems == nil:
		return nil, nil
	}
	out := append(make([]byte, 0, len(arr)+16), '[')
	for i, e := range elems {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, e...)
	}
	return append(out, ']'), nil
}

// checkContentKinds refuses a block of a kind not of versions 2 and 3
// (tool-result content included).
func checkContentKinds(content []byte, label string) error {
	_, err := mapArray(content, func() error { return corrupt("%s: content must be an array", label) }, func(i int, block []byte) ([]byte, error) {
		return nil, checkBlockKind(block, fmt.Sprintf("%s[%d]", label, i))
	})
	return err
}

func checkBlockKind(block []byte, label string) error {
	if !isObj(block) {
		return corrupt("%s must be an object", label)
	}
	typ := rawjson.Get(block, "type")
	if err := checkKind(typ, label); err != nil {
		return err
	}
	if rawjson.StringIs(typ, "tool-result") {
		c := rawjson.Get(block, "content")
		if !isArr(c) {
			return corrupt(`%s.content: invalid message content kind "tool-result": content must be an array`, label)
		}
		return checkContentKinds(c, label+".content")
	}
	return nil
}

func checkKind(typ []byte, label string) error {
	k, ok := rawjson.String(typ)
	if !ok || !contentKinds[k] {
		shown := string(typ)
		if typ == nil {
			shown = "undefined"
		}
		return refusal("%s: cannot safely transform unclassified message content kind %s", label, shown)
	}
	return nil
}

// checkStreamKinds checks the blocks of a stream's raw chunk records.
func checkStreamKinds(stream []byte, label string) error {
	_, err := mapArray(stream, func() error { return corrupt("%s must be an array", label) }, func(i int, entry []byte) ([]byte, error) {
		path := fmt.Sprintf("%s[%d]", label, i)
		if !isObj(entry) {
			return nil, corrupt("%s must be an object", path)
		}
		if !rawjson.StringIs(rawjson.Get(entry, "type"), "chunk") {
			return nil, nil
		}
		chunk := rawjson.Get(entry, "chunk")
		if !isObj(chunk) {
			return nil, corrupt("%s.chunk must be an object", path)
		}
		switch t := rawjson.Get(chunk, "type"); {
		case rawjson.StringIs(t, "block-end"):
			return nil, checkBlockKind(rawjson.Get(chunk, "block"), path+".chunk.block")
		case rawjson.StringIs(t, "block-start"):
			return nil, checkKind(rawjson.Get(chunk, "blockType"), path+".chunk.blockType")
		}
		return nil, nil
	})
	return err
}

// migrateContent renames block types outside the v3 kinds plugin:<type>
// (nil: nothing changed).
func migrateContent(content []byte, subject string) ([]byte, error) {
	return mapArray(content, func() error { return corrupt("%s content must be an array", subject) }, func(i int, block []byte) ([]byte, error) {
		if t, ok := rawjson.String(rawjson.Get(block, "type")); ok && isObj(block) && contentKinds[t] {
			return nil, nil
		}
		return migrateBlock(block, fmt.Sprintf("%s[%d]", subject, i))
	})
}

// migrateStream does so for a stream's block-start and block-end records.
func migrateStream(stream []byte, subject string) ([]byte, error) {
	return mapArray(stream, func() error { return corrupt("%s stream must be an array", subject) }, func(i int, entry []byte) ([]byte, error) {
		if !rawjson.StringIs(rawjson.Get(entry, "type"), "chunk") {
			return nil, nil
		}
		// Not skipped whole: a block-end's block holds its whole text.
		chunk := rawjson.GetFrom(entry, "chunk")
		end, bt := false, rawjson.Get(chunk, "blockType")
		switch t := rawjson.Get(chunk, "type"); {
		case rawjson.StringIs(t, "block-end"):
			end, bt = true, rawjson.Get(rawjson.GetFrom(chunk, "block"), "type")
		case !rawjson.StringIs(t, "block-start"):
			return nil, nil
		}
		k, ok := rawjson.String(bt)
		if ok && contentKinds[k] {
			return nil, nil
		}
		path := fmt.Sprintf("%s.stream[%d]", subject, i)
		co, _ := parseObject(rawjson.Get(entry, "chunk"))
		if end {
			nb, err := migrateBlock(co.get("block"), path+".block")
			if err != nil || nb == nil {
				return nil, err
			}
			co.set("block", nb)
		} else if !ok {
			return nil, corrupt("%s blockType must be a string", path)
		} else {
			co.set("blockType", jsonString("plugin:"+k))
		}
		eo, _ := parseObject(entry)
		eo.set("chunk", co.bytes())
		return eo.bytes(), nil
	})
}

func migrateBlock(block []byte, subject string) ([]byte, error) {
	t, ok := rawjson.String(rawjson.Get(block, "type"))
	if !isObj(block) || !ok {
		return nil, corrupt("%s requires content blocks with string type tags", subject)
	}
	if contentKinds[t] {
		return nil, nil
	}
	o, err := parseObject(block)
	if err != nil {
		return nil, corrupt("%s requires content blocks with string type tags", subject)
	}
	o.set("type", jsonString("plugin:"+t))
	return o.bytes(), nil
}

// migrateMessageContent applies migrateContent to msg.content.
func migrateMessageContent(msg []byte, subject string) ([]byte, error) {
	o, err := parseObject(msg)
	if err != nil {
		return nil, corrupt("%s: message must be an object", subject)
	}
	c, err := migrateContent(o.get("content"), subject)
	if err != nil || c == nil {
		return nil, err
	}
	o.set("content", c)
	return o.bytes(), nil
}

// renamedProducers are v3 plugin names whose v4 producer kind differs.
var renamedProducers = map[string]string{
	"compact":                        "compact-checkpoint",
	"tools-code-mode":                "ptc-mode",
	"tools-ptc":                      "ptc-mode",
	"dsh-compaction-basic":           "compact-basic",
	"@deepseek-ai/dsh-system-prompt": "runtime-context",
}

// sameNameProducers keep their plugin name as their v4 kind.
var sameNameProducers = set(
	"agent-instructions", "session-reference", "team-message", "goal",
	"skill-invocation", "skill-catalog", "coordinator", "subagent-report",
	"subagent-settled", "webhook", "agent-message", "model-selection",
	"plan-mode", "time-context", "tmux-context", "user-approval",
	"repeat-tool-reminder", "tool-cordis", "cordis-host-runner", "tool-goal",
	"tool-jobs", "hooks-codex", "hooks-claude-code", "schedule",
	"dsh-session-title-llm",
)

func producerKind(plugin, role string) string {
	if plugin == "@deepseek-ai/dsh-system-prompt" && role == "system" {
		return "system-prompt"
	}
	if k, ok := renamedProducers[plugin]; ok {
		return k
	}
	if sameNameProducers[plugin] {
		return plugin
	}
	return "plugin:" + plugin
}

// rewriteSource turns a v3 {kind:"plugin", plugin:P} source into its v4
// producer kind, other members kept (nil: not a plugin source).
func rewriteSource(src []byte, role string, seq int64) ([]byte, error) {
	if !isObj(src) {
		return nil, nil
	}
	k, ok := rawjson.String(rawjson.Get(src, "kind"))
	if !ok || k == "" {
		return nil, corrupt("message source at seq %d requires a nonempty kind", seq)
	}
	if k != "plugin" {
		return nil, nil
	}
	o, err := parseObject(src)
	if err != nil {
		return nil, corrupt("message source at seq %d is not an object", seq)
	}
	plugin, ok := rawjson.String(o.get("plugin"))
	if !ok {
		return nil, corrupt("plugin source at seq %d is not canonical: plugin requires a string", seq)
	}
	kind := jsonString(producerKind(plugin, role))
	if len(o.m) == 2 {
		return append(append([]byte(`{"kind":`), kind...), '}'), nil
	}
	o.remove("plugin")
	o.set("kind", kind)
	return o.bytes(), nil
}

// liftObject appends the v4 tool message lifted from o, a v3 user message of
// size bytes holding one tool-result wrapper (source rewritten), other
// members kept as plugin:message:<k> and plugin:result:<k>.
func liftObject(dst []byte, o *object, size int, seq int64, subject string) ([]byte, error) {
	fail := func() error {
		return corrupt("format v3 tool/result at seq %d requires exactly one tool-result wrapper matching its tool source", seq)
	}
	id, okID := rawjson.String(o.get("id"))
	source := o.get("source")
	callID, okCall := rawjson.String(rawjson.Get(source, "callId"))
	if !okID || id == "" || !isObj(source) || !rawjson.StringIs(rawjson.Get(source, "kind"), "tool") || !okCall || callID == "" {
		return nil, fail()
	}
	blocks, err := rawjson.Elements(o.get("content"), nil)
	if err != nil || len(blocks) != 1 || !isObj(blocks[0]) {
		return nil, fail()
	}
	w, err := parseObject(blocks[0])
	if err != nil || !rawjson.StringIs(w.get("type"), "tool-result") || !rawjson.StringIs(w.get("toolCallId"), callID) {
		return nil, fail()
	}
	isErr := w.get("isError")
	if isErr != nil && string(isErr) != "true" && string(isErr) != "false" {
		return nil, corrupt("format v3 tool/result at seq %d tool-result isError must be boolean", seq)
	}
	content := w.get("content")
	if !isArr(content) {
		return nil, corrupt("format v3 tool/result at seq %d tool-result content must be an array", seq)
	}
	nested := false
	rawjson.EachElement(content, func(_ int, b []byte) bool {
		if isObj(b) && rawjson.StringIs(rawjson.Get(b, "type"), "tool-result") {
			nested = true
			return false
		}
		return true
	})
	if nested {
		return nil, refusal("format v3 tool/result at seq %d contains a nested tool-result unsupported by this converter", seq)
	}
	if nc, err := migrateContent(content, subject); err != nil {
		return nil, err
	} else if nc != nil {
		content = nc
	}
	out := slices.Grow(dst, size+32)
	out = append(out, `{"role":"tool","source":`...)
	out = append(out, source...)
	out = append(out, `,"toolCallId":`...)
	out = rawjson.AppendString(out, callID)
	out = append(out, `,"content":`...)
	out = append(out, content...)
	if isErr != nil {
		out = append(out, `,"isError":`...)
		out = append(out, isErr...)
	}
	out = append(out, `,"id":`...)
	out = append(out, o.get("id")...)
	out = appendOthers(out, o, "plugin:message:", "id", "role", "source", "content")
	out = appendOthers(out, w, "plugin:result:", "type", "toolCallId", "content", "isError")
	return append(out, '}'), nil
}

// appendOthers appends o's members not in known, their keys prefixed.
func appendOthers(out []byte, o *object, prefix string, known ...string) []byte {
	for _, m := range o.m {
		if slices.Contains(known, string(m.Key)) {
			continue
		}
		out = append(out, ',')
		out = rawjson.AppendString(out, prefix+string(m.Key))
		out = append(out, ':')
		out = append(out, m.Value...)
	}
	return out
}
