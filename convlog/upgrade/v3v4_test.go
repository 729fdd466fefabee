package upgrade

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/convkit/convkit/convlog"
)

const v3Header = `{"type":"session","version":3,"id":"s","createdAt":1,"isSeeded":false,"delegationDepth":0}`

func v3Log() *logb { return newLog(v3Header) }

func upgradeV3(t *testing.T, b *logb, opts Options) ([]string, error) {
	t.Helper()
	p := writeLog(t, t.TempDir(), "s.v3.jsonl", b.lines...)
	hdr, lines, err := upgradeAll(t, p, opts)
	if err == nil {
		checkV4(t, hdr, lines)
		if !strings.Contains(hdr, `"version":4`) {
			t.Fatalf("header %s", hdr)
		}
	}
	return lines, err
}

func TestV3EventTypeGate(t *testing.T) {
	b := v3Log().start(1, 1).
		add("acme/telemetry", `{"x":1}`, `"ignorable":true`).
		add("user/message", userMsg("u1", "hi"), app)
	lines, err := upgradeV3(t, b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if lines[2] != `{"type":"plugin:acme/telemetry","seq":2,"time":102,"data":{"x":1},"ignorable":true}` {
		t.Fatalf("opaque event: %s", lines[2])
	}
	b = v3Log().start(1, 1).add("developer/message", `{}`)
	_, err = upgradeV3(t, b, Options{})
	expectErr(t, err, `format v3 contains unknown event type "developer/message" at seq 2`, convlog.ErrUnsupported)
}

func toolResult(msg string, extra ...string) string {
	return `{"turn":1,"step":1,"message":` + msg + strings.Join(extra, "") + `}`
}

func TestV3LiftToolResult(t *testing.T) {
	call := `{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{}"}`
	cases := []struct {
		name, msg, want, err string
	}{
		{
			name: "plain",
			msg:  `{"role":"user","id":"r1","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"ok"}]}],"source":{"kind":"tool","callId":"c1"}}`,
			want: `{"role":"tool","source":{"kind":"tool","callId":"c1"},"toolCallId":"c1","content":[{"type":"text","text":"ok"}],"id":"r1"}`,
		},
		{
			name: "error and extensions",
			msg:  `{"meta":{"a":1},"role":"user","id":"r1","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"widget","w":1}],"isError":true,"durationMs":5,"plugin:result:x":2}],"source":{"kind":"tool","callId":"c1"}}`,
			want: `{"role":"tool","source":{"kind":"tool","callId":"c1"},"toolCallId":"c1","content":[{"type":"plugin:widget","w":1}],"isError":true,"id":"r1","plugin:message:meta":{"a":1},"plugin:result:durationMs":5,"plugin:result:plugin:result:x":2}`,
		},
		{
			name: "already tool role",
			msg:  `{"role":"tool","source":{"kind":"tool","callId":"c1"},"toolCallId":"c1","content":[],"id":"r1"}`,
			want: `{"role":"tool","source":{"kind":"tool","callId":"c1"},"toolCallId":"c1","content":[],"id":"r1"}`,
		},
		{
			name: "wrong call",
			msg:  `{"role":"user","id":"r1","content":[{"type":"tool-result","toolCallId":"c2","content":[]}],"source":{"kind":"tool","callId":"c1"}}`,
			err:  "format v3 tool/result at seq 4 requires exactly one tool-result wrapper matching its tool source",
		},
		{
			name: "two wrappers",
			msg:  `{"role":"user","id":"r1","content":[{"type":"tool-result","toolCallId":"c1","content":[]},{"type":"tool-result","toolCallId":"c1","content":[]}],"source":{"kind":"tool","callId":"c1"}}`,
			err:  "requires exactly one tool-result wrapper matching its tool source",
		},
		{
			name: "nested",
			msg:  `{"role":"user","id":"r1","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"tool-result","toolCallId":"c1","content":[]}]}],"source":{"kind":"tool","callId":"c1"}}`,
			err:  "contains a nested tool-result unsupported by this converter",
		},
		{
			name: "isError not boolean",
			msg:  `{"role":"user","id":"r1","content":[{"type":"tool-result","toolCallId":"c1","content":[],"isError":"yes"}],"source":{"kind":"tool","callId":"c1"}}`,
			err:  "tool-result isError must be boolean",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := v3Log().start(1, 1).add("user/message", userMsg("u1", "go"), app).
				add("tool/call", call).
				add("tool/result", toolResult(c.msg), `"sourceEventSeqs":[3]`, app)
			lines, err := upgradeV3(t, b, Options{})
			if c.err != "" {
				expectErr(t, err, c.err, nil)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := `{"type":"tool/result","seq":4,"time":104,"data":{"turn":1,"step":1,"message":` + c.want + `},"sourceEventSeqs":[3],"surfaceOp":"append"}`
			if lines[4] != want {
				t.Fatalf("\n got %s\nwant %s", lines[4], want)
			}
		})
	}
}

func TestV3MessageSources(t *testing.T) {
	cases := []struct{ role, plugin, rest, want string }{
		{"user", "compact", `,"compactionId":"k1"`, `{"kind":"compact-checkpoint","compactionId":"k1"}`},
		{"user", "tools-code-mode", ``, `{"kind":"ptc-mode"}`},
		{"user", "tools-ptc", ``, `{"kind":"ptc-mode"}`},
		{"user", "dsh-compaction-basic", ``, `{"kind":"compact-basic"}`},
		{"system", "@deepseek-ai/dsh-system-prompt", ``, `{"kind":"system-prompt"}`},
		{"user", "@deepseek-ai/dsh-system-prompt", `,"form":"snapshot","sections":[]`, `{"kind":"runtime-context","form":"snapshot","sections":[]}`},
		{"user", "goal", ``, `{"kind":"goal"}`},
		{"user", "dsh-session-title-llm", ``, `{"kind":"dsh-session-title-llm"}`},
		{"user", "acme", ``, `{"kind":"plugin:acme"}`},
	}
	for _, c := range cases {
		t.Run(c.plugin+"/"+c.role, func(t *testing.T) {
			src := `{"kind":"plugin","plugin":"` + c.plugin + `"` + c.rest + `}`
			msg := `{"role":"` + c.role + `","id":"m","content":[],"source":` + src + `}`
			b := v3Log().start(1, 1)
			if c.role == "system" {
				b.add("system/message", `{"turn":1,"step":1,"message":`+msg+`}`, app)
			} else {
				b.add("user/message", msg, app)
			}
			lines, err := upgradeV3(t, b, Options{})
			if err != nil {
				t.Fatal(err)
			}
			contains(t, lines[2], `"source":`+c.want+`}`)
		})
	}
	t.Run("positions", func(t *testing.T) {
		src := `{"kind":"plugin","plugin":"goal"}`
		m := `{"role":"user","id":"i1","content":[{"type":"gadget"}],"source":` + src + `}`
		b := v3Log().add("agent/inbox/spliced", `{"target":"next-turn","start":0,"inserted":[`+m+`]}`).
			add("session/title-llm-request", `{"titleProvider":"p","messageSeqs":[],"route":"r","system":"s","messages":[`+m+`],"maxTokens":5}`).
			start(1, 1).
			add("assistant/message", `{"turn":1,"step":1,"message":{"role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"},"id":"a"},"stream":[]}`, app)
		lines, err := upgradeV3(t, b, Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := `{"role":"user","id":"i1","content":[{"type":"plugin:gadget"}],"source":{"kind":"goal"}}`
		contains(t, lines[0], want)
		contains(t, lines[1], want)
	})
	t.Run("empty kind", func(t *testing.T) {
		b := v3Log().start(1, 1).add("user/message", `{"role":"user","id":"m","content":[],"source":{"kind":""}}`, app)
		_, err := upgradeV3(t, b, Options{})
		expectErr(t, err, "message source at seq 2 requires a nonempty kind", convlog.ErrCorrupt)
	})
}

func TestV3ContentTags(t *testing.T) {
	stream := `[{"type":"chunk","time":5,"chunk":{"type":"block-start","index":0,"blockType":"widget"}},` +
		`{"type":"text-chunks","time0":6,"index":1,"dt":[],"texts":["x"]},` +
		`{"type":"chunk","time":7,"chunk":{"type":"block-end","index":0,"block":{"type":"widget","v":1}}},` +
		`{"type":"chunk","time":8,"chunk":{"type":"block-end","index":1,"block":{"type":"text","text":"x"}}}]`
	b := v3Log().start(1, 1).
		add("user/message", `{"role":"user","id":"u","content":[{"type":"text","text":"a"},{"type":"widget","v":1}],"source":{"kind":"user"}}`, app).
		add("assistant/message", `{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"widget","v":1},{"type":"text","text":"x"}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a"},"stream":`+stream+`}`, app).
		add("compaction/summary", `{"compactionId":"k","summary":[{"type":"note"}],"shadowedRange":{"start":2,"end":3},"shadowedSeqs":[2,3],"shadowedTokenCount":1,"provider":"p","model":"m","rawOutput":[{"type":"text","text":"r"},{"type":"memo"}]}`).
		add("tool/ptc-dispatch", `{"rootCallId":"r","parentCallId":"p","subCallId":"s","name":"n","arguments":{},"isError":false,"content":[{"type":"blob"}]}`)
	lines, err := upgradeV3(t, b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	contains(t, lines[2], `"content":[{"type":"text","text":"a"},{"type":"plugin:widget","v":1}]`)
	contains(t, lines[3], `"content":[{"type":"plugin:widget","v":1},{"type":"text","text":"x"}]`,
		`"blockType":"plugin:widget"`, `"block":{"type":"plugin:widget","v":1}`, `"block":{"type":"text","text":"x"}`,
		`{"type":"text-chunks","time0":6,"index":1,"dt":[],"texts":["x"]}`)
	contains(t, lines[4], `"summary":[{"type":"plugin:note"}]`, `"rawOutput":[{"type":"text","text":"r"},{"type":"plugin:memo"}]`)
	contains(t, lines[5], `"content":[{"type":"plugin:blob"}]`)
}

func TestV3DeferLoading(t *testing.T) {
	b := v3Log().start(1, 1).
		add("request/header", `{"header":{"config":{"provider":"p","model":"m"},"tools":[{"name":"a","description":"d","parameters":{}},{"name":"b","description":"d","parameters":{},"deferLoading":true}]},"reason":"initial"}`)
	_, err := upgradeV3(t, b, Options{})
	expectErr(t, err, "format v3 request/header at seq 2.header.tools[1] contains deferLoading, which is only defined in V4", convlog.ErrUnsupported)
}

// TestV3InterruptedTurn: a restart without turn/end is closed, and every
// reference after it is remapped.
func TestV3InterruptedTurn(t *testing.T) {
	b := v3Log().start(1, 1). // 0 1
					add("user/message", userMsg("u1", "one"), app).                                                                                   // 2
					add("step/end", `{"turn":1,"step":1}`).                                                                                           // 3
					add("agent/inbox/spliced", `{"target":"next-turn","start":4,"inserted":[`+userMsg("i1", "queued")+`]}`).                          // 4
					add("turn/start", `{"turn":2}`).                                                                                                  // 5 -> turn/end inserted at 5
					add("step/start", `{"turn":2,"step":1}`).                                                                                         // 6 -> 7
					add("user/message", userMsg("u2", "two"), app).                                                                                   // 7 -> 8
					add("user/message", userMsg("u3", "three"), app).                                                                                 // 8 -> 9
					add("user/message", userMsg("c1", "summary"), `"sourceEventSeqs":[7,8]`, `"surfaceOp":{"op":"replace","startSeq":7,"endSeq":8}`). // 9 -> 10
					add("command/done", `{"commandId":"x","kind":"k","sourceEventSeq":7}`).                                                           // 10 -> 11
					add("session/title", `{"title":"t","messageSeqs":[2,7],"source":"llm"}`).                                                         // 11 -> 12
					add("compaction/prune", `{"shadowedRange":{"start":7,"end":8},"shadowedSeqs":[7,8],"shadowedTokenCount":3}`).                     // 12 -> 13
					add("image/offload", `{"targets":[{"seq":9,"index":0},{"seq":2,"index":1}]}`).                                                    // 13 -> 14
					add("session-log-deepseek/delivery-accepted", `{"sessionId":"s","throughSeq":7,"sessionFormatVersion":3}`)                        // 14 -> 15
	lines, err := upgradeV3(t, b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if lines[5] != `{"type":"turn/end","seq":5,"time":105,"data":{"turn":1,"reason":{"kind":"interrupted"}}}` {
		t.Fatalf("inserted: %s", lines[5])
	}
	contains(t, lines[6], `"type":"turn/start","seq":6`)
	contains(t, lines[10], `"sourceEventSeqs":[8,9]`, `"surfaceOp":{"op":"replace","startSeq":8,"endSeq":9}`)
	contains(t, lines[11], `"sourceEventSeq":8`)
	contains(t, lines[12], `"messageSeqs":[2,8]`)
	contains(t, lines[13], `"shadowedRange":{"start":8,"end":9}`, `"shadowedSeqs":[8,9]`)
	contains(t, lines[14], `"targets":[{"seq":10,"index":0},{"seq":2,"index":1}]`)
	contains(t, lines[15], `"throughSeq":7`) // delivery watermarks are not remapped
	if len(lines) != 16 {
		t.Fatalf("%d events", len(lines))
	}

	// Without the spliced insertion the restart is not closed (native V4
	// validation refuses such a log, the upgrade does not guess).
	b = v3Log().start(1, 1).add("step/end", `{"turn":1,"step":1}`).add("turn/start", `{"turn":2}`)
	p := writeLog(t, t.TempDir(), "s.v3.jsonl", b.lines...)
	_, lines, err = upgradeAll(t, p, Options{})
	if err != nil || countType(lines, "turn/end") != 0 {
		t.Fatalf("err %v, lines %v", err, lines)
	}
}

func descriptor(v int, mode, label string) json.RawMessage {
	d := `{"mode":"` + mode + `","version":` + string(rune('0'+v)) + `,"provider":"p"`
	if label != "" {
		d += `,"label":"` + label + `"`
	}
	return json.RawMessage(d + "}")
}

func TestV3SubagentCatalog(t *testing.T) {
	kids := []ChildFact{
		{ChildID: "k2", ChildCreatedAt: 50, DescriptorCount: 1, Descriptor: descriptor(2, "one-shot", ""), SourcePath: "/x/k2.v3.jsonl"},
		{ChildID: "k1", ChildCreatedAt: 50, DescriptorCount: 1, Descriptor: descriptor(1, "ignored", "helper")},
		{ChildID: "k0", ChildCreatedAt: 10, DescriptorCount: 0},
		{ChildID: "k3", ChildCreatedAt: 60, DescriptorCount: 2, Descriptor: descriptor(3, "continuable", "x")},
	}
	t.Run("appended", func(t *testing.T) {
		b := v3Log().start(1, 1).add("user/message", userMsg("u", "x"), app)
		lines, err := upgradeV3(t, b, Options{Children: kids})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{
			`{"type":"subagent/catalog","seq":3,"time":102,"data":{"version":1,"childId":"k0","childCreatedAt":10,"mode":"unknown"}}`,
			`{"type":"subagent/catalog","seq":4,"time":102,"data":{"version":0,"childId":"k1","childCreatedAt":50,"mode":"continuable","label":"helper"}}`,
			`{"type":"subagent/catalog","seq":5,"time":102,"data":{"version":0,"childId":"k2","childCreatedAt":50,"mode":"one-shot"}}`,
			`{"type":"subagent/catalog","seq":6,"time":102,"data":{"version":1,"childId":"k3","childCreatedAt":60,"mode":"unknown"}}`,
		}
		if strings.Join(lines[3:], "\n") != strings.Join(want, "\n") {
			t.Fatalf("got\n%s", strings.Join(lines[3:], "\n"))
		}
	})
	t.Run("empty log", func(t *testing.T) {
		lines, err := upgradeV3(t, v3Log(), Options{Children: kids[2:3]})
		if err != nil || len(lines) != 1 || !strings.Contains(lines[0], `"time":1,`) {
			t.Fatalf("%v %v", err, lines)
		}
	})
	t.Run("existing kept", func(t *testing.T) {
		b := v3Log().add("subagent/catalog", `{"version":0,"childId":"k2","childCreatedAt":50,"mode":"one-shot"}`)
		lines, err := upgradeV3(t, b, Options{Children: kids[:1]})
		if err != nil || len(lines) != 1 {
			t.Fatalf("%v %v", err, lines)
		}
	})
	t.Run("conflict", func(t *testing.T) {
		b := v3Log().add("subagent/catalog", `{"version":0,"childId":"k2","childCreatedAt":50,"mode":"continuable","label":"x"}`)
		_, err := upgradeV3(t, b, Options{Children: kids[:1]})
		expectErr(t, err, "Session k2 (raw log: /x/k2.v3.jsonl) conflicts with its parent catalog", convlog.ErrUnsupported)
		b = v3Log().add("subagent/catalog", `{"version":1,"childId":"k0","childCreatedAt":11,"mode":"unknown"}`)
		_, err = upgradeV3(t, b, Options{Children: kids[2:3]})
		expectErr(t, err, "Session k0 conflicts with its parent catalog", nil)
	})
	t.Run("duplicate", func(t *testing.T) {
		e := `{"version":1,"childId":"k0","childCreatedAt":10,"mode":"unknown"}`
		b := v3Log().add("subagent/catalog", e).add("subagent/catalog", e)
		_, err := upgradeV3(t, b, Options{})
		expectErr(t, err, "duplicate catalog child k0", nil)
	})
	t.Run("inherited entries are not own", func(t *testing.T) {
		e := `{"version":1,"childId":"k0","childCreatedAt":99,"mode":"unknown"}`
		b := newLog(`{"type":"session","version":3,"id":"s","createdAt":1,"parentSession":"p","isSeeded":true,"delegationDepth":0}`).
			add("subagent/catalog", e).add("session/end-seed", `{"inherited":true}`)
		lines, err := upgradeV3(t, b, Options{Children: kids[2:3]})
		if err != nil || countType(lines, "subagent/catalog") != 2 {
			t.Fatalf("%v %v", err, lines)
		}
	})
	t.Run("bad descriptor", func(t *testing.T) {
		k := []ChildFact{{ChildID: "k", ChildCreatedAt: 1, DescriptorCount: 1, Descriptor: json.RawMessage(`{"version":2,"mode":"x","provider":"p"}`)}}
		_, err := upgradeV3(t, v3Log(), Options{Children: k})
		expectErr(t, err, "Session k has an invalid subagent descriptor mode", nil)
	})
}

func TestV3DeliveryAndSeed(t *testing.T) {
	cases := []struct {
		name   string
		header string
		build  func(*logb)
		err    string
	}{
		{"claims v4", v3Header, func(b *logb) {
			b.add("session-log-deepseek/delivery-accepted", `{"sessionId":"s","throughSeq":0,"sessionFormatVersion":4}`)
		}, "format v3 delivery marker claims target format v4"},
		{"foreign", v3Header, func(b *logb) {
			b.start(1, 1).add("session-log-deepseek/delivery-accepted", `{"sessionId":"other","throughSeq":0,"sessionFormatVersion":3}`)
		}, "current-generation delivery marker names the wrong Session"},
		{"late watermark", v3Header, func(b *logb) {
			b.add("session-log-deepseek/delivery-accepted", `{"sessionId":"s","throughSeq":0,"sessionFormatVersion":3}`)
		}, "delivery throughSeq must precede its marker"},
		{"foreign inherited ok", `{"type":"session","version":3,"id":"s","createdAt":1,"parentSession":"p","isSeeded":true,"delegationDepth":0}`, func(b *logb) {
			b.start(1, 1).add("session-log-deepseek/delivery-accepted", `{"sessionId":"p","throughSeq":0,"sessionFormatVersion":3}`).
				add("session/end-seed", `{"inherited":true}`)
		}, ""},
		{"older generation kept", v3Header, func(b *logb) {
			b.start(1, 1).add("session-log-deepseek/delivery-accepted", `{"sessionId":"other","throughSeq":0,"sessionFormatVersion":2}`)
		}, ""},
		{"unseeded with marker", v3Header, func(b *logb) {
			b.add("session/end-seed", `{"inherited":true}`)
		}, "unseeded format v3 Session contains an inherited end-seed marker"},
		{"seeded without marker", `{"type":"session","version":3,"id":"s","createdAt":1,"parentSession":"p","isSeeded":true,"delegationDepth":0}`, func(b *logb) {
			b.start(1, 1)
		}, "V3 inherited event count"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newLog(c.header)
			c.build(b)
			_, err := upgradeV3(t, b, Options{})
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			expectErr(t, err, c.err, nil)
		})
	}
}
