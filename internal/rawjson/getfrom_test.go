package rawjson

import (
	"bytes"
	"testing"
)

// getFromCases are objects as a validated line holds them, and the lookups
// the upgrade chain makes through GetFrom.
var getFromCases = []struct{ obj, key, inner string }{
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

// TestGetFrom: a lookup in the value GetFrom finds is the lookup in the
// value Get finds, and that value begins what GetFrom gives.
func TestGetFrom(t *testing.T) {
	for _, c := range getFromCases {
		b := []byte(c.obj)
		if err := Valid(b); err != nil {
			t.Fatalf("%s: %v", c.obj, err)
		}
		checkGetFrom(t, b, c.key, c.inner)
	}
	if got := Get(GetFrom([]byte(getFromCases[4].obj), "message"), "id"); string(got) != `"escaped key"` {
		t.Errorf("escaped key: %s", got)
	}
	if got := GetFrom([]byte(getFromCases[2].obj), "message"); string(got) != `{"role":"user","content":[{"type":"text","text":"x"}],"id":"msg-1"}}` {
		t.Errorf("message: %s", got)
	}
}

func checkGetFrom(t *testing.T, b []byte, key, inner string) {
	t.Helper()
	whole, from := Get(b, key), GetFrom(b, key)
	if (whole == nil) != (from == nil) || !bytes.HasPrefix(from, whole) {
		t.Fatalf("%s, %q: GetFrom %q, Get %q", b, key, from, whole)
	}
	if a, b2 := Get(from, inner), Get(whole, inner); !bytes.Equal(a, b2) {
		t.Fatalf("%s, %q.%q: %q through GetFrom, %q through Get", b, key, inner, a, b2)
	}
}

func FuzzGetFrom(f *testing.F) {
	for _, c := range getFromCases {
		f.Add(c.obj, c.key, c.inner)
	}
	f.Fuzz(func(t *testing.T, obj, key, inner string) {
		b := []byte(obj)
		if Valid(b) != nil {
			GetFrom(b, key) // must not panic on bytes it was not promised
			return
		}
		checkGetFrom(t, b, key, inner)
	})
}
