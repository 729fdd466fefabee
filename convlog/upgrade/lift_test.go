package upgrade

import (
	"strings"
	"testing"
)

// TestLiftToolResult: a user-role tool result is lifted into a tool-role
// message in its place in the data, extensions kept under plugin: keys and
// content tags migrated; another role gets the message rules, and a wrapper
// that does not match its source is refused.
func TestLiftToolResult(t *testing.T) {
	wrap := `"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"ok \"q\" \u00e9"}]}]`
	src := `"source":{"kind":"tool","callId":"c1"}`
	lifted := `{"role":"tool","source":{"kind":"tool","callId":"c1"},"toolCallId":"c1","content":[{"type":"text","text":"ok \"q\" \u00e9"}],"id":"r1"}`
	cases := []struct{ name, data, want, err string }{
		{"message last", `{"turn":1,"step":1,"message":{"role":"user","id":"r1",` + wrap + `,` + src + `}}`,
			`{"turn":1,"step":1,"message":` + lifted + `}`, ""},
		{"message first", `{"message":{"role":"user","id":"r1",` + wrap + `,` + src + `},"turn":1,"step":1}`,
			`{"message":` + lifted + `,"turn":1,"step":1}`, ""},
		{"message alone", `{"message":{"role":"user","id":"r1",` + wrap + `,` + src + `}}`, `{"message":` + lifted + `}`, ""},
		{"escaped keys around it", `{"t\u0075rn":1,"message":{"meta":{"a":[1,2]},"role":"user","id":"r1",` + wrap + `,` + src + `},"st\u0065p":2,"x":null}`,
			`{"t\u0075rn":1,"message":` + strings.TrimSuffix(lifted, "}") + `,"plugin:message:meta":{"a":[1,2]}},"st\u0065p":2,"x":null}`, ""},
		{"extensions", `{"message":{"role":"user","id":"r1","content":[{"type":"tool-result","toolCallId":"c1","content":[],"isError":false,"durationMs":5}],` + src + `,"extra":true}}`,
			`{"message":{"role":"tool","source":{"kind":"tool","callId":"c1"},"toolCallId":"c1","content":[],"isError":false,"id":"r1","plugin:message:extra":true,"plugin:result:durationMs":5}}`, ""},
		{"a content tag to migrate", `{"message":{"role":"user","id":"r1","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"widget","w":1}]}],` + src + `}}`,
			`{"message":{"role":"tool","source":{"kind":"tool","callId":"c1"},"toolCallId":"c1","content":[{"type":"plugin:widget","w":1}],"id":"r1"}}`, ""},
		{"already tool role", `{"message":{"role":"tool","id":"r1","toolCallId":"c1","content":[],` + src + `}}`,
			`{"message":{"role":"tool","id":"r1","toolCallId":"c1","content":[],` + src + `}}`, ""},
		{"a source rewritten away from tool", `{"message":{"role":"user","id":"r1",` + wrap + `,"source":{"kind":"plugin","callId":"c1","plugin":"p"}}}`,
			"", "requires exactly one tool-result wrapper matching its tool source"},
		{"wrong call", `{"message":{"role":"user","id":"r1","content":[{"type":"tool-result","toolCallId":"c2","content":[]}],` + src + `}}`,
			"", "requires exactly one tool-result wrapper matching its tool source"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &event{typ: "tool/result", seq: 4, data: []byte(c.data)}
			err := (&v3v4{}).rewrite(e)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || string(e.data) != c.want {
				t.Fatalf("%v\n got  %s\n want %s", err, e.data, c.want)
			}
		})
	}
}
