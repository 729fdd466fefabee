package convlog

import "testing"

// TestReadableText: what people read of a message, and what search
// indexes of the same message.
func TestReadableText(t *testing.T) {
	for _, c := range []struct {
		name, msg, readable, indexed string
	}{
		{"a string", `{"role":"user","content":"hello\nworld"}`, "hello\nworld", "hello\nworld"},
		{"blocks", `{"role":"assistant","content":[{"type":"reasoning","text":"think"},{"type":"text","text":"answer"},` +
			`{"type":"tool-call","id":"k1","name":"grep","arguments":"{\"q\":1}"}]}`,
			"(reasoning) think\nanswer\n(tool call grep {\"q\":1})", "answer"},
		{"interrupted", `{"role":"assistant","content":[{"type":"text","text":"cut","interrupted":true}]}`, "cut (interrupted)", "cut"},
		{"tools", `{"role":"system","content":[{"type":"tool-addition","toolName":"web"},{"type":"tool-removal","toolName":"ls"},{"type":"image"}]}`,
			"(tool-addition web)\n(tool-removal ls)\n(image)", ""},
		{"not an object", `[1]`, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := ReadableText([]byte(c.msg)); got != c.readable {
				t.Errorf("ReadableText = %q, want %q", got, c.readable)
			}
			if _, got := MessageText([]byte(c.msg)); got != c.indexed {
				t.Errorf("MessageText = %q, want %q", got, c.indexed)
			}
		})
	}
}
