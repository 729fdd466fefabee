package convlog

import (
	"github.com/convkit/convkit/internal/rawjson"
)

// The schema of every event type's data (schema.go says how it is read).
// String literals name the types: the table is the vocabulary.

// logKind says which log a type belongs in.
type logKind uint8

const (
	inSession logKind = iota + 1
	inConversation
)

// eventType is one type of the vocabulary: its log, its payload, its role
// on a turn's path and, for a surface type, its message and its one
// interpreter.
type eventType struct {
	name string
	log  logKind
	data *shape
	// plugin: a plugin's payload, which the reference does not check:
	// its members and their JSON types are checked, its values are the
	// plugin's.
	plugin  bool
	role    pathRole
	surface bool
	// msg is the slot of a surface event's message, msgPath the member of
	// data holding it ("": data itself).
	msg       slot
	msgPath   string
	interpret interpreter
}

// Shapes the events share.
var (
	usageShape = &shape{name: "usage", fields: []field{
		f("inputTokens", vCount), f("outputTokens", vCount), o("cacheReadTokens", vCount),
		o("cacheWriteTokens", vCount), o("reasoningTokens", vCount), o("totalTokens", vCount)}}
	failureShape = &shape{name: "failure", fields: []field{
		f("code", vStr), f("message", vStr), o("status", vInt), o("requestId", vStr),
		o("providerRetryAfterMs", vInt), o("offloadImages", vInt)}}
	toolErrorShape = &shape{name: "tool error", fields: []field{f("name", vStr), f("code", vStr), o("reason", vStr)}}
	rangeShape     = &shape{name: "range", closed: true, fields: []field{f("start", vCount), f("end", vCount)}}
	cancelShape    = &shape{name: "cancel cause", fields: []field{
		fEnum("kind", "user", "parent", "hook", "disposed", "legacy"), o("reason", vStr)}}
	turnEndReasonShape = &shape{name: "turn end reason", fields: []field{fEnum("kind", TurnEndKinds...),
		oSub("reason", cancelShape).when("kind", "aborted"), oSub("error", failureShape).when("kind", "error")}}
	configShape = &shape{name: "config", fields: []field{
		f("provider", vNonEmpty), f("model", vNonEmpty), o("reasoningEffort", vNonEmpty), o("maxTokens", vInt),
		o("temperature", vNum), o("stop", vStrs)}}
	adapterDefaultsShape = &shape{name: "adapterDefaults", fields: []field{o("reasoningEffort", vTrue), o("maxTokens", vTrue)}}
	toolSchemaShape      = &shape{name: "tool", fields: []field{
		f("name", vNonEmpty), o("description", vStr), o("parameters", vObj),
		{name: "deferLoading", t: vTrue, opt: true}}}
	requestHeaderShape = &shape{name: "request header", fields: []field{
		fSub("config", configShape), oSub("adapterDefaults", adapterDefaultsShape), oSubs("tools", toolSchemaShape),
		never("system", "is retired in format v4: the system prompt is a system/message")},
		then: thenEpochHeader}
	routeShape       = &shape{name: "route", fields: []field{f("provider", vStr), f("model", vStr)}}
	titleSrcShape    = &shape{name: "title source", fields: []field{fEnum("kind", "user", "fallback", "provider"), o("provider", vStr).when("kind", "provider"), oSub("model", routeShape)}}
	offloadShape     = &shape{name: "offload target", fields: []field{f("seq", vCount), f("imageIndexes", vCounts)}}
	inheritedShape   = &shape{name: "inherited session", fields: []field{f("sessionId", vNonEmpty), f("sourceConversation", vNonEmpty), f("sourceSession", vNonEmpty), f("throughSeq", vInt)}}
	teamMessageShape = &shape{name: "team message", fields: []field{f("id", vStr), f("senderId", vStr), f("senderName", vStr),
		f("targetId", vStr), fBlocks("content", slotPlain)}}
)

// requires refuses obj without member key, which what names requires.
func requires(obj []byte, key, what string) *problem {
	if rawjson.Get(obj, key) == nil {
		return newProblem("is missing (%s requires it)", what).in("." + key)
	}
	return nil
}

