package convlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/convlog/upgrade"
)

// The format's test vectors (testdata/vectors, docs/FORMAT.md "Test
// vectors"): one small log per rule, plain and zstd, each with its verdict
// in manifest.json. They are written here by hand, line by line, and
// framed with the zstd library directly: no part of convkit's writer
// makes them. TestVectorsWritten keeps the files what this generator
// writes (-update-vectors rewrites them); TestVectors reads each as
// another implementation would and compares its verdict.

var updateVectors = flag.Bool("update-vectors", false, "rewrite testdata/vectors from the generator")

const vectorsDir = "testdata/vectors"

// Manifest is testdata/vectors/manifest.json.
type Manifest struct {
	Format  string   `json:"format"`
	About   string   `json:"about"`
	Vectors []Vector `json:"vectors"`
}

// Vector is one log and its verdict.
type Vector struct {
	Name string `json:"name"`
	What string `json:"what"`
	// Files are the same log plain and compressed (or one of them).
	Files []string `json:"files"`
	// Read is "log" (the file as a version 4 reader opens it, its own
	// version's rules for an older log) or "upgrade" (an older log's
	// events through the upgrade chain, admitted as version 4).
	Read  string `json:"read"`
	Valid bool   `json:"valid"`
	// Torn: a valid log whose last line (or frame) is torn.
	Torn bool `json:"torn,omitempty"`
	// The first problem: its line (1 the header), or for a problem with a
	// whole zstd frame its frame (1-based), and the rule's name.
	Line  int64  `json:"line,omitempty"`
	Frame int64  `json:"frame,omitempty"`
	Rule  string `json:"rule,omitempty"`
}

// vlog is a log being written by hand.
type vlog struct {
	header string
	lines  []string
	bad    int // line of the first problem (1-based), 0 for none
}

func hdr(v int) string {
	if v <= 1 {
		return fmt.Sprintf(`{"type":"session","version":%d,"id":"v","createdAt":1790000000000,"cwd":"/w","delegationDepth":0}`, v)
	}
	return fmt.Sprintf(`{"type":"session","version":%d,"id":"v","createdAt":1790000000000,"cwd":"/w","isSeeded":false,"delegationDepth":0}`, v)
}

const convHdr = `{"type":"conversation","version":4,"id":"c","createdAt":1790000000000}`

var surfaceTypes = map[string]bool{"user/message": true, "system/message": true, "developer/message": true, "assistant/message": true, "tool/result": true}

