package upgrade

import (
	"bytes"
	"testing"
)

// The tool result's fast path (liftedData) writes the same data as the
// general one (message, then the data re-encoded), and leaves to it every
// case it does not cover.
func TestLiftedDataMatchesGeneralPath(t *testing.T) {
	wrap := `"content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"ok \"q\" \u00e9"}]}]`
	src := `"source":{"kind":"tool","callId":"c1"}`
	cases := []struct {
		name, data string
		fast       bool
	}{
		{"message last", `{"turn":1,"step":1,"message":{"role":"user","id":"r1",` + wrap + `,` + src + `}}`, true},
		{"message first", `{"message":{"role":"user","id":"r1",` + wrap + `,` + src + `},"turn":1,"step":1}`, true},
		{"message alone", `{"message":{"role":"user","id":"r1",` + wrap + `,` + src + `}}`, true},
		{"escaped keys around it", `{"t\u0075rn":1,"message":{"meta":{"a":[1,2]},"role":"user","id":"r1",` + wrap + `,` + src + `},"st\u0065p":2,"x":null}`, true},
		{"extensions", `{"message":{"role":"user","id":"r1","content":[{"type":"tool-result","toolCallId":"c1","content":[],"isError":false,"durationMs":5}],` + src + `,"extra":true}}`, true},
		{"a content tag to migrate", `{"message":{"role":"user","id":"r1","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"widget","w":1}]}],` + src + `}}`, false},
		{"a source to rewrite", `{"message":{"role":"user","id":"r1",` + wrap + `,"source":{"kind":"plugin","callId":"c1","plugin":"p"}}}`, false},
		{"already tool role", `{"message":{"role":"tool","id":"r1","toolCallId":"c1","content":[],` + src + `}}`, false},
		{"wrong call", `{"message":{"role":"user","id":"r1","content":[{"type":"tool-result","toolCallId":"c2","content":[]}],` + src + `}}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fast := &event{typ: "tool/result", seq: 4, data: []byte(c.data)}
			d, err := parseObject(fast.payload())
			if err != nil {
				t.Fatal(err)
			}
			data, ok := liftedData(nil, fast, d, d.get("message"), "subject")
			if ok != c.fast {
				t.Fatalf("fast path taken: %v, want %v", ok, c.fast)
			}
			// The general path, as rewrite ran it before the fast path.
			general := &event{typ: "tool/result", seq: 4, data: []byte(c.data)}
			g, _ := parseObject(general.payload())
			nm, gerr := (&v3v4{}).message(general, g.get("message"), "subject")
			if !ok {
				return
			}
			if gerr != nil {
				t.Fatalf("the general path fails where the fast one did not: %v", gerr)
			}
			if nm == nil {
				t.Fatal("the general path changes nothing where the fast one lifted")
			}
			g.set("message", nm)
			if want := g.bytes(); !bytes.Equal(data, want) {
				t.Fatalf("\n fast    %s\n general %s", data, want)
			}
		})
	}
}