// checkEpochHeader: empty tools and adapterDefaults are omitted, and each
// adapterDefaults marker has its config value.
func checkEpochHeader(ms []member) *problem {
	cfg, ad, tools := memberValue(ms, "config"), memberValue(ms, "adapterDefaults"), memberValue(ms, "tools")
	if tools != nil && rawjson.EmptyArray(tools) {
		return newProblem("must be omitted when empty").in(".tools")
	}
	if ad == nil {
		return nil
	}
	if rawjson.EmptyObject(ad) {
		return newProblem("must be omitted when empty").in(".adapterDefaults")
	}
	for _, k := range []string{"reasoningEffort", "maxTokens"} {
		if rawjson.Get(ad, k) != nil && rawjson.Get(cfg, k) == nil {
			return newProblem("marks a default the config does not hold (config.%s is missing)", k).in(".adapterDefaults." + k)
		}
	}
	return nil
}

// headerMembers is a request header's config, adapterDefaults and tools,
// found in one walk of it (its tools are most of it).
func headerMembers(hdr []byte) (cfg, ad, tools []byte) {
	var buf [8]member
	w := walk{b: hdr}
	_, ms := w.members(buf[:0])
	return memberValue(ms, "config"), memberValue(ms, "adapterDefaults"), memberValue(ms, "tools")
}

func sess(fields ...field) *eventType {
	return &eventType{log: inSession, data: &shape{name: "data", fields: fields}}
}

func plugin(fields ...field) *eventType {
	return &eventType{log: inSession, data: &shape{name: "data", fields: fields}, plugin: true}
}

func conv(fields ...field) *eventType {
	return &eventType{log: inConversation, data: &shape{name: "data", fields: fields}}
}

// surface is a surface type whose message is data.message.
func surface(sl slot, in interpreter, fields ...field) *eventType {
	return &eventType{log: inSession, data: &shape{name: "data", fields: fields}, surface: true, msg: sl, msgPath: "message", interpret: in}
}

// on gives t its role on a turn's path.
func (t *eventType) on(r pathRole) *eventType {
	t.role = r
	return t
}

var turnStep = []field{f("turn", vInt), f("step", vInt)}

func withTurnStep(fields ...field) []field {
	return append(append([]field(nil), turnStep...), fields...)
}

