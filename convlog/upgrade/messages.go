package upgrade

import (
	"slices"
	"strings"

	"github.com/convkit/convkit/internal/rawjson"
)

// mapMessages calls fn with every message a first-party event carries
// (user/message data, data.message of the message events and tool/result,
// agent/inbox/spliced data.inserted[], session/title-llm-request
// data.messages[]); fn returns a replacement or nil, and the data is
// re-encoded only when one changed.
func mapMessages(e *event, fn func(msg []byte) ([]byte, error)) error {
	switch e.typ {
	case "user/message":
		m, err := fn(e.payload())
		if err != nil {
			return err
		}
		if m != nil {
			e.data = m
		}
		return nil
	case "system/message", "developer/message", "assistant/message", "tool/result":
		d, err := parseObject(e.payload())
		if err != nil {
			return corrupt("%s at seq %d: data must be an object", e.typ, e.seq)
		}
		msg := d.get("message")
		if !isObj(msg) {
			return corrupt("%s at seq %d requires a message", e.typ, e.seq)
		}
		m, err := fn(msg)
		if err != nil {
			return err
		}
		if m != nil {
			d.set("message", m)
			e.data = d.bytes()
		}
		return nil
	case "agent/inbox/spliced", "session/title-llm-request":
		d, err := parseObject(e.payload())
		if err != nil {
			return corrupt("%s at seq %d: data must be an object", e.typ, e.seq)
		}
		changed, err := mapList(e, d, fn)
		if err != nil {
			return err
		}
		if changed {
			e.data = d.bytes()
		}
	}
	return nil
}

// mapList is mapMessages over the message array of d, the data of an
// agent/inbox/spliced or session/title-llm-request; it reports whether
// fn replaced one.
func mapList(e *event, d *object, fn func(msg []byte) ([]byte, error)) (bool, error) {
	key := "inserted"
	if e.typ == "session/title-llm-request" {
		key = "messages"
	}
	elems, err := rawjson.Elements(d.get(key), nil)
	if err != nil {
		return false, corrupt("%s at seq %d requires a message array", e.typ, e.seq)
	}
	changed := false
	for i, el := range elems {
		if !isObj(el) {
			return false, corrupt("%s at seq %d requires message objects", e.typ, e.seq)
		}
		m, err := fn(el)
		if err != nil {
			return false, err
		}
		if m != nil {
			elems[i], changed = m, true
		}
	}
	if changed {
		d.set(key, encodeArray(nil, elems))
	}
	return changed, nil
}

// checkContentKinds refuses a content block whose type is not one of the
// version 2/3 kinds (tool-result content is checked too).
func checkContentKinds(content []byte, label string) error {
	return checkElements(content, label+": content", func(i int, block []byte) error {
		return checkBlockKind(block, label+"["+itoa(int64(i))+"]")
	})
}

