package upgrade

import (
	"strings"
	"testing"

	"github.com/convkit/convkit/convlog"
)

const v0Header = `{"type":"session","version":0,"id":"s","createdAt":1,"delegationDepth":0}`
const v1Header = `{"type":"session","version":1,"id":"s","createdAt":1,"delegationDepth":0}`
const v2Header = `{"type":"session","version":2,"id":"s","createdAt":1,"isSeeded":false,"delegationDepth":0}`

func upgradeLog(t *testing.T, name string, b *logb) ([]string, error) {
	t.Helper()
	p := writeLog(t, t.TempDir(), name, b.lines...)
	hdr, lines, err := upgradeAll(t, p, Options{})
	if err == nil {
		checkV4(t, hdr, lines)
	}
	return lines, err
}

// withoutSystem drops the system messages the v2→v3 step adds.
func withoutSystem(lines []string) []string {
	var out []string
	for _, l := range lines {
		if !strings.HasPrefix(l, `{"type":"system/message"`) {
			out = append(out, l)
		}
	}
	return out
}

func TestV0Normalizations(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *logb)
		check func(t *testing.T, lines []string)
		err   string
		kind  error
	}{
		{name: "steering unwrapped", build: func(b *logb) {
			b.start(1, 1).add("steering/message", `{"turn":1,"content":[{"type":"text","text":"wait"}],"source":{"kind":"user"}}`, app)
		}, check: func(t *testing.T, l []string) {
			contains(t, find(t, l, "user/message"), `"data":{"content":[{"type":"text","text":"wait"}],"source":{"kind":"user"},"id":"legacy-message:s:2","role":"user"}`)
		}},
		{name: "steering wrapped", build: func(b *logb) {
			b.start(1, 1).add("steering/message", `{"turn":1,"message":`+userMsg("m1", "wait")+`}`, app)
		}, check: func(t *testing.T, l []string) {
			contains(t, find(t, l, "user/message"), `"data":`+userMsg("m1", "wait")+`,`)
		}},
		{name: "compact renamed", build: func(b *logb) {
			b.start(1, 1).add("compact/start", `{"turn":1}`).
				add("user/message", `{"role":"user","id":"c","content":[],"source":{"kind":"plugin","plugin":"compact"}}`, app).
				add("compact/end", `{"turn":1}`)
		}, check: func(t *testing.T, l []string) {
			contains(t, find(t, l, "compaction/start"), `{"turn":1,"compactionId":"legacy-compaction:s:2"}`)
			contains(t, find(t, l, "user/message"), `"source":{"kind":"compact-checkpoint","compactionId":"legacy-compaction:s:2"}`)
			contains(t, find(t, l, "compaction/end"), `{"turn":1,"compactionId":"legacy-compaction:s:2"}`)
		}},
		{name: "turn/end reasons", build: func(b *logb) {
			b.start(1, 1).add("step/end", `{"turn":1,"step":1}`).add("turn/end", `{"turn":1,"reason":{"kind":"disposed"}}`).
				add("turn/start", `{"turn":2}`).add("turn/end", `{"turn":2,"reason":{"kind":"error","step":1,"message":"boom"}}`).
				add("turn/start", `{"turn":3}`).add("turn/end", `{"turn":3,"reason":{"kind":"aborted"}}`)
		}, check: func(t *testing.T, l []string) {
			j := strings.Join(l, "\n")
			contains(t, j, `{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"disposed"}}}`,
				`{"turn":2,"reason":{"kind":"error","error":{"message":"boom","code":"UNKNOWN"}}}`,
				`{"turn":3,"reason":{"kind":"aborted","reason":{"kind":"legacy"}}}`)
		}},
		{name: "legacy messages", build: func(b *logb) {
			b.start(1, 1).add("user/message", `{"content":[{"type":"text","text":"q"}],"source":{"kind":"user"}}`, app).
				add("assistant/message", `{"turn":1,"step":1,"content":[{"type":"tool-call","id":"c1","name":"n","arguments":"{}"}],"provenance":{"provider":"p","model":"m"}}`, app).
				add("tool/call", `{"turn":1,"step":1,"callId":"c1","name":"n","arguments":"{}"}`).
				add("tool/result", `{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"r"}],"isError":false}`, `"sourceEventSeqs":[4]`, app).
				add("tool/result", `{"turn":1,"step":1,"callId":"c1","content":[{"type":"text","text":"short"}],"isError":false}`, `"sourceEventSeqs":[5]`, `"surfaceOp":{"op":"replace","start":5,"end":5}`)
		}, check: func(t *testing.T, l []string) {
			contains(t, find(t, l, "user/message"), `"id":"legacy-message:s:2","role":"user"`)
			contains(t, find(t, l, "assistant/message"), `"message":{"id":"legacy-message:s:3","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"n","arguments":"{}"}],"source":{"provider":"p","model":"m","kind":"model"}}`)
			contains(t, find(t, l, "tool/result"), `"message":{"role":"tool","source":{"kind":"tool","callId":"c1"},"toolCallId":"c1","content":[{"type":"text","text":"r"}],"isError":false,"id":"legacy-message:s:5"}`)
			contains(t, l[len(l)-1], `"isError":false,"id":"legacy-message:s:5"}`, `"surfaceOp":{"op":"replace","startSeq":6,"endSeq":6}`)
		}},
		{name: "retry ids", build: func(b *logb) {
			r := `{"turn":1,"step":1,"provider":"p","mode":"m","policyKey":"k","retry":1,"delayMs":1,"failure":{}}`
			b.start(1, 1).add("llm/retry", r).add("llm/retry", r)
		}, check: func(t *testing.T, l []string) {
			if countType(l, "llm/retry") != 2 || strings.Count(strings.Join(l, ""), `"retryId":"legacy-retry:s:2"`) != 2 {
				t.Fatal(strings.Join(l, "\n"))
			}
		}},
		{name: "tool call chunks", build: func(b *logb) {
			b.start(1, 1).
				raw(`{"type":"tool-call-chunks","seq0":2,"time0":50,"data":{"turn":1,"step":1,"index":0,"id":"c1","name":"bash","dt":[3],"args":["{\"a\":","1}"]}}`, 2).
				raw(`{"type":"reasoning-chunks","seq0":4,"time0":60,"data":{"turn":1,"step":1,"index":1,"dt":[-1,2],"texts":["a","b","c"]}}`, 3).
				add("assistant/message", `{"turn":1,"step":1,"message":{"role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"},"id":"a"}}`, app)
		}, check: func(t *testing.T, l []string) {
			contains(t, find(t, l, "assistant/message"), `"stream":[{"type":"tool-call-chunks","time0":50,"index":0,"dt":[3],"id":"c1","name":"bash","args":["{\"a\":","1}"]},{"type":"reasoning-chunks","time0":60,"index":1,"dt":[-1,2],"texts":["a","b","c"]}]`)
		}},
		{name: "header-delta", build: func(b *logb) { b.add("request/header-delta", `{}`) },
			err: `session "s" contains unsupported legacy request/header-delta event at seq 0`, kind: convlog.ErrUnsupported},
		{name: "mode/set", build: func(b *logb) { b.add("mode/set", `{}`) },
			err: `contains unsupported legacy mode/set event at seq 0`, kind: convlog.ErrUnsupported},
		{name: "fallback", build: func(b *logb) {
			b.start(1, 1).add("request/header", `{"header":{"config":{}},"reason":"fallback"}`)
		}, err: `contains unsupported request/header reason "fallback" at seq 2`},
		{name: "unknown ignorable", build: func(b *logb) { b.add("acme/x", `{}`, `"ignorable":true`) },
			err: `format v0 contains unknown event type "acme/x" at seq 0`, kind: convlog.ErrUnsupported},
		{name: "foreign delivery", build: func(b *logb) {
			b.start(1, 1).add("session-log-deepseek/delivery-accepted", `{"sessionId":"x","throughSeq":0}`)
		}, err: "current-generation delivery marker names the wrong Session", kind: convlog.ErrCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newLog(v0Header)
			c.build(b)
			lines, err := upgradeLog(t, "s.jsonl", b)
			if c.err != "" {
				expectErr(t, err, c.err, c.kind)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, withoutSystem(lines))
		})
	}
}

