package convlog

import "testing"

// The checks a shape runs after its members (a block-start's type, a
// request header's omissions and markers) name the member and the rule,
// whether or not the header was admitted before.
func TestShapeChecksAfterMembers(t *testing.T) {
	answer := func(blockType string) Event {
		return ev(TypeAssistantMessage, `{"turn":1,"step":1,"message":{"role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"},"id":"a1"},`+
			`"stream":[{"type":"chunk","time":1,"chunk":{"type":"block-start","index":0,"blockType":`+blockType+`}},{"type":"chunk","time":2,"chunk":{"type":"finish","reason":{"kind":"stop"}}}]}`)
	}
	header := func(h string) Event { return ev("request/header", `{"header":`+h+`,"reason":"initial"}`) }
	for _, c := range []struct {
		name string
		e    Event
		want string // "" when admitted
	}{
		{"an answer's text block", answer(`"text"`), ""},
		{"a tool-result block in an answer", answer(`"tool-result"`),
			`assistant/message at seq 3: data.stream[0].chunk.blockType: "tool-result" blocks are not an answer's`},
		{"an escaped tool-removal block in an answer", answer(`"tool-remov\u0061l"`),
			`assistant/message at seq 3: data.stream[0].chunk.blockType: "tool-removal" blocks are not an answer's`},
		{"a header with empty tools", header(`{"config":{"provider":"p","model":"m"},"tools":[]}`),
			`request/header at seq 3: data.header.tools: must be omitted when empty`},
		{"a header with empty adapterDefaults", header(`{"config":{"provider":"p","model":"m"},"adapterDefaults":{}}`),
			`request/header at seq 3: data.header.adapterDefaults: must be omitted when empty`},
		{"a header marking a default it lacks", header(`{"config":{"provider":"p","model":"m"},"adapterDefaults":{"maxTokens":true}}`),
			`request/header at seq 3: data.header.adapterDefaults.maxTokens: marks a default the config does not hold (config.maxTokens is missing)`},
		{"a header marking a default it holds", header(`{"config":{"provider":"p","model":"m","maxTokens":9},"adapterDefaults":{"maxTokens":true}}`), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := testHeader("s")
			lc := NewLineChecker("f", h)
			v := NewValidator(h)
			for j, p := range []Event{ev("turn/start", `{"turn":1}`), ev("step/start", `{"turn":1,"step":1}`), reqHeader, c.e} {
				p.Seq = int64(j)
				pe, err := lc.Check(p.AppendJSON(nil), p.Seq, int64(j+2))
				if err != nil {
					t.Fatalf("event %d: %v", j, err)
				}
				err = v.Check(pe)
				switch {
				case j < 3 && err != nil:
					t.Fatalf("event %d: %v", j, err)
				case j == 3 && c.want == "" && err != nil:
					t.Fatalf("refused: %v", err)
				case j == 3 && c.want != "" && (err == nil || err.Error() != c.want):
					t.Fatalf("got %v\nwant %s", err, c.want)
				}
			}
		})
	}
}
