package convlog

import (
	"errors"
	"fmt"
	"github.com/convkit/convkit/internal/rawjson"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// misuse is a wrong shape an event can be written in: the events before it
// (valid), the event, and the rule, member and words of its refusal.
type misuse struct {
	name   string
	conv   bool // in a conversation log
	before []Event
	bad    Event
	kind   error
	member string
	want   string
}

func withStep(evs ...Event) []Event {
	return append([]Event{ev("turn/start", `{"turn":1}`), ev("step/start", `{"turn":1,"step":1}`)}, evs...)
}

func answerData(content, rest string) string {
	return `{"turn":1,"step":1,"message":{"role":"assistant","content":` + content + `,"source":{"kind":"model","provider":"p","model":"m"},"id":"a1"}` + rest + `}`
}

var reqHeader = ev("request/header", `{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"add","description":"d","parameters":{}}]},"reason":"initial"}`)

// misuses are the wrong shapes the writer refuses and a reader reports.
func misuses() []misuse {
	user := ev(TypeUserMessage, string(userMsg("u1", "hi")))
	return []misuse{
		{name: "content as a string", bad: ev(TypeUserMessage, `{"role":"user","content":"hi","source":{"kind":"user"},"id":"u1"}`),
			kind: ErrPayload, member: "data.content", want: "must be an array of content blocks, not a string"},
		{name: "an image block without its attachment", bad: ev(TypeUserMessage, `{"role":"user","content":[{"type":"image"}],"source":{"kind":"user"},"id":"u1"}`),
			kind: ErrPayload, member: "data.content[0].attachment", want: "is missing (an image block needs it)"},
		{name: "a file block without its attachment", bad: ev(TypeUserMessage, `{"role":"user","content":[{"type":"file"}],"source":{"kind":"user"},"id":"u1"}`),
			kind: ErrPayload, member: "data.content[0].attachment", want: "is missing (a file block needs it)"},
		{name: "tool-call arguments not a string", before: withStep(), bad: ev(TypeAssistantMessage, answerData(`[{"type":"tool-call","id":"c","name":"n","arguments":null}]`, `,"stream":[]`)),
			kind: ErrPayload, member: "data.message.content[0].arguments", want: "must be a string (the arguments' JSON text), not null"},
		{name: "two messages, one id", before: []Event{user}, bad: ev(TypeUserMessage, string(userMsg("u1", "other"))),
			kind: ErrMessageIdentity, member: "data.id", want: `message id "u1" is already the id of the message at seq 0`},
		{name: "a queued message claimed differently", before: []Event{ev("agent/inbox/spliced", `{"target":"next-turn","start":0,"inserted":[`+string(userMsg("u1", "hi"))+`]}`)},
			bad: ev(TypeUserMessage, string(userMsg("u1", "changed"))), kind: ErrMessageIdentity, member: "data.id", want: "a queued message is claimed unchanged"},
		{name: "turn/ended in a session log", bad: ev("turn/ended", `{"sessionId":"s","turn":1,"outcome":"completed"}`),
			kind: ErrWrongLog, want: "a conversation log's event type in a session log"},
		{name: "conversation/created in a session log", bad: ev("conversation/created", `{"cwd":"/p","agents":[],"models":[]}`),
			kind: ErrWrongLog, want: "conversation log's event type"},
		{name: "session/started in a session log", bad: ev("session/started", `{"sessionId":"s","agent":"a","model":"m"}`),
			kind: ErrWrongLog, want: "conversation log's event type"},
		{name: "turn/start in a conversation log", conv: true, bad: ev("turn/start", `{"turn":1}`),
			kind: ErrWrongLog, want: "a session log's event type in a conversation log"},
		{name: "a model answer whose source is a tool", before: withStep(),
			bad:  ev(TypeAssistantMessage, `{"turn":1,"step":1,"message":{"role":"assistant","content":[],"source":{"kind":"tool","callId":"c"},"id":"a1"},"stream":[]}`),
			kind: ErrMessageIdentity, member: "data.message.source.kind", want: `must be one of "model", not "tool"`},
		{name: "a user message whose source is the model", bad: ev(TypeUserMessage, `{"role":"user","content":[],"source":{"kind":"model","provider":"p","model":"m"},"id":"u1"}`),
			kind: ErrMessageIdentity, member: "data.source.kind", want: `"model" is the kind of a model's (assistant) message`},
		{name: `stream "garbage"`, before: withStep(), bad: ev(TypeAssistantMessage, answerData("[]", `,"stream":"garbage"`)),
			kind: ErrPayload, member: "data.stream", want: "must be an array of stream records, not a string"},
		{name: "usage 42", before: withStep(), bad: ev(TypeAssistantMessage, answerData("[]", `,"stream":[],"usage":42`)),
			kind: ErrPayload, member: "data.usage", want: "must be an object, not a number 42"},
		{name: "compaction/end data 42", bad: ev("compaction/end", `42`), kind: ErrPayload, member: "data", want: "must be an object, not a number 42"},
		{name: "a stream record of another shape", before: withStep(),
			bad:  ev(TypeAssistantMessage, answerData("[]", `,"stream":[{"type":"text-chunks","time0":1,"index":0,"dt":[1,2],"texts":["a","b"]}]`)),
			kind: ErrPayload, member: "data.stream[0].dt", want: "holds 2 time gaps for 2 texts"},
		{name: "a stream chunk of no chunk type", before: withStep(),
			bad:  ev("assistant/attempt", `{"turn":1,"step":1,"stream":[{"type":"chunk","time":1,"chunk":{"type":"error","error":{}}}]}`),
			kind: ErrPayload, member: "data.stream[0].chunk.type", want: `"error" is not a stream chunk type`},
		{name: "a stream record with another member", before: withStep(),
			bad:  ev("assistant/attempt", `{"turn":1,"step":1,"stream":[{"type":"chunk","time":1,"chunk":{"type":"usage","usage":{"inputTokens":1,"outputTokens":1}},"seq":3}]}`),
			kind: ErrPayload, member: "data.stream[0].seq", want: "is not a member of a chunk record"},
		{name: "a tool-call block without its id", before: withStep(),
			bad:  ev(TypeAssistantMessage, answerData(`[{"type":"tool-call","name":"bash","arguments":"{}"}]`, `,"stream":[]`)),
			kind: ErrPayload, member: "data.message.content[0].id", want: "must be a non-empty string"},
		{name: "an image without its attachment", bad: ev(TypeUserMessage, `{"role":"user","content":[{"type":"image","data":"AAAA"}],"source":{"kind":"user"},"id":"u1"}`),
			kind: ErrPayload, member: "data.content[0].attachment", want: "is missing"},
		{name: "a tool-result wrapper in a user message", bad: ev(TypeUserMessage, `{"role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]}],"source":{"kind":"user"},"id":"u1"}`),
			kind: ErrPayload, member: "data.content[0].type", want: "a tool-result wrapper, retired in format v4"},
		{name: "request/header with header.system", before: withStep(), bad: ev("request/header", `{"header":{"config":{"provider":"p","model":"m"},"system":""},"reason":"initial"}`),
			kind: ErrPayload, member: "data.header.system", want: "is retired in format v4"},
		{name: "a tool definition with deferLoading false", before: withStep(),
			bad:  ev("request/header", `{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"t","deferLoading":false}]},"reason":"initial"}`),
			kind: ErrPayload, member: "data.header.tools[0].deferLoading", want: "must be exactly true (or absent)"},
		{name: "a request reason of another name", before: withStep(), bad: ev("request/header", `{"header":{"config":{"provider":"p","model":"m"}},"reason":"retry"}`),
			kind: ErrPayload, member: "data.reason", want: `must be one of "initial", "resume", "change", "series"`},
		{name: "a request without its model", before: withStep(), bad: ev("request/header", `{"header":{"config":{"provider":"p"}},"reason":"initial"}`),
			kind: ErrPayload, member: "data.header.config.model", want: "is missing"},
		// A header that repeats the one admitted before is not checked
		// again; the rest of its data is.
		{name: "a repeated header with a reason of another name", before: withStep(reqHeader, ev("step/end", `{"turn":1,"step":1}`), ev("step/start", `{"turn":1,"step":2}`)),
			bad:  ev("request/header", strings.Replace(string(reqHeader.Data), `"initial"`, `"retry"`, 1)),
			kind: ErrPayload, member: "data.reason", want: `must be one of "initial", "resume", "change", "series"`},
		{name: "a repeated header that starts no series", before: withStep(reqHeader),
			bad:  ev("request/header", strings.Replace(string(reqHeader.Data), `"initial"`, `"series","startsSeries":false`, 1)),
			kind: ErrPayload, member: "data.startsSeries", want: "must be exactly true"},
		{name: "a header that changes after one admitted", before: withStep(reqHeader, ev("step/end", `{"turn":1,"step":1}`), ev("step/start", `{"turn":1,"step":2}`)),
			bad:  ev("request/header", strings.Replace(string(reqHeader.Data), `"model":"m"`, `"model":""`, 1)),
			kind: ErrPayload, member: "data.header.config.model", want: "must be a non-empty string"},
		{name: "error metadata on a result that is not an error", before: withStep(answerWithCall(1, 1, "a1", "c1")),
			bad:  ev(TypeToolResult, `{"turn":1,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"c1"},"toolCallId":"c1","content":[],"isError":false,"id":"r1"},"error":{"name":"E","code":"X"}}`),
			kind: ErrPayload, want: "carries error metadata (data.error) but is not an error"},
		{name: "a failed turn without its failure", before: []Event{ev("turn/start", `{"turn":1}`)}, bad: ev(TypeTurnEnd, `{"turn":1,"reason":{"kind":"error"}}`),
			kind: ErrPayload, member: "data.reason.error", want: `is missing (kind "error" requires it)`},
		{name: "an aborted turn without its cause", before: []Event{ev("turn/start", `{"turn":1}`)}, bad: ev(TypeTurnEnd, `{"turn":1,"reason":{"kind":"aborted"}}`),
			kind: ErrPayload, member: "data.reason.reason", want: `is missing (kind "aborted" requires it)`},
		{name: "a normal retry without its limit", before: withStep(),
			bad:  ev("llm/retry", `{"mode":"normal","turn":1,"step":1,"provider":"p","policyKey":"k","retryId":"r","retry":1,"delayMs":5,"failure":{"code":"c","message":"m"}}`),
			kind: ErrPayload, member: "data.maxRetries", want: `is missing (mode "normal" requires it)`},
		{name: "a failed stream without its failure", before: withStep(),
			bad:  ev("assistant/attempt", `{"turn":1,"step":1,"stream":[{"type":"chunk","time":1,"chunk":{"type":"finish","reason":{"kind":"aborted"}}}]}`),
			kind: ErrPayload, member: "data.stream[0].chunk.reason.failure", want: `is missing (kind "aborted" requires it)`},
		{name: "a provider's title without the provider", bad: ev("session/title", `{"title":"t","messageSeqs":[1],"source":{"kind":"provider"}}`),
			kind: ErrPayload, member: "data.source.provider", want: `is missing (kind "provider" requires it)`},
		{name: "a streamed summary without its raw output",
			bad:  ev("compaction/summary", `{"compactionId":"c","summary":[],"shadowedRange":{"start":0,"end":0},"shadowedSeqs":[0],"shadowedTokenCount":1,"provider":"p","model":"m","llmStreamCall":true}`),
			kind: ErrPayload, member: "data.rawOutput", want: "is missing (llmStreamCall requires it)"},
		{name: "an llm/retry of another shape", before: withStep(), bad: ev("llm/retry", `{"turn":1,"step":1,"retryId":"r","attempt":1,"delayMs":1000,"error":{}}`),
			kind: ErrPayload, member: "data.mode", want: "is missing"},
		{name: "a title of two lines", conv: true, bad: ev("conversation/renamed", `{"title":"one\ntwo"}`),
			kind: ErrPayload, member: "data.title", want: "must be one line"},
		{name: "a tool-role result of the v3 shape", before: withStep(answerWithCall(1, 1, "a1", "c1")),
			bad:  ev(TypeToolResult, `{"turn":1,"step":1,"message":{"role":"user","source":{"kind":"tool","callId":"c1"},"content":[{"type":"tool-result","toolCallId":"c1","content":[]}],"id":"r1"}}`),
			kind: ErrMessageIdentity, want: "needs a toolCallId equal to its source's callId"},
	}
}

func convHeader() *Header {
	return &Header{Type: ConversationLog, Version: CurrentVersion, ID: "c", CreatedAt: 1790000000000}
}

// TestWriterRefusesMisuse: each wrong shape is refused by the writer with
// a *RuleError naming the event, the member and the rule, before anything
// is written; written raw, a reader's Validator reports it at its line.
func TestWriterRefusesMisuse(t *testing.T) {
	for _, c := range misuses() {
		t.Run(c.name, func(t *testing.T) {
			h := testHeader("s1")
			if c.conv {
				h = convHeader()
			}
			path := filepath.Join(t.TempDir(), FileName("s1", CurrentVersion, Plain))
			w, err := Create(path, h, c.before, WriterOptions{})
			if err != nil {
				t.Fatalf("the events before: %v", err)
			}
			defer w.Close()
			before := mustRead(t, path)
			err = w.Append([]Event{c.bad})
			var re *RuleError
			if !errors.As(err, &re) || !errors.Is(err, c.kind) || re.Member != c.member || re.Type != c.bad.Type ||
				re.Seq != int64(len(c.before)) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Append = %v (member %q), want a *RuleError %v at %s seq %d, member %q, saying %q",
					err, ruleMember(re), c.kind, c.bad.Type, len(c.before), c.member, c.want)
			}
			if re.Rule() != (&RuleError{Kind: c.kind}).Rule() {
				t.Errorf("rule %q, want %q", re.Rule(), (&RuleError{Kind: c.kind}).Rule())
			}
			if string(mustRead(t, path)) != string(before) {
				t.Fatal("a refused event changed the file")
			}
			got := ruleProblems(t, h, append(append([]Event(nil), c.before...), c.bad))
			bad := int64(len(c.before))
			if len(got) != 1 || got[bad] == nil || !errors.Is(got[bad], c.kind) || !strings.Contains(got[bad].Error(), c.want) ||
				!strings.Contains(got[bad].Error(), fmt.Sprintf("line %d, byte ", bad+2)) {
				t.Fatalf("read back: %v", got)
			}
		})
	}
}