func TestErrorNamesFileAndLine(t *testing.T) {
	b := newLog(v0Header).start(1, 1).add("mode/set", `{}`)
	_, err := upgradeLog(t, "s.jsonl", b)
	var ue *Error
	if !asError(err, &ue) || ue.Line != 4 || !strings.HasSuffix(ue.Path, "s.jsonl") || !strings.Contains(err.Error(), "s.jsonl: line 4: ") {
		t.Fatalf("%#v", err)
	}
}

func chunk(turn, step int, c string) string {
	return `{"turn":` + itoa(int64(turn)) + `,"step":` + itoa(int64(step)) + `,"chunk":` + c + `}`
}

func text(i int, s string) string {
	return `{"type":"text-delta","index":` + itoa(int64(i)) + `,"text":"` + s + `"}`
}

const finish = `{"type":"finish","reason":{"kind":"stop"}}`

func amsg(id string) string {
	return `{"turn":1,"step":1,"message":{"role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"},"id":"` + id + `"}}`
}

func TestV1Streams(t *testing.T) {
	cases := []struct {
		name  string
		build func(b *logb)
		want  []string // event lines after the system messages are dropped, from seq 2 on, types and key parts
		err   string
	}{
		{name: "attempt and message", build: func(b *logb) {
			b.start(1, 1). // 0 1
					add("assistant/chunk", chunk(1, 1, text(0, "a"))).                                // 2
					add("assistant/chunk", chunk(1, 1, text(0, "b"))).                                // 3
					add("llm/retry-started", `{"retryId":"r","turn":1,"step":1,"retry":1}`).          // 4
					add("assistant/chunk", chunk(1, 1, text(0, "c"))).                                // 5
					add("assistant/chunk", chunk(1, 1, finish)).                                      // 6
					add("tool/call", `{"turn":1,"step":1,"callId":"x","name":"n","arguments":"{}"}`). // 7
					add("assistant/message", amsg("a1"), `"sourceEventSeqs":[5,6]`, app)              // 8
		}, want: []string{
			`"type":"assistant/attempt","seq":3,"time":103,"data":{"turn":1,"step":1,"stream":[{"type":"text-chunks","time0":102,"index":0,"dt":[1],"texts":["a","b"]}]}`,
			`"type":"llm/retry-started","seq":4`,
			`"type":"tool/call","seq":5`,
			`"type":"assistant/message","seq":6,"time":108,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"},"id":"a1"},"stream":[{"type":"text-chunks","time0":105,"index":0,"dt":[],"texts":["c"]},{"type":"chunk","time":106,"chunk":{"type":"finish","reason":{"kind":"stop"}}}]},"surfaceOp":"append"`,
		}},
		{name: "attempt at end", build: func(b *logb) {
			b.start(1, 1).add("assistant/chunk", chunk(1, 1, text(0, "a"))).add("user/message", userMsg("u", "x"), app)
		}, want: []string{
			`"type":"assistant/attempt","seq":3,"time":102`,
			`"type":"user/message","seq":4`,
		}},
		{name: "references remapped", build: func(b *logb) {
			b.start(1, 1).add("assistant/chunk", chunk(1, 1, text(0, "a"))).add("assistant/chunk", chunk(1, 1, finish)).
				add("assistant/message", amsg("a1"), app).
				add("tool/call", `{"turn":1,"step":1,"callId":"x","name":"n","arguments":"{}"}`).
				add("tool/result", `{"turn":1,"step":1,"message":{"role":"user","id":"r","content":[{"type":"tool-result","toolCallId":"x","content":[]}],"source":{"kind":"tool","callId":"x"}}}`, `"sourceEventSeqs":[5]`, app)
		}, want: []string{
			`"type":"assistant/message","seq":3`,
			`"type":"tool/call","seq":4`,
			`"type":"tool/result","seq":5`, `"sourceEventSeqs":[4]`,
		}},
		{name: "tool results held behind an attempt", build: func(b *logb) {
			// The attempt holds back what follows it until its step ends:
			// both tool results come out of the chain at once, each with
			// its own lifted data.
			b.start(1, 1).add("assistant/chunk", chunk(1, 1, text(0, "a"))).
				add("tool/call", `{"turn":1,"step":1,"callId":"x","name":"n","arguments":"{}"}`).
				add("tool/result", `{"turn":1,"step":1,"message":{"role":"user","id":"r1","content":[{"type":"tool-result","toolCallId":"x","content":[{"type":"text","text":"first"}]}],"source":{"kind":"tool","callId":"x"}}}`, app).
				add("tool/call", `{"turn":1,"step":1,"callId":"y","name":"n","arguments":"{}"}`).
				add("tool/result", `{"turn":1,"step":1,"message":{"role":"user","id":"r2","content":[{"type":"tool-result","toolCallId":"y","content":[{"type":"text","text":"second, longer"}]}],"source":{"kind":"tool","callId":"y"}}}`, app).
				add("step/end", `{"turn":1,"step":1}`)
		}, want: []string{
			`"type":"tool/result","seq":5,"time":104,"data":{"turn":1,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"x"},"toolCallId":"x","content":[{"type":"text","text":"first"}],"id":"r1"}}`,
			`"type":"tool/result","seq":7,"time":106,"data":{"turn":1,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"y"},"toolCallId":"y","content":[{"type":"text","text":"second, longer"}],"id":"r2"}}`,
		}},
		{name: "explicit empty sources claim nothing", build: func(b *logb) {
			b.start(1, 1).add("assistant/chunk", chunk(1, 1, text(0, "a"))).add("assistant/message", amsg("a1"), `"sourceEventSeqs":[]`, app)
		}, want: []string{`"type":"assistant/attempt","seq":3`, `"type":"assistant/message","seq":4`, `"stream":[]`}},
		{name: "provenance mismatch", build: func(b *logb) {
			b.start(1, 1).add("assistant/chunk", chunk(1, 1, text(0, "a"))).add("assistant/chunk", chunk(1, 1, text(0, "b"))).
				add("assistant/message", amsg("a1"), `"sourceEventSeqs":[3]`, app)
		}, err: "assistant/message 4 chunk provenance is not one complete ordered attempt"},
		{name: "reference to a chunk", build: func(b *logb) {
			b.start(1, 1).add("assistant/chunk", chunk(1, 1, text(0, "a"))).add("user/message", userMsg("u", "x"), `"sourceEventSeqs":[2]`, app)
		}, err: "references consumed assistant/chunk 2"},
		{name: "restart closed", build: func(b *logb) {
			b.start(1, 1).add("step/end", `{"turn":1,"step":1}`).
				add("agent/inbox/spliced", `{"target":"next-turn","start":0,"inserted":[`+userMsg("i", "q")+`]}`).
				add("turn/start", `{"turn":2}`)
		}, want: []string{`"type":"step/end","seq":3`, `"type":"agent/inbox/spliced","seq":4`,
			`"type":"turn/end","seq":5,"time":104,"data":{"turn":1,"reason":{"kind":"interrupted"}}`, `"type":"turn/start","seq":6`}},
		{name: "unknown ignorable", build: func(b *logb) { b.add("acme/x", `{}`, `"ignorable":true`) },
			err: `format v1 contains unknown event type "acme/x" at seq 0`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newLog(v1Header)
			c.build(b)
			lines, err := upgradeLog(t, "s.v1.jsonl", b)
			if c.err != "" {
				expectErr(t, err, c.err, nil)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(withoutSystem(lines)[2:], "\n")
			// seqs in want are v4 seqs: one system message follows step/start.
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Fatalf("missing %s in\n%s", w, got)
				}
			}
		})
	}
}

