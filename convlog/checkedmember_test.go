package convlog

import (
	"testing"

	"github.com/convkit/convkit/internal/rawjson"
)

// CheckedMember gives what a lookup in the checked line's data gives.
func TestCheckedMember(t *testing.T) {
	h := &Header{Type: SessionLog, Version: CurrentVersion, ID: "s1", CreatedAt: 1, Cwd: "/"}
	c := NewLineChecker("log", h)
	lines := []string{
		`{"type":"user/message","seq":0,"time":1,"data":{"turn":1,"role":"user","id":"u1","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"user/message","seq":0,"time":1,"data":{"turn":1,"role":"user","\u0069d":"u\"2","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"tool/result","seq":0,"time":1,"data":{"turn":1,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"c"},"toolCallId":"c","content":[{"type":"text","text":"x"}],"id":"r1"}},"surfaceOp":"append"}`,
		`{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"message":"not an object"}}`,
		`{"type":"turn/end","seq":0,"time":1,"data":{"turn":1}}`,
	}
	for _, line := range lines {
		ev, err := c.Check([]byte(line), 0, 2)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		// The members kept are those rawjson.Members finds, offsets aside.
		for _, in := range []bool{false, true} {
			kept, ok := ev.CheckedMembers(in)
			b := ev.Data
			if in {
				b = rawjson.Get(ev.Data, "message")
			}
			want, err := rawjson.Members(b, nil)
			if !ok {
				if err == nil {
					t.Errorf("%s: the members of an object (message %v) not kept", line, in)
				}
				continue
			}
			if err != nil || len(kept) != len(want) {
				t.Fatalf("%s: %d members kept, rawjson.Members finds %d (%v)", line, len(kept), len(want), err)
			}
			for i := range kept {
				if string(kept[i].Key) != string(want[i].Key) || string(kept[i].RawKey) != string(want[i].RawKey) || string(kept[i].Value) != string(want[i].Value) {
					t.Errorf("%s: member %d kept as %q %q %q, rawjson.Members finds %q %q %q", line, i,
						kept[i].Key, kept[i].RawKey, kept[i].Value, want[i].Key, want[i].RawKey, want[i].Value)
				}
			}
		}
		for _, key := range []string{"id", "turn", "content", "missing"} {
			if v, ok := ev.CheckedMember(false, key); !ok || string(v) != string(rawjson.Get(ev.Data, key)) {
				t.Errorf("%s: data %q: %q %v, want %q", line, key, v, ok, rawjson.Get(ev.Data, key))
			}
			want := rawjson.Get(rawjson.Get(ev.Data, "message"), key)
			if v, ok := ev.CheckedMember(true, key); ok && string(v) != string(want) {
				t.Errorf("%s: data.message %q: %q, want %q", line, key, v, want)
			} else if !ok && rawjson.Get(ev.Data, "message") != nil && rawjson.Get(ev.Data, "message")[0] == '{' {
				t.Errorf("%s: data.message's members not kept", line)
			}
		}
	}
}