func ruleMember(re *RuleError) string {
	if re == nil {
		return ""
	}
	return re.Member
}

// TestRelationships: one case per relationship of a version 4 log, and per
// rule of the turn's path version 4 adds: each refused at its event, the
// valid form of each accepted.
func TestRelationships(t *testing.T) {
	ts := `{"turn":1,"step":1}`
	start, sstart := ev("turn/start", `{"turn":1}`), ev("step/start", ts)
	user := ev(TypeUserMessage, string(userMsg("u1", "hi")))
	summary := func(id string, start, end int64, seqs string) Event {
		return ev("compaction/summary", fmt.Sprintf(`{"compactionId":%q,"summary":[{"type":"text","text":"s"}],"shadowedRange":{"start":%d,"end":%d},"shadowedSeqs":%s,"shadowedTokenCount":9,"provider":"p","model":"m"}`, id, start, end, seqs))
	}
	checkpoint := func(id string, start, end int64, cites ...int64) Event {
		e := ev(TypeUserMessage, fmt.Sprintf(`{"content":[{"type":"text","text":"s"}],"source":{"kind":"compact-checkpoint","compactionId":%q},"role":"user","id":"k"}`, id))
		e.SurfaceOp, e.SourceEventSeqs = &SurfaceOp{Replace: true, StartSeq: start, EndSeq: end}, cites
		return e
	}
	retry := func(provider string, n int) Event {
		return ev("llm/retry", fmt.Sprintf(`{"mode":"normal","turn":1,"step":1,"provider":%q,"policyKey":"k","retryId":"r1","retry":%d,"delayMs":1000,"maxRetries":10,"failure":{"code":"E","message":"m"}}`, provider, n))
	}
	dev := func(headerSeq string) Event {
		return ev(TypeDeveloperMessage, `{"turn":1,"step":1,"message":{"role":"developer","content":[{"type":"tool-addition","toolName":"add"}],"source":{"kind":"tool-registry"},"id":"d1"}`+headerSeq+`}`)
	}
	compStart := ev("compaction/start", `{"compactionId":"c1","turn":1}`)
	for _, c := range []struct {
		name string
		evs  []Event
		seq  int64 // the event refused (-2: none)
		kind error
		want string
	}{
		{"a whole compaction", []Event{start, sstart, user, ev(TypeUserMessage, string(userMsg("u2", "more"))), compStart, summary("c1", 2, 3, "[2,3]"),
			checkpoint("c1", 2, 3, 2, 3), ev("compaction/end", `{"compactionId":"c1","turn":1}`)}, -2, nil, ""},
		{"a compaction overlapping another", []Event{start, compStart, compStart}, 2, ErrRelationship, "overlaps the open compaction"},
		{"a compaction of another turn", []Event{start, ev("compaction/start", `{"compactionId":"c1","turn":null}`)}, 1, ErrRelationship, "names turn null (between turns), but turn 1 is open"},
		{"a successful end without summary", []Event{start, compStart, ev("compaction/end", `{"compactionId":"c1","turn":1}`)}, 2, ErrRelationship, "requires its compaction/summary"},
		{"a failed end without summary", []Event{start, compStart, ev("compaction/end", `{"compactionId":"c1","turn":1,"error":"x"}`)}, -2, nil, ""},
		{"an end of another compaction", []Event{start, compStart, ev("compaction/end", `{"compactionId":"c2","turn":1}`)}, 2, ErrRelationship, "has no matching compaction/start"},
		{"a summary of a span not current", []Event{start, user, compStart, summary("c1", 1, 5, "[1]")}, 3, ErrRelationship, "is not a span of the current history"},
		{"a summary naming other seqs", []Event{start, user, compStart, summary("c1", 1, 1, "[0]")}, 3, ErrRelationship, "shadowedSeqs do not name exactly"},
		{"a checkpoint outside its compaction", []Event{user, checkpoint("c1", 0, 0, 0)}, 1, ErrRelationship, "outside that compaction's transaction"},
		{"a turn ending inside a compaction", []Event{start, compStart, ev(TypeTurnEnd, `{"turn":1,"reason":{"kind":"completed"}}`)}, 2, ErrRelationship, "crosses the open compaction"},
		{"a replacement not citing what it replaces", []Event{user, {Type: TypeUserMessage, Time: 1, Data: userMsg("k", "s"), SurfaceOp: &SurfaceOp{Replace: true}}}, 1, ErrHistory, "without citing it in sourceEventSeqs"},
		{"a system prompt after other messages", []Event{start, sstart, user, ev(TypeSystemMessage, `{"turn":1,"step":1,"message":{"role":"system","content":[],"source":{"kind":"system-prompt"},"id":"s"}}`)}, 3, ErrHistory, "is the history's first message"},
		{"retries in order", []Event{start, sstart, reqHeader, retry("p", 1), ev("llm/retry-started", `{"turn":1,"step":1,"retryId":"r1","retry":1}`), retry("p", 2)}, -2, nil, ""},
		{"a retry of another provider", []Event{start, sstart, reqHeader, retry("q", 1)}, 3, ErrRelationship, `provider "q" does not match`},
		{"a retry skipping one", []Event{start, sstart, reqHeader, retry("p", 2)}, 3, ErrRelationship, "skips its policy attempt sequence"},
		{"a retry started twice", []Event{start, sstart, reqHeader, retry("p", 1), ev("llm/retry-started", `{"turn":1,"step":1,"retryId":"r1","retry":1}`),
			ev("llm/retry-started", `{"turn":1,"step":1,"retryId":"r1","retry":1}`)}, 5, ErrRelationship, "repeats one scheduled attempt"},
		{"a retry started unscheduled", []Event{start, sstart, ev("llm/retry-started", `{"turn":1,"step":1,"retryId":"r1","retry":1}`)}, 2, ErrRelationship, "pairs no earlier llm/retry"},
		{"a developer message adding a tool", []Event{start, sstart, reqHeader, dev(`,"headerSeq":2`)}, -2, nil, ""},
		{"a tool addition without headerSeq", []Event{start, sstart, reqHeader, dev("")}, 3, ErrRelationship, "adds tools without a headerSeq"},
		{"a headerSeq naming no header", []Event{start, sstart, reqHeader, dev(`,"headerSeq":1`)}, 3, ErrRelationship, "is not an earlier request/header"},
		{"a tool the header does not define", []Event{start, sstart, ev("request/header", `{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"other"}]},"reason":"initial"}`), dev(`,"headerSeq":2`)},
			3, ErrRelationship, `tool "add" must be defined exactly once`},
		{"a title citing no user message", []Event{user, ev("session/title", `{"title":"t","messageSeqs":[0],"source":{"kind":"fallback"}}`),
			ev("session/title", `{"title":"t","messageSeqs":[1],"source":{"kind":"fallback"}}`)}, 2, ErrRelationship, "must cite distinct earlier user/message events"},
		{"a user's title citing messages", []Event{user, ev("session/title", `{"title":"t","messageSeqs":[0],"source":{"kind":"user"}}`)}, 1, ErrRelationship, "empty exactly for a title the user gave"},
		{"a command run twice", []Event{ev("command/run", `{"commandId":"k","name":"n","source":{"kind":"user"}}`), ev("command/run", `{"commandId":"k","name":"n","source":{"kind":"user"}}`)}, 1, ErrRelationship, "repeats commandId"},
		{"a command done without its run", []Event{ev("command/done", `{"commandId":"k","kind":"success"}`)}, 0, ErrRelationship, "has no earlier command/run"},
		{"a catalog naming a child twice", []Event{ev("subagent/catalog", `{"version":0,"childId":"k","childCreatedAt":1,"mode":"one-shot"}`),
			ev("subagent/catalog", `{"version":0,"childId":"k","childCreatedAt":1,"mode":"one-shot"}`)}, 1, ErrRelationship, "duplicate catalog child"},
		{"a delivery marker of another session", []Event{user, ev("session-log-deepseek/delivery-accepted", `{"sessionId":"other","throughSeq":0,"sessionFormatVersion":4}`)}, 1, ErrRelationship, "names the wrong session"},
		{"a PTC dispatch without its start", []Event{start, ev("tool/ptc-dispatch", `{"rootCallId":"r","parentCallId":"r","subCallId":"r:ptc:1","name":"n","arguments":{},"isError":false,"content":[]}`)}, 1, ErrRelationship, "has no unique unsettled start"},
		{"a PTC dispatch unlike its start", []Event{start, ev("tool/ptc-dispatch-start", `{"rootCallId":"r","parentCallId":"r","subCallId":"s","name":"n","arguments":{}}`),
			ev("tool/ptc-dispatch", `{"rootCallId":"r","parentCallId":"r","subCallId":"s","name":"m","arguments":{},"isError":false,"content":[]}`)}, 2, ErrRelationship, "does not match its start"},
		{"a turn number skipped", []Event{start, ev(TypeTurnEnd, `{"turn":1,"reason":{"kind":"completed"}}`), ev("turn/start", `{"turn":3}`)}, 2, ErrTurnPath, "but the next turn is 2"},
		{"a step number skipped", []Event{start, ev("step/start", `{"turn":1,"step":2}`)}, 1, ErrTurnPath, "but the next step of turn 1 is 1"},
		{"a step ending before its tool's result", []Event{start, sstart, answerWithCall(1, 1, "a1", "c1"), ev("step/end", ts)}, 3, ErrTurnPath, `step/end leaves unresolved tool call "c1"`},
		{"a tool call no answer asked for", []Event{start, sstart, ev("tool/call", `{"turn":1,"step":1,"callId":"c9","name":"bash","arguments":"{}"}`)}, 2, ErrTurnPath, "has no advertised tool lifecycle"},
		{"a tool call unlike its answer's", []Event{start, sstart, answerWithCall(1, 1, "a1", "c1"), ev("tool/call", `{"turn":1,"step":1,"callId":"c1","name":"sh","arguments":"{}"}`)}, 3, ErrTurnPath, "does not match one advertised tool call"},
		{"an answer asking again for a waiting call", []Event{start, sstart, answerWithCall(1, 1, "a1", "c1"), answerWithCall(1, 1, "a2", "c1")}, 3, ErrTurnPath, `repeats advertised tool call "c1"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ruleProblems(t, testHeader("s1"), c.evs)
			if c.seq == -2 {
				if len(got) > 0 {
					t.Fatalf("problems %v", got)
				}
				return
			}
			err := got[c.seq]
			if len(got) != 1 || err == nil || !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("problem at seq %d = %v, want %q (%v); all %v", c.seq, err, c.want, c.kind, got)
			}
		})
	}
}

// FuzzPayload: any data for any type is checked without a panic, and the
// writer's validator and a reader's refuse the same events (the writer
// stops at a problem the reader goes past: the verdict is the same).
func FuzzPayload(f *testing.F) {
	f.Add(uint8(0), []byte(`{"turn":1,"step":1,"stream":[{"type":"chunk","time":1,"chunk":{"type":"usage","usage":{"inputTokens":1,"outputTokens":2}}}]}`))
	f.Fuzz(func(t *testing.T, k uint8, data []byte) {
		if rawjson.Valid(data) != nil || len(data) > 1<<16 {
			return
		}
		names := slices.Sorted(maps.Keys(eventTypes))
		typ := names[int(k)%len(names)]
		h := testHeader("s")
		if eventTypes[typ].log == inConversation {
			h = convHeader()
		}
		prefix := []Event{ev("turn/start", `{"turn":1}`), ev("step/start", `{"turn":1,"step":1}`), reqHeader}
		if h.Type == ConversationLog {
			prefix = nil
		}
		e := ev(typ, string(data))
		checkers := [2]*Validator{newStrictValidator(h), NewValidator(h)}
		var verdicts [2]error
		for i, v := range checkers {
			lc := NewLineChecker("f", h)
			for j, p := range append(append([]Event(nil), prefix...), e) {
				p.Seq = int64(j)
				line := p.AppendJSON(nil)
				pe, err := lc.Check(line, p.Seq, int64(j+2))
				if err != nil {
					if j == len(prefix) {
						return // the envelope refuses it: not the payload's
					}
					t.Fatalf("prefix event %d: %v", j, err)
				}
				err = v.Check(pe)
				if j < len(prefix) {
					if err != nil {
						t.Fatalf("prefix event %d: %v", j, err)
					}
					continue
				}
				verdicts[i] = err
			}
		}
		if (verdicts[0] == nil) != (verdicts[1] == nil) {
			t.Fatalf("%s %s: the writer's validator says %v, a reader's %v", typ, data, verdicts[0], verdicts[1])
		}
		var re *RuleError
		if verdicts[0] != nil && !errors.As(verdicts[0], &re) {
			t.Fatalf("%s %s: refused with %T %v, not a *RuleError", typ, data, verdicts[0], verdicts[0])
		}
	})
}

// recKey names each stream record member by its place in recKeys, and
// no other key.
func TestRecKey(t *testing.T) {
	for i, k := range recKeys {
		if got := recKey([]byte(k)); got != i {
			t.Errorf("recKey(%q) = %d, want %d", k, got, i)
		}
	}
	for _, k := range []string{"", "Type", "types", "chunk ", "time1", "text"} {
		if got := recKey([]byte(k)); got != len(recKeys) {
			t.Errorf("recKey(%q) = %d, want %d (none)", k, got, len(recKeys))
		}
	}
}
