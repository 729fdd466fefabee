package upgrade

import (
	"bytes"
	"testing"

	"github.com/convkit/convkit/internal/rawjson"
)

// memberFromCases are objects as a validated line holds them, and the
// lookups the upgrade makes through memberFrom.
var memberFromCases = []struct{ obj, key, inner string }{
	{`{"type":"chunk","time":1,"chunk":{"type":"block-end","index":0,"block":{"type":"text","text":"a"}}}`, "chunk", "type"},
	{`{"type":"block-end","index":0,"block":{"type":"reasoning","text":"long"}}`, "block", "type"},
	{`{"turn":1,"message":{"role":"user","content":[{"type":"text","text":"x"}],"id":"msg-1"}}`, "message", "id"},
	{` { "a" : 1 , "message" : { "id" : "m" } } `, "message", "id"},
	{`{"a":"message","mess\u0061ge":{"id":"escaped key"}}`, "message", "id"},
	{`{"message":{"role":"x"}}`, "message", "id"},
	{`{"other":{"id":"x"}}`, "message", "id"},
	{`{}`, "message", "id"},
	{`[{"message":{"id":"x"}}]`, "message", "id"},
	{`"message"`, "message", "id"},
	{`{"message":"not an object","id":"outer"}`, "message", "id"},
	{`{"message":[{"id":"in an array"}],"id":"outer"}`, "message", "id"},
	{`{"block":{"text":"no type","more":{"type":"nested"}},"type":"outer"}`, "block", "type"},
}

// TestMemberFrom: a lookup in the value memberFrom finds is the lookup in
// the value memberOf finds, and that value begins what memberFrom gives.
func TestMemberFrom(t *testing.T) {
	for _, c := range memberFromCases {
		b := []byte(c.obj)
		if err := rawjson.Valid(b); err != nil {
			t.Fatalf("%s: %v", c.obj, err)
		}
		checkMemberFrom(t, b, c.key, c.inner)
	}
	if got := memberOf(memberFrom([]byte(memberFromCases[4].obj), "message"), "id"); string(got) != `"escaped key"` {
		t.Errorf("escaped key: %s", got)
	}
}

func checkMemberFrom(t *testing.T, b []byte, key, inner string) {
	t.Helper()
	whole, from := memberOf(b, key), memberFrom(b, key)
	if (whole == nil) != (from == nil) || !bytes.HasPrefix(from, whole) {
		t.Fatalf("%s, %q: memberFrom %q, memberOf %q", b, key, from, whole)
	}
	if a, b2 := memberOf(from, inner), memberOf(whole, inner); !bytes.Equal(a, b2) {
		t.Fatalf("%s, %q.%q: %q through memberFrom, %q through memberOf", b, key, inner, a, b2)
	}
}

func FuzzMemberFrom(f *testing.F) {
	for _, c := range memberFromCases {
		f.Add(c.obj, c.key, c.inner)
	}
	f.Fuzz(func(t *testing.T, obj, key, inner string) {
		b := []byte(obj)
		if rawjson.Valid(b) != nil {
			return
		}
		checkMemberFrom(t, b, key, inner)
	})
}