// ev appends an event: surface types append to the history unless extra
// says otherwise; extra holds more envelope members (",\"ignorable\":true").
func (l *vlog) ev(typ, data string, extra ...string) *vlog {
	x := strings.Join(extra, "")
	if surfaceTypes[typ] && !strings.Contains(x, `"surfaceOp"`) {
		x += `,"surfaceOp":"append"`
	}
	l.lines = append(l.lines, fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":%s%s}`, typ, len(l.lines), 1790000000100+int64(len(l.lines)), data, x))
	return l
}

// raw appends a line as it is.
func (l *vlog) raw(line string) *vlog {
	l.lines = append(l.lines, line)
	return l
}

// wrong marks the next event as the one refused.
func (l *vlog) wrong() *vlog {
	l.bad = len(l.lines) + 2
	return l
}

func (l *vlog) text() []byte {
	return []byte(l.header + "\n" + strings.Join(l.lines, "\n") + "\n")
}

func user(id, text string) string {
	return fmt.Sprintf(`{"content":[{"type":"text","text":%q}],"source":{"kind":"user"},"role":"user","id":%q}`, text, id)
}

const (
	sysMsg   = `{"turn":1,"step":1,"message":{"role":"system","content":[{"type":"text","text":"You are a coding agent."}],"source":{"kind":"system-prompt"},"id":"sys"}}`
	header1  = `{"header":{"config":{"provider":"deepseek","model":"deepseek-chat"},"tools":[{"name":"bash","description":"Run a command.","parameters":{"type":"object"}}]},"reason":"initial"}`
	ts11     = `{"turn":1,"step":1}`
	model    = `"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"}`
	callArgs = `{\"command\":\"ls\"}`
)

func answer(id, content, rest string) string {
	return fmt.Sprintf(`{"turn":1,"step":1,"message":{"role":"assistant","content":%s,%s,"id":%q},"stream":[]%s}`, content, model, id, rest)
}

func callAnswer(id, call string) string {
	return answer(id, fmt.Sprintf(`[{"type":"tool-call","id":%q,"name":"bash","arguments":"%s"}]`, call, callArgs), "")
}

func toolCall(call string) string {
	return fmt.Sprintf(`{"turn":1,"step":1,"callId":%q,"name":"bash","arguments":"%s"}`, call, callArgs)
}

func result(id, call, rest string) string {
	return fmt.Sprintf(`{"turn":1,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":%q},"toolCallId":%q,"content":[{"type":"text","text":"a.go"}],"isError":false,"id":%q}%s}`, call, call, id, rest)
}

// turn is the start of a version 4 turn: the prompt admitted, the turn
// and its first step, the system prompt, the prompt, the request.
func turn() *vlog {
	l := &vlog{header: hdr(4)}
	return l.ev("agent/inbox/spliced", `{"target":"next-turn","start":0,"inserted":[`+user("u1", "List the files")+`]}`).
		ev("turn/start", `{"turn":1}`).ev("step/start", ts11).ev("system/message", sysMsg).
		ev("user/message", user("u1", "List the files")).ev("request/header", header1)
}

func stepOnly() *vlog {
	l := &vlog{header: hdr(4)}
	return l.ev("turn/start", `{"turn":1}`).ev("step/start", ts11)
}

// A stream of an answer: reasoning, text, a tool call, usage, finish.
const stream = `[{"type":"chunk","time":1,"chunk":{"type":"block-start","index":0,"blockType":"reasoning"}},` +
	`{"type":"reasoning-chunks","time0":2,"index":0,"dt":[1],"texts":["I will ","look."]},` +
	`{"type":"chunk","time":4,"chunk":{"type":"block-end","index":0,"block":{"type":"reasoning","text":"I will look."}}},` +
	`{"type":"text-chunks","time0":5,"index":1,"dt":[],"texts":["Listing."]},` +
	`{"type":"tool-call-chunks","time0":6,"index":2,"dt":[2],"id":"c1","name":"bash","args":["{\"command\"",":\"ls\"}"]},` +
	`{"type":"chunk","time":9,"chunk":{"type":"usage","usage":{"inputTokens":900,"outputTokens":40}}},` +
	`{"type":"chunk","time":9,"chunk":{"type":"finish","reason":{"kind":"tool-calls"}}}]`

const streamed = `[{"type":"reasoning","text":"I will look."},{"type":"text","text":"Listing."},{"type":"tool-call","id":"c1","name":"bash","arguments":"` + callArgs + `"}]`

// vdef is a vector as the generator defines it.
type vdef struct {
	name, what string
	log        *vlog
	read       string
	// files: "both" (default), "plain" or "zstd"; data, when set, is the
	// file's bytes (plain or zstd as the name says) instead of log's.
	files string
	data  func() []byte
	// version of the file name (4 by default).
	version int
	// verdict beyond log.bad: a header problem (line 1), a frame, a rule.
	line  int64
	frame int64
	rule  string
	torn  bool
}

func vectorDefs() []vdef {
	tr := turn
	return []vdef{
		// Valid logs.
		{name: "valid-turn", what: "a whole turn: admission, system prompt, prompt, request, a streamed answer asking for a tool, the call, its result, the last answer with usage, the ends",
			log: tr().ev("assistant/message", strings.Replace(answer("a1", streamed, `,"usage":{"inputTokens":900,"outputTokens":40}`), `"stream":[]`, `"stream":`+stream, 1)).
				ev("tool/call", toolCall("c1")).ev("tool/result", result("r1", "c1", ""), `,"sourceEventSeqs":[7]`).ev("step/end", ts11).
				ev("step/start", `{"turn":1,"step":2}`).ev("request/header", strings.Replace(header1, `"initial"`, `"series"`, 1)).
				ev("assistant/message", strings.Replace(answer("a2", `[{"type":"text","text":"a.go"}]`, `,"usage":{"inputTokens":950,"outputTokens":3}`), `"step":1`, `"step":2`, 1)).
				ev("step/end", `{"turn":1,"step":2}`).ev("turn/end", `{"turn":1,"reason":{"kind":"completed"}}`)},
		{name: "valid-retry", what: "a model call that failed (its attempt's stream finishes with the error), retried, then an empty answer",
			log: tr().ev("assistant/attempt", `{"turn":1,"step":1,"stream":[{"type":"text-chunks","time0":1,"index":0,"dt":[],"texts":["Let me"]},{"type":"chunk","time":2,"chunk":{"type":"finish","reason":{"kind":"error","failure":{"code":"ECONNRESET","message":"the stream was dropped"}}}}]}`).
				ev("llm/retry", `{"mode":"normal","turn":1,"step":1,"provider":"deepseek","policyKey":"transient","retryId":"r1","retry":1,"delayMs":1000,"maxRetries":10,"failure":{"code":"ECONNRESET","message":"the stream was dropped"}}`).
				ev("llm/retry-started", `{"turn":1,"step":1,"retryId":"r1","retry":1}`).
				ev("assistant/message", answer("a1", "[]", "")).ev("step/end", ts11).ev("turn/end", `{"turn":1,"reason":{"kind":"completed"}}`)},
		{name: "valid-compaction", what: "a compaction: start, summary pricing the span, the checkpoint replacing it (citing it), end",
			log: tr().ev("assistant/message", answer("a1", `[{"type":"text","text":"done"}]`, "")).ev("compaction/start", `{"compactionId":"k1","turn":1}`).
				ev("compaction/summary", `{"compactionId":"k1","summary":[{"type":"text","text":"The user listed files."}],"shadowedRange":{"start":4,"end":6},"shadowedSeqs":[4,6],"shadowedTokenCount":80,"provider":"deepseek","model":"deepseek-chat"}`).
				ev("user/message", `{"content":[{"type":"text","text":"The user listed files."}],"source":{"kind":"compact-checkpoint","compactionId":"k1"},"role":"user","id":"k"}`, `,"sourceEventSeqs":[4,6],"surfaceOp":{"op":"replace","startSeq":4,"endSeq":6}`).
				ev("compaction/end", `{"compactionId":"k1","turn":1}`).ev("step/end", ts11).ev("turn/end", `{"turn":1,"reason":{"kind":"completed"}}`)},
		{name: "valid-interrupted", what: "a turn closed as CloseTurn closes it: the partial answer (interrupted), an error result for the call, the ends",
			log: tr().ev("assistant/message", callAnswer("a1", "c1")).
				ev("assistant/message", answer("interrupted-answer-9", `[{"type":"text","text":"Partial"}]`, `,"interrupted":true`)).
				ev("tool/result", `{"turn":1,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"c1"},"toolCallId":"c1","content":[{"type":"text","text":"The tool call was interrupted before it started."}],"isError":true,"id":"interrupted-tool-result-c1-8"},"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}}`, `,"sourceEventSeqs":[6]`).
				ev("step/end", ts11).ev("turn/end", `{"turn":1,"reason":{"kind":"interrupted"}}`)},
		{name: "valid-developer", what: "a developer message adding a tool defined in the request header it names",
			log: tr().ev("developer/message", `{"turn":1,"step":1,"message":{"source":{"kind":"tool-registry"},"content":[{"type":"tool-addition","toolName":"bash"}],"role":"developer","id":"d1"},"headerSeq":5}`)},
		{name: "valid-seeded", what: "a fork: inherited history (exempt from the path), its marker, the fork's own turn",
			log: (&vlog{header: strings.Replace(hdr(4), `"isSeeded":false`, `"isSeeded":true`, 1)}).ev("user/message", user("u0", "earlier")).
				ev("assistant/message", answer("a0", `[{"type":"text","text":"earlier answer"}]`, "")).ev("session/end-seed", `{"inherited":true}`).
				ev("turn/start", `{"turn":1}`).ev("turn/end", `{"turn":1,"reason":{"kind":"completed"}}`)},
		{name: "valid-ignorable", what: "an unknown type marked ignorable: kept as an opaque record", log: stepOnly().ev("x/custom", `{"v":1}`, `,"ignorable":true`)},
		{name: "valid-conversation", what: "a conversation log",
			log: (&vlog{header: convHdr}).ev("conversation/created", `{"cwd":"/w","agents":["coder"],"models":["m"]}`).ev("session/started", `{"sessionId":"v","agent":"coder","model":"m"}`).
				ev("turn/started", `{"sessionId":"v","turn":1}`).ev("conversation/title", `{"title":"List the files"}`).ev("turn/ended", `{"sessionId":"v","turn":1,"outcome":"completed"}`)},

		// The header.
		{name: "header-not-json", what: "a header line that is not JSON", log: &vlog{header: `{"type":"session",`}, line: 1, rule: "header"},
		{name: "header-bom", what: "a log starting with a UTF-8 byte order mark", log: &vlog{header: "\uFEFF" + hdr(4)}, line: 1, rule: "header"},
		{name: "header-unknown-member", what: "a header member no version defines", log: &vlog{header: strings.Replace(hdr(4), `"cwd"`, `"mode":"x","cwd"`, 1)}, line: 1, rule: "header"},
		{name: "header-no-isseeded", what: "a version 4 header without isSeeded", log: &vlog{header: strings.Replace(hdr(4), `"isSeeded":false,`, "", 1)}, line: 1, rule: "header"},
		{name: "header-version-mismatch", what: "a file named v4 whose header says v3", log: &vlog{header: hdr(3)}, line: 1, rule: "header"},
		{name: "header-newer", what: "a log of a newer version than this reader reads", version: 5, log: &vlog{header: strings.Replace(hdr(4), `"version":4`, `"version":5`, 1)}, line: 1, rule: "header"},
		{name: "header-seeded-without-marker", what: "a seeded header and no inherited session/end-seed", log: (&vlog{header: strings.Replace(hdr(4), `"isSeeded":false`, `"isSeeded":true`, 1)}).ev("user/message", user("u0", "x")), line: 1, rule: "history"},

		// Event lines.
		{name: "envelope-not-json", what: "an event line that is not JSON", log: stepOnly().wrong().raw(`{"type":"step/end","seq":2,`), rule: "envelope"},
		{name: "envelope-seq-gap", what: "a seq gap", log: stepOnly().wrong().raw(`{"type":"step/end","seq":3,"time":1,"data":{"turn":1,"step":1}}`), rule: "envelope"},
		{name: "envelope-unexpected-member", what: "an envelope member the format does not have", log: stepOnly().wrong().ev("step/end", ts11, `,"note":"x"`), rule: "envelope"},
		{name: "envelope-unknown-type", what: "an unknown type not marked ignorable", log: stepOnly().wrong().ev("x/custom", `{}`), rule: "envelope"},
		{name: "envelope-ignorable-false", what: "ignorable other than true", log: stepOnly().wrong().ev("x/custom", `{}`, `,"ignorable":false`), rule: "envelope"},
		{name: "envelope-surface-without-op", what: "a surface event without surfaceOp", log: stepOnly().wrong().raw(`{"type":"user/message","seq":2,"time":1,"data":` + user("u1", "x") + `}`), rule: "envelope"},
		{name: "envelope-log-only-with-op", what: "a log-only event with surfaceOp", log: stepOnly().wrong().ev("step/end", ts11, `,"surfaceOp":"append"`), rule: "envelope"},
		{name: "envelope-answer-citing", what: "an assistant/message with sourceEventSeqs", log: stepOnly().wrong().ev("assistant/message", answer("a1", "[]", ""), `,"sourceEventSeqs":[1]`), rule: "envelope"},
		{name: "envelope-time-fraction", what: "a time that is not a safe integer", log: stepOnly().wrong().raw(`{"type":"step/end","seq":2,"time":1.5,"data":{"turn":1,"step":1}}`), rule: "envelope"},
		{name: "envelope-duplicate-member", what: "a member twice in one object", log: stepOnly().wrong().raw(`{"type":"step/end","seq":2,"time":1,"data":{"turn":1,"turn":1,"step":1}}`), rule: "envelope"},
		{name: "envelope-cites-later", what: "sourceEventSeqs citing a later event", log: stepOnly().wrong().ev("user/message", user("u1", "x"), `,"sourceEventSeqs":[5]`), rule: "envelope"},

		// Payload schemas.
		{name: "payload-content-string", what: "a message whose content is a string", log: stepOnly().wrong().ev("user/message", `{"content":"hi","source":{"kind":"user"},"role":"user","id":"u1"}`), rule: "payload"},
		{name: "payload-stream-garbage", what: `stream: "garbage"`, log: stepOnly().wrong().ev("assistant/message", strings.Replace(answer("a1", "[]", ""), `"stream":[]`, `"stream":"garbage"`, 1)), rule: "payload"},
		{name: "payload-usage-42", what: "usage: 42", log: stepOnly().wrong().ev("assistant/message", answer("a1", "[]", `,"usage":42`)), rule: "payload"},
		{name: "payload-compaction-end-42", what: "compaction/end whose data is 42", log: stepOnly().wrong().ev("compaction/end", `42`), rule: "payload"},
		{name: "payload-stream-gaps", what: "a text-chunks record whose dt does not hold one gap fewer than its texts", log: stepOnly().wrong().ev("assistant/attempt", `{"turn":1,"step":1,"stream":[{"type":"text-chunks","time0":1,"index":0,"dt":[1,2],"texts":["a","b"]}]}`), rule: "payload"},
		{name: "payload-stream-record-member", what: "a stream record with a member it does not have", log: stepOnly().wrong().ev("assistant/attempt", `{"turn":1,"step":1,"stream":[{"type":"text-chunks","time0":1,"index":0,"dt":[],"texts":["a"],"seq":4}]}`), rule: "payload"},
		{name: "payload-stream-chunk-type", what: "a chunk of no stream chunk type", log: stepOnly().wrong().ev("assistant/attempt", `{"turn":1,"step":1,"stream":[{"type":"chunk","time":1,"chunk":{"type":"error","error":{"message":"x"}}}]}`), rule: "payload"},
		{name: "payload-tool-call-block", what: "a tool-call block without its id", log: stepOnly().wrong().ev("assistant/message", answer("a1", `[{"type":"tool-call","name":"bash","arguments":"{}"}]`, "")), rule: "payload"},
		{name: "payload-image-block", what: "an image block without its attachment", log: stepOnly().wrong().ev("user/message", `{"content":[{"type":"image","data":"AAAA"}],"source":{"kind":"user"},"role":"user","id":"u1"}`), rule: "payload"},
		{name: "payload-user-tool-result-block", what: "a tool-result block in a user message (retired in v4)", log: stepOnly().wrong().ev("user/message", `{"content":[{"type":"tool-result","toolCallId":"c1","content":[]}],"source":{"kind":"user"},"role":"user","id":"u1"}`), rule: "payload"},
		{name: "payload-header-system", what: "request/header with header.system (retired)", log: stepOnly().wrong().ev("request/header", `{"header":{"config":{"provider":"p","model":"m"},"system":""},"reason":"initial"}`), rule: "payload"},
		{name: "payload-defer-loading-false", what: "a request tool with deferLoading false", log: stepOnly().wrong().ev("request/header", `{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"t","deferLoading":false}]},"reason":"initial"}`), rule: "payload"},
		{name: "payload-request-reason", what: "a request reason outside initial, resume, change, series", log: stepOnly().wrong().ev("request/header", `{"header":{"config":{"provider":"p","model":"m"}},"reason":"retry"}`), rule: "payload"},
		{name: "payload-request-model", what: "a request config without its model", log: stepOnly().wrong().ev("request/header", `{"header":{"config":{"provider":"p"}},"reason":"initial"}`), rule: "payload"},
		{name: "payload-error-not-is-error", what: "data.error on a tool result whose isError is false",
			log: stepOnly().ev("assistant/message", callAnswer("a1", "c1")).wrong().ev("tool/result", result("r1", "c1", `,"error":{"name":"E","code":"X"}`)), rule: "payload"},
		{name: "payload-turn-end-reason", what: "a turn/end reason kind outside the vocabulary", log: (&vlog{header: hdr(4)}).ev("turn/start", `{"turn":1}`).wrong().ev("turn/end", `{"turn":1,"reason":{"kind":"bored"}}`), rule: "payload"},
		{name: "payload-failed-turn", what: "a failed turn without its failure", log: (&vlog{header: hdr(4)}).ev("turn/start", `{"turn":1}`).wrong().ev("turn/end", `{"turn":1,"reason":{"kind":"error"}}`), rule: "payload"},
		{name: "payload-retry-shape", what: "an llm/retry of another shape than the reference's", log: stepOnly().wrong().ev("llm/retry", `{"turn":1,"step":1,"retryId":"r","attempt":1,"delayMs":1000,"error":{}}`), rule: "payload"},
		{name: "payload-compaction-shape", what: "a compaction/summary without its span (an older runtime's shape)", log: stepOnly().ev("compaction/start", `{"compactionId":"k","turn":1}`).wrong().ev("compaction/summary", `{"compactionId":"k","summary":[{"type":"text","text":"s"}]}`), rule: "payload"},
		{name: "payload-title-lines", what: "a conversation title of two lines", log: (&vlog{header: convHdr}).ev("conversation/created", `{"cwd":"/w","agents":[],"models":[]}`).wrong().ev("conversation/renamed", `{"title":"one\ntwo"}`), rule: "payload"},

		// Stored messages.
		{name: "message-no-id", what: "a stored message without an id", log: stepOnly().wrong().ev("user/message", `{"content":[],"source":{"kind":"user"},"role":"user"}`), rule: "message"},
		{name: "message-plugin-source", what: "a source of kind plugin", log: stepOnly().wrong().ev("user/message", `{"content":[],"source":{"kind":"plugin","plugin":"p"},"role":"user","id":"u1"}`), rule: "message"},
		{name: "message-answer-tool-source", what: "a model answer whose source kind is tool", log: stepOnly().wrong().ev("assistant/message", `{"turn":1,"step":1,"message":{"role":"assistant","content":[],"source":{"kind":"tool","callId":"c"},"id":"a1"},"stream":[]}`), rule: "message"},
		{name: "message-user-model-source", what: "a user message whose source kind is model", log: stepOnly().wrong().ev("user/message", `{"content":[],"source":{"kind":"model","provider":"p","model":"m"},"role":"user","id":"u1"}`), rule: "message"},
		{name: "message-system-source", what: "a system prompt whose source is not system-prompt", log: stepOnly().wrong().ev("system/message", strings.Replace(sysMsg, `"system-prompt"`, `"runtime-context"`, 1)), rule: "message"},
		{name: "message-duplicate-id", what: "two different messages with one id", log: stepOnly().ev("user/message", user("u1", "one")).wrong().ev("user/message", user("u1", "two")), rule: "message"},
		{name: "valid-queued-claimed", what: "a queued prompt repeated when claimed (the same message, one id)", log: tr()},
		{name: "message-fork-wrapper", what: "a fork of the runtime's V4 that keeps V3 user-role tool-result wrappers",
			log: stepOnly().ev("assistant/message", callAnswer("a1", "c1")).ev("tool/call", toolCall("c1")).wrong().
				ev("tool/result", `{"turn":1,"step":1,"message":{"role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"a.go"}]}],"source":{"kind":"tool","callId":"c1"},"id":"r1"}}`, `,"sourceEventSeqs":[3]`), rule: "message"},

		// Types of the other kind of log.
		{name: "wrong-log-turn-ended", what: "turn/ended (a conversation log's) in a session log", log: stepOnly().wrong().ev("turn/ended", `{"sessionId":"v","turn":1,"outcome":"completed"}`), rule: "wrong-log"},
		{name: "wrong-log-created", what: "conversation/created in a session log", log: (&vlog{header: hdr(4)}).wrong().ev("conversation/created", `{"cwd":"/w","agents":[],"models":[]}`), rule: "wrong-log"},
		{name: "wrong-log-session-started", what: "session/started in a session log", log: (&vlog{header: hdr(4)}).wrong().ev("session/started", `{"sessionId":"v","agent":"a","model":"m"}`), rule: "wrong-log"},
		{name: "wrong-log-turn-start", what: "turn/start (a session log's) in a conversation log", log: (&vlog{header: convHdr}).wrong().ev("turn/start", `{"turn":1}`), rule: "wrong-log"},

		// The turn's path.
		{name: "path-step-outside-turn", what: "a step outside a turn", log: (&vlog{header: hdr(4)}).wrong().ev("step/start", ts11), rule: "turn-path"},
		{name: "path-request-outside-step", what: "a request outside a step", log: (&vlog{header: hdr(4)}).ev("turn/start", `{"turn":1}`).wrong().ev("request/header", header1), rule: "turn-path"},
		{name: "path-turn-skipped", what: "turn 3 after turn 1", log: (&vlog{header: hdr(4)}).ev("turn/start", `{"turn":1}`).ev("turn/end", `{"turn":1,"reason":{"kind":"completed"}}`).wrong().ev("turn/start", `{"turn":3}`), rule: "turn-path"},
		{name: "path-restart", what: "a turn starting while one is open (version 4 never runs the upgrade's restart repair)",
			log: (&vlog{header: hdr(4)}).ev("turn/start", `{"turn":1}`).ev("agent/inbox/spliced", `{"target":"next-turn","start":0,"inserted":[`+user("u2", "next")+`]}`).wrong().ev("turn/start", `{"turn":2}`), rule: "turn-path"},
		{name: "path-unresolved-call", what: "a step ending before its tool call's result", log: stepOnly().ev("assistant/message", callAnswer("a1", "c1")).wrong().ev("step/end", ts11), rule: "turn-path"},
		{name: "path-call-not-advertised", what: "a tool/call no answer asked for", log: stepOnly().wrong().ev("tool/call", toolCall("c9")), rule: "turn-path"},
		{name: "path-call-mismatch", what: "a tool/call whose arguments are not its answer's", log: stepOnly().ev("assistant/message", callAnswer("a1", "c1")).wrong().ev("tool/call", strings.Replace(toolCall("c1"), "ls", "rm", 1)), rule: "turn-path"},
		{name: "path-result-without-call", what: "a tool result for a call nothing made", log: stepOnly().wrong().ev("tool/result", result("r1", "c9", "")), rule: "turn-path"},

		// The history.
		{name: "history-replace-nothing", what: "a replacement of a span not on the current history",
			log: stepOnly().ev("user/message", user("u1", "x")).wrong().ev("user/message", user("k", "y"), `,"sourceEventSeqs":[0],"surfaceOp":{"op":"replace","startSeq":0,"endSeq":0}`), rule: "history"},
		{name: "history-replace-uncited", what: "a replacement not citing what it replaces", log: stepOnly().ev("user/message", user("u1", "x")).wrong().ev("user/message", user("k", "y"), `,"surfaceOp":{"op":"replace","startSeq":2,"endSeq":2}`), rule: "history"},
		{name: "history-late-system", what: "a system prompt appended after other messages", log: stepOnly().ev("user/message", user("u1", "x")).wrong().ev("system/message", sysMsg), rule: "history"},
		{name: "history-wrong-role", what: "a user/message carrying an assistant message", log: stepOnly().wrong().ev("user/message", `{"content":[],"source":{"kind":"user"},"role":"assistant","id":"u1"}`), rule: "history"},

		// Relationships.
		{name: "relationship-compaction-overlap", what: "a compaction starting while one is open", log: stepOnly().ev("compaction/start", `{"compactionId":"k1","turn":1}`).wrong().ev("compaction/start", `{"compactionId":"k2","turn":1}`), rule: "relationship"},
		{name: "relationship-compaction-no-summary", what: "a successful compaction/end without its summary", log: stepOnly().ev("compaction/start", `{"compactionId":"k1","turn":1}`).wrong().ev("compaction/end", `{"compactionId":"k1","turn":1}`), rule: "relationship"},
		{name: "relationship-compaction-span", what: "a summary whose shadowedSeqs are not the span's nodes",
			log: stepOnly().ev("user/message", user("u1", "x")).ev("user/message", user("u2", "y")).ev("compaction/start", `{"compactionId":"k1","turn":1}`).wrong().
				ev("compaction/summary", `{"compactionId":"k1","summary":[],"shadowedRange":{"start":2,"end":3},"shadowedSeqs":[2],"shadowedTokenCount":1,"provider":"p","model":"m"}`), rule: "relationship"},
		{name: "relationship-checkpoint-outside", what: "a checkpoint replacing history outside a compaction",
			log: stepOnly().ev("user/message", user("u1", "x")).wrong().ev("user/message", `{"content":[],"source":{"kind":"compact-checkpoint","compactionId":"k1"},"role":"user","id":"k"}`, `,"sourceEventSeqs":[2],"surfaceOp":{"op":"replace","startSeq":2,"endSeq":2}`), rule: "relationship"},
		{name: "relationship-retry-provider", what: "a retry of another provider than the request's",
			log: tr().wrong().ev("llm/retry", `{"mode":"normal","turn":1,"step":1,"provider":"other","policyKey":"k","retryId":"r1","retry":1,"delayMs":1,"maxRetries":3,"failure":{"code":"E","message":"m"}}`), rule: "relationship"},
		{name: "relationship-retry-sequence", what: "a retry chain starting at 2",
			log: tr().wrong().ev("llm/retry", `{"mode":"normal","turn":1,"step":1,"provider":"deepseek","policyKey":"k","retryId":"r1","retry":2,"delayMs":1,"maxRetries":3,"failure":{"code":"E","message":"m"}}`), rule: "relationship"},
		{name: "relationship-retry-started", what: "llm/retry-started pairing no scheduled retry", log: stepOnly().wrong().ev("llm/retry-started", `{"turn":1,"step":1,"retryId":"r1","retry":1}`), rule: "relationship"},
		{name: "relationship-developer-header", what: "a developer message adding a tool without headerSeq",
			log: tr().wrong().ev("developer/message", `{"turn":1,"step":1,"message":{"source":{"kind":"tool-registry"},"content":[{"type":"tool-addition","toolName":"bash"}],"role":"developer","id":"d1"}}`), rule: "relationship"},
		{name: "relationship-developer-tool", what: "a developer message adding a tool its header does not define",
			log: tr().wrong().ev("developer/message", `{"turn":1,"step":1,"message":{"source":{"kind":"tool-registry"},"content":[{"type":"tool-addition","toolName":"edit"}],"role":"developer","id":"d1"},"headerSeq":5}`), rule: "relationship"},
		{name: "relationship-title", what: "a title citing a message that is not the user's", log: stepOnly().ev("request/header", header1).wrong().ev("session/title", `{"title":"t","messageSeqs":[2],"source":{"kind":"fallback"}}`), rule: "relationship"},
		{name: "relationship-command", what: "command/done without its command/run", log: (&vlog{header: hdr(4)}).wrong().ev("command/done", `{"commandId":"k","kind":"success"}`), rule: "relationship"},
		{name: "relationship-catalog", what: "a child in the subagent catalog twice",
			log: (&vlog{header: hdr(4)}).ev("subagent/catalog", `{"version":0,"childId":"k","childCreatedAt":1,"mode":"one-shot"}`).wrong().ev("subagent/catalog", `{"version":0,"childId":"k","childCreatedAt":1,"mode":"one-shot"}`), rule: "relationship"},
		{name: "relationship-delivery", what: "a version 4 delivery marker naming another session",
			log: stepOnly().wrong().ev("session-log-deepseek/delivery-accepted", `{"sessionId":"other","throughSeq":1,"sessionFormatVersion":4}`), rule: "relationship"},
		{name: "relationship-ptc", what: "a PTC dispatch without its start",
			log: stepOnly().wrong().ev("tool/ptc-dispatch", `{"rootCallId":"r","parentCallId":"r","subCallId":"r:ptc:1","name":"n","arguments":{},"isError":false,"content":[]}`), rule: "relationship"},

		// Framing and torn tails (compressed logs).
		{name: "framing-skippable-frame", what: "a skippable zstd frame between frames", files: "zstd", frame: 2, rule: "framing",
			data: func() []byte {
				l := stepOnly()
				skippable := []byte{0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 'n', 'o', 't', 'e'}
				return cat(frame(l.header+"\n"), skippable, frame(strings.Join(l.lines, "\n")+"\n"))
			}},
		{name: "framing-checksum", what: "a frame whose content checksum does not match", files: "zstd", frame: 2, rule: "framing",
			data: func() []byte {
				l := stepOnly()
				f := frame(strings.Join(l.lines, "\n") + "\n")
				f[len(f)-1] ^= 0xFF
				return cat(frame(l.header+"\n"), f)
			}},
		{name: "valid-framing-other", what: "frames cut inside lines (another writer's framing): read all the same", files: "zstd",
			data: func() []byte {
				t := string(stepOnly().text())
				return cat(frame(t[:50]), frame(t[50:170]), frame(t[170:]))
			}},
		{name: "torn-plain", what: "a last line without its newline: a torn tail, tolerated", files: "plain", torn: true,
			data: func() []byte { return append(stepOnly().text(), `{"type":"step/end","seq":2,"ti`...) }},
		{name: "torn-frame", what: "a last frame cut short: its complete lines are read", files: "zstd", torn: true,
			data: func() []byte {
				l := stepOnly().ev("step/end", ts11)
				f := frame(strings.Join(l.lines, "\n") + "\n")
				return cat(frame(l.header+"\n"), f[:len(f)-6])
			}},
		{name: "torn-checksum", what: "a last frame cut in its checksum: every line of it is read", files: "zstd", torn: true,
			data: func() []byte {
				l := stepOnly()
				f := frame(strings.Join(l.lines, "\n") + "\n")
				return cat(frame(l.header+"\n"), f[:len(f)-2])
			}},

		// The upgrade chain.
		{name: "upgrade-valid-v3", what: "a version 3 log whose tool result (a user-role wrapper) the upgrade lifts", version: 3, read: "upgrade",
			log: v3().ev("assistant/message", callAnswer("a1", "c1")).ev("tool/call", toolCall("c1")).
				ev("tool/result", `{"turn":1,"step":1,"message":{"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"a.go"}],"isError":false}],"source":{"kind":"tool","callId":"c1"},"role":"user","id":"r1"}}`, `,"sourceEventSeqs":[4]`).
				ev("step/end", ts11).ev("turn/end", `{"turn":1,"reason":{"kind":"completed"}}`)},
		{name: "upgrade-v3-wrapper", what: "a version 3 tool result without exactly one wrapper of its call", version: 3, read: "upgrade", rule: "upgrade",
			log: v3().ev("assistant/message", callAnswer("a1", "c1")).wrong().ev("tool/result", `{"turn":1,"step":1,"message":{"content":[],"source":{"kind":"tool","callId":"c1"},"role":"user","id":"r1"}}`)},
		{name: "upgrade-v3-defer-loading", what: "a version 3 request tool with deferLoading (only defined in v4)", version: 3, read: "upgrade", rule: "upgrade",
			log: v3().wrong().ev("request/header", `{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"t","deferLoading":true}]},"reason":"series"}`)},
		{name: "upgrade-v3-delivery-v4", what: "a version 3 delivery marker claiming version 4", version: 3, read: "upgrade", rule: "upgrade",
			log: v3().wrong().ev("session-log-deepseek/delivery-accepted", `{"sessionId":"v","throughSeq":1,"sessionFormatVersion":4}`)},
		{name: "upgrade-v3-unknown-type", what: "a version 3 type outside its vocabulary, not ignorable", version: 3, read: "upgrade", rule: "envelope",
			log: v3().wrong().ev("developer/message", `{}`)},
		{name: "upgrade-v1-unknown-ignorable", what: "a version 1 unknown type, refused even when ignorable", version: 1, read: "upgrade", rule: "upgrade",
			log: (&vlog{header: hdr(1)}).ev("turn/start", `{"turn":1}`).wrong().ev("x/custom", `{}`, `,"ignorable":true`)},
		{name: "upgrade-v3-result-refused", what: "a version 3 log whose successor a version 4 reader refuses (a step ends before its call's result)", version: 3, read: "upgrade", rule: "turn-path",
			log: v3().ev("assistant/message", callAnswer("a1", "c1")).wrong().ev("step/end", ts11)},
	}
}

// v3 is the start of a version 3 turn.
func v3() *vlog {
	l := &vlog{header: hdr(3)}
	return l.ev("turn/start", `{"turn":1}`).ev("step/start", ts11).ev("user/message", user("u1", "List the files"))
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

var enc = func() *zstd.Encoder {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
	if err != nil {
		panic(err)
	}
	return e
}()

// frame is one standard zstd frame of text, with its content checksum.
func frame(text string) []byte { return enc.EncodeAll([]byte(text), nil) }

// writeVectors returns every file of the vectors and the manifest.
func writeVectors() (map[string][]byte, Manifest) {
	files := map[string][]byte{}
	m := Manifest{Format: "convkit-log-vectors/1",
		About: "One small log per rule of the convkit log format (docs/FORMAT.md, \"Test vectors\"): read each file as \"read\" says and compare the first problem's line (or frame) and rule with the verdict."}
	for _, d := range vectorDefs() {
		ver := d.version
		if ver == 0 {
			ver = 4
		}
		if d.log != nil && d.log.header == hdr(1) {
			ver = 1
		}
		base := fmt.Sprintf("%s.v%d.jsonl", d.name, ver)
		v := Vector{Name: d.name, What: d.what, Read: d.read, Torn: d.torn, Line: d.line, Frame: d.frame, Rule: d.rule}
		if v.Read == "" {
			v.Read = "log"
		}
		if d.log != nil && d.log.bad > 0 && v.Line == 0 {
			v.Line = int64(d.log.bad)
		}
		v.Valid = v.Rule == ""
		switch {
		case d.data != nil && d.files == "zstd":
			files[base+".zst"] = d.data()
			v.Files = []string{base + ".zst"}
		case d.data != nil:
			files[base] = d.data()
			v.Files = []string{base}
		default:
			text := d.log.text()
			files[base] = text
			// The writer's framing: the header line alone, then the
			// events in one frame.
			events := text[bytes.IndexByte(text, '\n')+1:]
			z := frame(string(text[:bytes.IndexByte(text, '\n')+1]))
			if len(events) > 0 {
				z = cat(z, frame(string(events)))
			}
			files[base+".zst"] = z
			v.Files = []string{base, base + ".zst"}
		}
		m.Vectors = append(m.Vectors, v)
	}
	return files, m
}

// TestVectorsWritten: the committed vectors are what the generator writes
// (the compressed ones compared frame by frame, decoded: another version
// of the zstd library may encode them otherwise).
func TestVectorsWritten(t *testing.T) {
	files, m := writeVectors()
	mj, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	files["manifest.json"] = append(mj, '\n')
	if *updateVectors {
		os.RemoveAll(vectorsDir)
		if err := os.MkdirAll(vectorsDir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(vectorsDir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	ents, err := os.ReadDir(vectorsDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(files) {
		t.Errorf("%s holds %d files, the generator writes %d (-update-vectors rewrites them)", vectorsDir, len(ents), len(files))
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(vectorsDir, name))
		if err != nil {
			t.Errorf("%v (-update-vectors writes it)", err)
			continue
		}
		if strings.HasSuffix(name, ".zst") {
			got, want = decodedFrames(t, got), decodedFrames(t, want)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is not what the generator writes (-update-vectors rewrites it)", name)
		}
	}
}

// decodedFrames is a compressed vector's frames, each decoded (or its
// bytes, when not a frame the decoder reads), one per line.
func decodedFrames(t *testing.T, b []byte) []byte {
	t.Helper()
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.IgnoreChecksum(true))
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	out, err := dec.DecodeAll(b, nil)
	if err != nil {
		return b
	}
	return out
}

// verdict is what reading a vector found.
type verdict struct {
	valid, torn bool
	line, frame int64
	rule        string
	err         error
}

func (v verdict) String() string {
	if v.valid {
		return fmt.Sprintf("valid (torn %v)", v.torn)
	}
	return fmt.Sprintf("line %d frame %d rule %q: %v", v.line, v.frame, v.rule, v.err)
}

// readVector reads a vector file as its manifest says, to its first
// problem.
func readVector(path, read string) verdict {
	fail := func(err error) verdict {
		v := verdict{err: err}
		var ue *upgrade.Error
		var fe *convlog.FormatError
		v.rule, _ = convlog.RuleOf(err)
		switch {
		case errors.As(err, &fe):
			v.line, v.frame = fe.Pos.Line, fe.Pos.Frame
			if fe.Pos.Line > 0 {
				v.frame = 0
			}
		case errors.As(err, &ue):
			v.line = ue.Line
			if v.rule == "" {
				v.rule = "upgrade"
			}
		}
		return v
	}
	ctx := context.Background()
	if read == "upgrade" {
		r, err := upgrade.Open(path, upgrade.Options{})
		if err != nil {
			return fail(err)
		}
		defer r.Close()
		if err := convlog.Admit(ctx, r, r.Header(), convlog.AdmitOptions{}); err != nil {
			return fail(err)
		}
		return verdict{valid: true, torn: r.SourceStats().TornTail}
	}
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		return fail(err)
	}
	defer r.Close()
	if err := convlog.Admit(ctx, r, r.Header(), convlog.AdmitOptions{}); err != nil {
		return fail(err)
	}
	return verdict{valid: true, torn: r.Stats().TornTail}
}

// TestVectors reads every vector and compares its verdict with the
// manifest's; every rule of the format has one.
func TestVectors(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(vectorsDir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	rules := map[string]bool{}
	for _, vec := range m.Vectors {
		rules[vec.Rule] = true
		for _, f := range vec.Files {
			t.Run(f, func(t *testing.T) {
				got := readVector(filepath.Join(vectorsDir, f), vec.Read)
				want := verdict{valid: vec.Valid, torn: vec.Torn, line: vec.Line, frame: vec.Frame, rule: vec.Rule}
				if got.valid != want.valid || got.torn != want.torn || got.line != want.line || got.frame != want.frame || got.rule != want.rule {
					t.Errorf("%s (%s): read %v, want %v", vec.Name, vec.What, got, want)
				}
			})
		}
	}
	var missing []string
	for _, r := range []string{"header", "envelope", "framing", "payload", "wrong-log", "message", "turn-path", "history", "relationship", "upgrade", ""} {
		if !rules[r] {
			missing = append(missing, r)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("no vector of the rules %q", missing)
	}
}

// TestWriterRefusesVectors: the event a vector of a rule beyond one line
// holds, given to convlog's writer after the events before it, is refused
// with that rule before anything is written.
func TestWriterRefusesVectors(t *testing.T) {
	for _, d := range vectorDefs() {
		switch {
		case d.log == nil || d.log.bad < 2 || d.read == "upgrade" || d.version != 0:
			continue
		case d.rule == "header" || d.rule == "envelope" || d.rule == "framing":
			continue
		}
		t.Run(d.name, func(t *testing.T) {
			h, err := convlog.ParseHeader("h", []byte(d.log.header), -1)
			if err != nil {
				t.Fatal(err)
			}
			h.Raw = nil
			evs := make([]convlog.Event, len(d.log.lines))
			for i, l := range d.log.lines {
				evs[i] = eventOf(t, l)
			}
			bad := d.log.bad - 2
			path := filepath.Join(t.TempDir(), "v.v4.jsonl")
			w, err := convlog.Create(path, h, evs[:bad], convlog.WriterOptions{})
			if err != nil {
				t.Fatalf("the events before: %v", err)
			}
			defer w.Close()
			err = w.Append(evs[bad : bad+1])
			var re *convlog.RuleError
			if !errors.As(err, &re) || re.Rule() != d.rule {
				t.Fatalf("Append = %v, want a *RuleError of rule %s", err, d.rule)
			}
		})
	}
}

// eventOf is an event line as the writer takes it.
func eventOf(t *testing.T, line string) convlog.Event {
	t.Helper()
	var raw struct {
		Type            string          `json:"type"`
		Time            int64           `json:"time"`
		Data            json.RawMessage `json:"data"`
		Ignorable       bool            `json:"ignorable"`
		SourceEventSeqs []int64         `json:"sourceEventSeqs"`
		SurfaceOp       json.RawMessage `json:"surfaceOp"`
	}
	if err := json.Unmarshal([]byte(line), &raw); err != nil {
		t.Fatal(err)
	}
	e := convlog.Event{Type: raw.Type, Time: raw.Time, Data: raw.Data, Ignorable: raw.Ignorable, SourceEventSeqs: raw.SourceEventSeqs}
	switch {
	case string(raw.SurfaceOp) == `"append"`:
		e.SurfaceOp = &convlog.SurfaceOp{}
	case raw.SurfaceOp != nil:
		var op struct{ StartSeq, EndSeq int64 }
		json.Unmarshal(raw.SurfaceOp, &op)
		e.SurfaceOp = &convlog.SurfaceOp{Replace: true, StartSeq: op.StartSeq, EndSeq: op.EndSeq}
	}
	return e
}