// checkElements calls check on each element of arr until one fails;
// what names arr when it is no array.
func checkElements(arr []byte, what string, check func(i int, el []byte) error) error {
	var err error
	perr := rawjson.EachElement(arr, func(i int, el []byte) bool {
		err = check(i, el)
		return err == nil
	})
	if err != nil {
		return err
	}
	if perr != nil {
		return corrupt("%s must be an array", what)
	}
	return nil
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

// checkStreamKinds checks the blocks that raw chunk records of an embedded
// stream carry (block-start blockType, block-end block).
func checkStreamKinds(stream []byte, label string) error {
	return checkElements(stream, label, func(i int, entry []byte) error {
		path := label + "[" + itoa(int64(i)) + "]"
		if !isObj(entry) {
			return corrupt("%s must be an object", path)
		}
		if !rawjson.StringIs(rawjson.Get(entry, "type"), "chunk") {
			return nil
		}
		chunk := rawjson.Get(entry, "chunk")
		if !isObj(chunk) {
			return corrupt("%s.chunk must be an object", path)
		}
		switch t := rawjson.Get(chunk, "type"); {
		case rawjson.StringIs(t, "block-end"):
			return checkBlockKind(rawjson.Get(chunk, "block"), path+".chunk.block")
		case rawjson.StringIs(t, "block-start"):
			return checkKind(rawjson.Get(chunk, "blockType"), path+".chunk.blockType")
		}
		return nil
	})
}

// migrateContent renames content block types outside the v3 kinds to
// plugin:<type>. It returns nil when nothing changed.
func migrateContent(content []byte, subject string) ([]byte, error) {
	// First pass without allocating: almost every block is of a known kind.
	need := false
	var bad error
	perr := rawjson.EachElement(content, func(i int, block []byte) bool {
		t, ok := rawjson.String(rawjson.Get(block, "type"))
		if !isObj(block) || !ok {
			bad = corrupt("%s[%d] requires content blocks with string type tags", subject, i)
			return false
		}
		if !contentKinds[t] {
			need = true
			return false
		}
		return true
	})
	if bad != nil {
		return nil, bad
	}
	if perr != nil {
		return nil, corrupt("%s content must be an array", subject)
	}
	if !need {
		return nil, nil
	}
	elems, err := rawjson.Elements(content, nil)
	if err != nil {
		return nil, corrupt("%s content must be an array", subject)
	}
	for i, block := range elems {
		nb, err := migrateBlock(block, subject+"["+itoa(int64(i))+"]")
		if err != nil {
			return nil, err
		}
		if nb != nil {
			elems[i] = nb
		}
	}
	return encodeArray(make([]byte, 0, len(content)+16), elems), nil
}

func migrateBlock(block []byte, subject string) ([]byte, error) {
	if !isObj(block) {
		return nil, corrupt("%s requires content blocks with string type tags", subject)
	}
	typ := rawjson.Get(block, "type")
	t, ok := rawjson.String(typ)
	if !ok {
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

// renamedProducers are the v3 plugin names whose v4 producer kind differs
// from the plugin name.
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
// producer kind, keeping every other member in place. It returns nil when
// the source is not a plugin source.
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

// liftObject appends to dst the v4 tool-role message lifted from o, a v3
// user-role message of size bytes holding one tool-result wrapper, other
// members kept as plugin:message:<k> and plugin:result:<k>; o's source must
// be rewritten already. It returns nil when o is not such a result, and the
// lifted message's content.
func liftObject(dst []byte, o *object, size int, seq int64) (out, content []byte, err error) {
	if !rawjson.StringIs(o.get("role"), "user") {
		return nil, nil, nil
	}
	fail := func() error {
		return corrupt("format v3 tool/result at seq %d requires exactly one tool-result wrapper matching its tool source", seq)
	}
	id, okID := rawjson.String(o.get("id"))
	source := o.get("source")
	callID, okCall := rawjson.String(rawjson.Get(source, "callId"))
	if !okID || id == "" || !isObj(source) || !rawjson.StringIs(rawjson.Get(source, "kind"), "tool") || !okCall || callID == "" {
		return nil, nil, fail()
	}
	blocks, err := rawjson.Elements(o.get("content"), nil)
	if err != nil || len(blocks) != 1 || !isObj(blocks[0]) {
		return nil, nil, fail()
	}
	w, err := parseObject(blocks[0])
	if err != nil || !rawjson.StringIs(w.get("type"), "tool-result") || !rawjson.StringIs(w.get("toolCallId"), callID) {
		return nil, nil, fail()
	}
	isErr := w.get("isError")
	if isErr != nil && string(isErr) != "true" && string(isErr) != "false" {
		return nil, nil, corrupt("format v3 tool/result at seq %d tool-result isError must be boolean", seq)
	}
	content = w.get("content")
	if !isArr(content) {
		return nil, nil, corrupt("format v3 tool/result at seq %d tool-result content must be an array", seq)
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
		return nil, nil, refusal("format v3 tool/result at seq %d contains a nested tool-result unsupported by this converter", seq)
	}
	out = slices.Grow(dst, size+32)
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
	return append(out, '}'), content, nil
}

// appendOthers appends the members of o not named in known, each under its
// key prefixed.
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

// hasGeneratedIDPrefix reports whether a message id could collide with the
// system message ids the v2→v3 step generates.
func hasGeneratedIDPrefix(id string) bool { return strings.HasPrefix(id, systemIDPrefix) }

const systemIDPrefix = "v2-to-v3-system-"