func TestV1Seeded(t *testing.T) {
	h := `{"type":"session","version":1,"id":"s","createdAt":1,"parentSession":"p","seedLength":4,"delegationDepth":0}`
	b := newLog(h).start(1, 1).add("user/message", userMsg("u", "x"), app).add("step/end", `{"turn":1,"step":1}`).
		add("turn/end", `{"turn":1,"reason":{"kind":"completed"}}`)
	p := writeLog(t, t.TempDir(), "s.v1.jsonl", b.lines...)
	hdr, lines := mustUpgrade(t, p, Options{})
	if hdr != `{"type":"session","version":4,"id":"s","createdAt":1,"parentSession":"p","isSeeded":true,"delegationDepth":0}` {
		t.Fatal(hdr)
	}
	// v2: 0 turn/start 1 step/start 2 user 3 step/end 4 end-seed 5 turn/end;
	// v3 adds the system message at 2.
	if lines[5] != `{"type":"session/end-seed","seq":5,"time":104,"data":{"inherited":true}}` {
		t.Fatal(strings.Join(lines, "\n"))
	}

	// An end-seed already at the cut becomes the marker.
	h = `{"type":"session","version":1,"id":"s","createdAt":1,"parentSession":"p","seedLength":2,"delegationDepth":0}`
	b = newLog(h).start(1, 1).add("session/end-seed", `{}`)
	p = writeLog(t, t.TempDir(), "s.v1.jsonl", b.lines...)
	_, lines = mustUpgrade(t, p, Options{})
	if countType(lines, "session/end-seed") != 1 || !strings.Contains(find(t, lines, "session/end-seed"), `{"inherited":true}`) {
		t.Fatal(strings.Join(lines, "\n"))
	}

	// The cut at the very end.
	h = `{"type":"session","version":1,"id":"s","createdAt":1,"parentSession":"p","seedLength":2,"delegationDepth":0}`
	b = newLog(h).start(1, 1)
	p = writeLog(t, t.TempDir(), "s.v1.jsonl", b.lines...)
	_, lines = mustUpgrade(t, p, Options{})
	if lines[len(lines)-1] != `{"type":"session/end-seed","seq":3,"time":101,"data":{"inherited":true}}` {
		t.Fatal(strings.Join(lines, "\n"))
	}

	h = `{"type":"session","version":1,"id":"s","createdAt":1,"parentSession":"p","seedLength":9,"delegationDepth":0}`
	b = newLog(h).start(1, 1)
	_, err := upgradeLog(t, "s.v1.jsonl", b)
	expectErr(t, err, "format v1 seedLength 9 exceeds its 2 events", convlog.ErrCorrupt)
}

