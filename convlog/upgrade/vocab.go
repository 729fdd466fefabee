package upgrade

import (
	"fmt"
	"slices"

	"github.com/convkit/convkit/internal/rawjson"
)

// The closed vocabularies of versions 0 to 3: another type is refused (in v3
// an ignorable one becomes plugin:<type>).

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// v0Types is the v0/v1 inventory (after the v0 renames), with the feedback
// events v2 admits outside its inventory.
var v0Types = set(
	"agent-preset/selected", "agent/inbox/spliced", "approval/asked", "approval/decided", "approval/policy",
	"assistant/chunk", "assistant/message", "command/done", "command/run", "compaction/end",
	"compaction/prune", "compaction/start", "compaction/summary", "feedback/record", "goal/change",
	"hook/invoked", "hook/result", "llm/retry", "llm/retry-started", "model/selection", "permission/preset",
	"plan/mode", "request/context", "request/header", "sandbox/mode", "schedule/change",
	"session-log-deepseek/delivery-accepted", "session/end-seed", "session/title", "session/title-llm-request",
	"step/end", "step/start", "subagent/descriptor", "subagent/model-selection-policy", "team/member",
	"team/message/delivered", "team/message/queued", "team/task", "todo/write", "tool-workflow/agent-end",
	"tool-workflow/agent-start", "tool-workflow/run-end", "tool-workflow/run-start", "tool/call",
	"tool/code-dispatch", "tool/code-dispatch-start", "tool/result", "turn/end", "turn/start", "user/message",
	"web/deepseek-search-llm-request",
	"feedback/message-put", "feedback/message-delete",
)

// v2Types is v1's less assistant/chunk, plus assistant/attempt.
var v2Types = with(v0Types, []string{"assistant/chunk"}, "assistant/attempt")

// releasedV3Types is RELEASED_V3_EVENT_TYPES: v2's, code renamed ptc, and five more.
var releasedV3Types = with(v2Types, []string{"tool/code-dispatch", "tool/code-dispatch-start"},
	"tool/ptc-dispatch", "tool/ptc-dispatch-start", "deliverables/presented", "image/offload",
	"subagent/catalog", "system/message", "workspace/changes")

// with is base less drop, plus add.
func with(base map[string]bool, drop []string, add ...string) map[string]bool {
	m := set(add...)
	for k := range base {
		if !slices.Contains(drop, k) {
			m[k] = true
		}
	}
	return m
}

// contentKinds are the content block types of versions 2 and 3.
var contentKinds = set("text", "reasoning", "image", "file", "tool-call", "tool-result")

// restartTracker recognises the legacy restart (a turn open, no step, a
// next-turn agent/inbox/spliced, the next turn/start): the turn was interrupted.
type restartTracker struct {
	turn     int64
	open     bool
	stepOpen bool
	spliced  bool
}

// observe returns the turn to close before e, if any.
func (t *restartTracker) observe(e *event) (int64, bool) {
	var next int64
	hasTurn := false
	if e.typ == "turn/start" {
		next, hasTurn = count(rawjson.Get(e.data, "turn"))
	}
	closeTurn, interrupted := t.turn, e.typ == "turn/start" && t.open && !t.stepOpen && t.spliced && hasTurn && next == t.turn+1
	t.spliced = false
	if e.typ == "agent/inbox/spliced" {
		d := e.data
		ins := rawjson.Get(d, "inserted")
		t.spliced = rawjson.StringIs(rawjson.Get(d, "target"), "next-turn") && isArr(ins) && !rawjson.EmptyArray(ins)
	}
	switch e.typ {
	case "turn/start":
		if hasTurn {
			t.turn, t.open = next, true
		}
	case "turn/end":
		t.open = false
	case "step/start":
		t.stepOpen = true
	case "step/end":
		t.stepOpen = false
	}
	return closeTurn, interrupted
}

// interruptedTurnEnd builds the turn/end that closes an interrupted turn.
func interruptedTurnEnd(turn, time int64) *event {
	return &event{typ: "turn/end", time: time, data: fmt.Appendf(nil, `{"turn":%d,"reason":{"kind":"interrupted"}}`, turn)}
}