// eventTypes is the vocabulary of version 4: the session log's types (the
// reference's 59) and the conversation log's.
var eventTypes = map[string]*eventType{
	// The turn's skeleton.
	"turn/start":       sess(f("turn", vInt)).on(roleTurnStart),
	"turn/end":         sess(f("turn", vInt), fSub("reason", turnEndReasonShape)).on(roleTurnEnd),
	"step/start":       sess(turnStep...).on(roleStepStart),
	"step/end":         sess(turnStep...).on(roleStepEnd),
	"session/end-seed": sess(o("inherited", vTrue)).on(roleEndSeed),

	// Surface events.
	TypeUserMessage:   {log: inSession, surface: true, msg: slotUser, interpret: interpretRole("user")},
	TypeSystemMessage: surface(slotSystem, interpretRole("system"), withTurnStep(fMsg("message", slotSystem))...).on(roleInStep),
	TypeDeveloperMessage: surface(slotDeveloper, interpretRole("developer"), f("turn", vPos), f("step", vPos),
		fMsg("message", slotDeveloper), o("headerSeq", vCount)).on(roleInStep),
	TypeAssistantMessage: surface(slotAssistant, interpretAssistant, withTurnStep(fMsg("message", slotAssistant),
		f("stream", vStream), oSub("usage", usageShape), o("interrupted", vTrue))...).on(roleAnswer),
	TypeToolResult: surface(slotTool, interpretRole("tool"), withTurnStep(fMsg("message", slotTool), oSub("error", toolErrorShape),
		o("meta", vAny))...).on(roleToolResult),

	// The request, the model call, the tools.
	"assistant/attempt": sess(withTurnStep(f("stream", vStream))...).on(roleAttempt),
	"tool/call":         sess(withTurnStep(f("callId", vNonEmpty), f("name", vStr), f("arguments", vStr))...).on(roleToolCall),
	"request/header": sess(fSub("header", requestHeaderShape), fEnum("reason", "initial", "resume", "change", "series"),
		o("startsSeries", vTrue)).on(roleInStep),
	"request/context": sess(f("provider", vStr), f("model", vStr), o("contextWindow", vInt), oEnum("systemPromptUpdate", "in-history")).on(roleInStep),
	"tool/ptc-dispatch-start": sess(f("rootCallId", vNonEmpty), f("parentCallId", vNonEmpty), f("subCallId", vNonEmpty),
		f("name", vStr), f("arguments", vAny)),
	"tool/ptc-dispatch": sess(f("rootCallId", vNonEmpty), f("parentCallId", vNonEmpty), f("subCallId", vNonEmpty),
		f("name", vStr), f("arguments", vAny), f("isError", vBool), oSub("error", toolErrorShape), fBlocks("content", slotPlain)),
	"llm/retry": sess(fEnum("mode", "normal", "always"), f("turn", vInt), f("step", vInt), f("provider", vStr), f("policyKey", vStr),
		f("retryId", vNonEmpty), f("retry", vPos), f("delayMs", vInt), o("maxRetries", vInt).when("mode", "normal"),
		fSub("failure", failureShape)).on(roleRetry),
	"llm/retry-started": sess(withTurnStep(f("retryId", vNonEmpty), f("retry", vPos))...).on(roleRetry),

	// Compaction.
	"compaction/start": sess(f("compactionId", vNonEmpty), o("sourceCommandId", vStr), f("turn", vIntOrNull)),
	"compaction/summary": sess(f("compactionId", vNonEmpty), o("sourceCommandId", vStr), fBlocks("summary", slotSummary), fSub("shadowedRange", rangeShape),
		f("shadowedSeqs", vCounts), f("shadowedTokenCount", vInt), f("provider", vStr), f("model", vStr), o("maxTokens", vInt),
		oSub("usage", usageShape), oBlocks("rawOutput", slotSummary).when("llmStreamCall"), o("llmStreamCall", vTrue)),
	"compaction/end":   sess(f("compactionId", vNonEmpty), o("sourceCommandId", vStr), f("turn", vIntOrNull), o("error", vStr)),
	"compaction/prune": sess(fSub("shadowedRange", rangeShape), f("shadowedSeqs", vCounts), f("shadowedTokenCount", vInt)),
	"image/offload":    sess(fSubs("targets", offloadShape)),

	// Titles, commands, subagents, delivery.
	"session/title": sess(f("title", vStr), f("messageSeqs", vCounts), fSub("source", titleSrcShape)),
	"session/title-llm-request": sess(f("titleProvider", vStr), fSub("route", routeShape), f("system", vStr), f("maxTokens", vInt),
		f("messageSeqs", vCounts), fMsgs("messages", slotUser)),
	"command/run":  sess(f("commandId", vNonEmpty), f("name", vStr), o("args", vStr), f("source", vObj)),
	"command/done": sess(f("commandId", vNonEmpty), fEnum("kind", "success", "error"), o("text", vStr), o("sourceEventSeq", vCount)),
	"subagent/catalog": {log: inSession, data: &shape{name: "data", then: thenCatalog, fields: []field{f("version", vInt),
		f("childId", vNonEmpty), f("childCreatedAt", vCount), f("mode", vStr), o("label", vStr)}}},
	"session-log-deepseek/delivery-accepted": sess(f("sessionId", vStr), f("throughSeq", vCount), o("sessionFormatVersion", vCount)),
	"agent/inbox/spliced": sess(fEnum("target", "next-step", "next-turn"), f("start", vInt), o("removedCount", vInt), fMsgs("inserted", slotUser),
		o("outcome", vStr)).on(roleSplice),

	// Plugins' events.
	"subagent/descriptor":             plugin(f("version", vInt), f("mode", vStr), f("provider", vStr), o("label", vStr)),
	"subagent/model-selection-policy": plugin(f("allowedModels", vArr)),
	"tool-workflow/run-start":         plugin(f("runId", vStr), f("name", vStr)),
	"tool-workflow/run-end":           plugin(f("runId", vStr), f("stopReason", vStr)),
	"tool-workflow/agent-start":       plugin(f("runId", vStr), f("seq", vInt), f("childId", vStr), f("label", vStr), o("phase", vStr)),
	"tool-workflow/agent-end":         plugin(f("runId", vStr), f("seq", vInt), f("outcome", vStr)),
	"team/member":                     plugin(f("version", vInt), f("teamId", vStr), f("member", vObj)),
	"team/task":                       plugin(f("version", vInt), f("teamId", vStr), f("task", vObj)),
	"team/message/queued":             plugin(f("version", vInt), f("teamId", vStr), fSub("message", teamMessageShape)),
	"team/message/delivered":          plugin(f("version", vInt), f("teamId", vStr), f("messageId", vStr), f("targetId", vStr)),
	"agent-preset/selected":           plugin(f("agentPreset", vStr)),
	"approval/asked":                  plugin(f("id", vStr), f("toolName", vStr), o("callId", vStr), o("reason", vStr)),
	"approval/decided":                plugin(f("id", vStr), f("outcome", vStr)),
	"approval/policy":                 plugin(f("policy", vStr), o("source", vStr)),
	"sandbox/mode":                    plugin(f("mode", vStr), o("source", vStr)),
	"permission/preset":               plugin(f("preset", vStr)),
	"plan/mode":                       plugin(f("active", vBool)),
	"model/selection":                 plugin(f("provider", vStr), f("model", vStr), o("reasoningEffort", vStr)),
	"hook/invoked":                    plugin(f("turn", vInt), f("point", vStr), f("dialect", vStr), o("matcher", vStr), f("handlerId", vStr)),
	"hook/result":                     plugin(f("turn", vInt), f("point", vStr), f("handlerId", vStr), f("decision", vStr), o("exitCode", vInt), o("stderrSummary", vStr), f("durationMs", vInt)),
	"goal/change":                     plugin(f("kind", vStr), f("version", vInt), f("operation", vStr)),
	"schedule/change":                 plugin(f("version", vInt), f("operation", vStr)),
	"todo/write":                      plugin(f("todos", vArr)),
	"feedback/record":                 plugin(o("category", vStr), o("text", vStr)),
	"feedback/message-put":            plugin(f("sessionId", vStr), f("item", vObj)),
	"feedback/message-delete":         plugin(f("sessionId", vStr), f("messageId", vStr)),
	"deliverables/presented":          plugin(f("turn", vInt), f("callId", vStr), f("files", vArr)),
	"workspace/changes":               plugin(f("turn", vInt)),
	"web/deepseek-search-llm-request": plugin(f("endpoint", vStr), f("apiVersion", vStr), f("body", vObj)),

	// The conversation log.
	"conversation/created":        conv(f("cwd", vAbsPath), f("agents", vStrs), f("models", vStrs), o("title", vLine)),
	"session/started":             conv(f("sessionId", vNonEmpty), f("agent", vStr), f("model", vStr), o("parentSession", vNonEmpty)),
	"turn/started":                conv(f("sessionId", vNonEmpty), f("turn", vPos)),
	"conversation/title":          conv(f("title", vLine), o("messageSeqs", vCounts)),
	"turn/ended":                  conv(f("sessionId", vNonEmpty), f("turn", vPos), fEnum("outcome", "completed", "failed", "interrupted")),
	"conversation/renamed":        conv(f("title", vLine)),
	"conversation/archived":       conv(),
	"conversation/unarchived":     conv(),
	"conversation/delete-started": conv(),
	"conversation/forked": conv(f("sessionId", vNonEmpty), f("sourceConversation", vNonEmpty), f("sourceSession", vNonEmpty),
		f("throughSeq", vInt), f("afterCompaction", vBool), oSubs("inheritedSessions", inheritedShape)),
	"conversation/rewound": conv(f("sourceConversation", vNonEmpty), f("sourceSession", vNonEmpty), f("beforeSeq", vInt),
		f("composerText", vStr)),
	"conversation/cwd-mapped": conv(f("from", vAbsPath), f("to", vAbsPath)),
}

var headerSchema = eventTypes["request/header"]

func init() {
	for n, t := range eventTypes {
		t.name = n
	}
}

// checkCatalog: version 0 or 1; mode continuable, one-shot, or (version
// 1) unknown; a continuable child has a label.
func checkCatalog(obj []byte) *problem {
	ver, _ := rawjson.Int(rawjson.Get(obj, "version"))
	if ver != 0 && ver != 1 {
		return newProblem("must be 0 or 1, not %d", ver).in(".version")
	}
	switch mode := str(rawjson.Get(obj, "mode")); {
	case mode == "continuable":
		return requires(obj, "label", `mode "continuable"`)
	case mode == "one-shot", mode == "unknown" && ver == 1:
	default:
		return newProblem(`must be "continuable" or "one-shot" (or "unknown" in version 1), not %s`, clip(rawjson.Get(obj, "mode"))).in(".mode")
	}
	return nil
}