func TestV2ToV3(t *testing.T) {
	req := func(system string) string {
		s := ""
		if system != "" {
			s = `,"system":"` + system + `"`
		}
		return `{"header":{"config":{"provider":"p","model":"m"},"adapterDefaults":{},"tools":[]` + s + `},"reason":"initial"}`
	}
	t.Run("prompts", func(t *testing.T) {
		b := newLog(v2Header).start(1, 1). // 0 1 (+sys 2)
							add("user/message", userMsg("u", "x"), app). // 2 -> 3
							add("request/header", req("A")).             // 3 -> sys 4, 5
							add("step/end", `{"turn":1,"step":1}`).      // 4 -> 6
							start(1, 2).                                 // 5 -> 7
							add("request/header", req("A")).             // 6 -> 8 (unchanged prompt)
							add("request/header", req("")).              // 7 -> sys 9, 10
							add("agent-preset/selected", `{"agentPreset":"code"}`).
							add("tool/code-dispatch-start", `{"rootCallId":"r","parentCallId":"p","subCallId":"s","name":"n","arguments":{}}`).
							add("tool/code-dispatch", `{"rootCallId":"r","parentCallId":"p","subCallId":"s","name":"n","arguments":{},"isError":false,"content":[]}`).
							add("user/message", `{"role":"user","id":"t","content":[],"source":{"kind":"plugin","plugin":"tools-code-mode"}}`, app)
		lines, err := upgradeLog(t, "s.v2.jsonl", b)
		if err != nil {
			t.Fatal(err)
		}
		contains(t, lines[2], `"seq":2,"time":101,"data":{"turn":1,"step":1,"message":{"id":"`+systemID("s", 1, "step/start")+`","role":"system","source":{"kind":"system-prompt"},"content":[]}},"surfaceOp":"append"}`)
		contains(t, lines[4], `"seq":4,"time":103,"data":{"turn":1,"step":1,"message":{"id":"`+systemID("s", 3, "request/header")+`","role":"system","source":{"kind":"system-prompt"},"content":[{"type":"text","text":"A"}]}},"sourceEventSeqs":[2],"surfaceOp":{"op":"replace","startSeq":2,"endSeq":2}}`)
		if lines[5] != `{"type":"request/header","seq":5,"time":103,"data":{"header":{"config":{"provider":"p","model":"m"}},"reason":"initial"}}` {
			t.Fatal(lines[5])
		}
		contains(t, lines[8], `"type":"request/header","seq":8`)
		contains(t, lines[9], `"seq":9,"time":107,"data":{"turn":1,"step":2,"message":{"id":"`+systemID("s", 7, "request/header")+`","role":"system","source":{"kind":"system-prompt"},"content":[]}},"sourceEventSeqs":[4],"surfaceOp":{"op":"replace","startSeq":4,"endSeq":4}}`)
		contains(t, lines[11], `"data":{"agentPreset":"ptc"}`)
		contains(t, lines[12], `"type":"tool/ptc-dispatch-start"`)
		contains(t, lines[13], `"type":"tool/ptc-dispatch"`)
		contains(t, lines[14], `"source":{"kind":"ptc-mode"}`)
	})
	t.Run("replacement spelling", func(t *testing.T) {
		b := newLog(v2Header).start(1, 1).add("user/message", userMsg("u", "x"), app).
			add("user/message", userMsg("v", "y"), `"sourceEventSeqs":[2]`, `"surfaceOp":{"op":"replace","start":2,"end":2}`)
		lines, err := upgradeLog(t, "s.v2.jsonl", b)
		if err != nil {
			t.Fatal(err)
		}
		contains(t, lines[4], `"sourceEventSeqs":[3],"surfaceOp":{"op":"replace","startSeq":3,"endSeq":3}`)
	})
	refusals := []struct {
		name  string
		build func(*logb)
		err   string
	}{
		{"content kind", func(b *logb) {
			b.start(1, 1).add("user/message", `{"role":"user","id":"u","content":[{"type":"widget"}],"source":{"kind":"user"}}`, app)
		}, `format v2 user/message at seq 2 data.content[0]: cannot safely transform unclassified message content kind "widget"`},
		{"stream kind", func(b *logb) {
			b.start(1, 1).add("assistant/attempt", `{"turn":1,"step":1,"stream":[{"type":"chunk","time":1,"chunk":{"type":"block-start","index":0,"blockType":"widget"}}]}`)
		}, `cannot safely transform unclassified message content kind "widget"`},
		{"delivery claims v3", func(b *logb) {
			b.add("session-log-deepseek/delivery-accepted", `{"sessionId":"s","throughSeq":0,"sessionFormatVersion":3}`)
		}, "format v2 delivery marker claims target format v3"},
		{"surface before step", func(b *logb) { b.add("user/message", userMsg("u", "x"), app) },
			"format v2 surface before first step cannot acquire a system head"},
		{"prompt outside step", func(b *logb) { b.add("request/header", req("A")) },
			"format v2 changed request prompt outside an open step"},
		{"error without isError", func(b *logb) {
			b.start(1, 1).add("tool/result", `{"turn":1,"step":1,"message":{"role":"user","id":"r","content":[{"type":"tool-result","toolCallId":"x","content":[]}],"source":{"kind":"tool","callId":"x"}},"error":{"name":"E","code":"C"}}`, app)
		}, "carries error metadata for a non-error tool result"},
		{"generated id", func(b *logb) { b.start(1, 1).add("user/message", userMsg("v2-to-v3-system-1", "x"), app) },
			"collides with a generated system message id"},
		{"unknown", func(b *logb) { b.add("assistant/chunk", `{}`) }, `format v2 contains unknown event type "assistant/chunk" at seq 0`},
		{"surfaceOp on log-only", func(b *logb) { b.add("turn/start", `{"turn":1}`, app) }, "has unexpected field surfaceOp"},
	}
	for _, c := range refusals {
		t.Run(c.name, func(t *testing.T) {
			b := newLog(v2Header)
			c.build(b)
			_, err := upgradeLog(t, "s.v2.jsonl", b)
			expectErr(t, err, c.err, nil)
		})
	}
	t.Run("seeded without marker", func(t *testing.T) {
		b := newLog(`{"type":"session","version":2,"id":"s","createdAt":1,"parentSession":"p","isSeeded":true,"delegationDepth":0}`).start(1, 1)
		_, err := upgradeLog(t, "s.v2.jsonl", b)
		expectErr(t, err, "seeded Session lacks an inherited end-seed marker", nil)
	})
}

// TestExpandPackedMembers: a packed row holds texts, or (tool calls) args,
// an id and a name; a member of the other kind is refused by name.
func TestExpandPackedMembers(t *testing.T) {
	for _, tc := range []struct {
		typ, data, want string
	}{
		{"text-chunks", `{"turn":1,"step":1,"index":0,"dt":[2],"texts":["a","b"]}`, ""},
		{"tool-call-chunks", `{"turn":1,"step":1,"index":0,"dt":[],"id":"c","name":"n","args":["{}"]}`, ""},
		{"text-chunks", `{"turn":1,"step":1,"index":0,"dt":[],"texts":["a"],"id":"c"}`, `unexpected member "id"`},
		{"reasoning-chunks", `{"turn":1,"step":1,"index":0,"dt":[],"args":["a"]}`, `unexpected member "args"`},
		{"tool-call-chunks", `{"turn":1,"step":1,"index":0,"dt":[],"id":"c","texts":["a"]}`, `unexpected member "texts"`},
	} {
		evs, err := expandPacked(&convlog.Event{Type: tc.typ, Seq: 4, Time: 10, Data: []byte(tc.data)})
		if tc.want == "" {
			if err != nil || len(evs) == 0 || evs[0].seq != 4 || evs[len(evs)-1].time != 10+int64(2*(len(evs)-1)) {
				t.Errorf("%s %s: %v, %d events", tc.typ, tc.data, err, len(evs))
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: error %v, want %q", tc.typ, tc.data, err, tc.want)
		}
	}
}
