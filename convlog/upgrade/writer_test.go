package upgrade

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/convkit/convkit/convlog"
)

// TestLazyUpgradeOnWrite: a write handle on a v3 log publishes the v4
// successor beside the untouched original, then appends to it; a read
// handle writes nothing.
func TestLazyUpgradeOnWrite(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "s1.v3.jsonl")
	h := `{"type":"session","version":3,"id":"s1","createdAt":1,"cwd":"/p","isSeeded":false,"delegationDepth":0}`
	body := h + "\n" +
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}` + "\n" +
		`{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"completed"}}}` + "\n"
	if err := os.WriteFile(src, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	fi0, _ := os.Stat(src)

	r, err := Open(src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range r.Events() {
		if err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("a read wrote files: %v", ents)
	}

	w, cur, err := OpenAppend(src, convlog.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(cur) != "s1.v4.jsonl" {
		t.Fatalf("writing to %s", cur)
	}
	err = w.Append([]convlog.Event{{Type: "turn/start", Time: 3, Data: []byte(`{"turn":2}`)}})
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(src)
	fi1, _ := os.Stat(src)
	if !bytes.Equal(after, []byte(body)) || !fi1.ModTime().Equal(fi0.ModTime()) {
		t.Fatal("the original changed")
	}
	cr, err := convlog.Open(cur, convlog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	var n int
	var last *convlog.Event
	for e, err := range cr.Events() {
		if err != nil {
			t.Fatal(err)
		}
		n++
		c := e.Clone()
		last = &c
	}
	if cr.Header().Version != 4 || n != 3 || last.Seq != 2 || last.Type != "turn/start" {
		t.Fatalf("successor: version %d, %d events, last %+v", cr.Header().Version, n, last)
	}
	// A second write handle finds the v4 generation and appends to it.
	w, cur2, err := OpenAppend(cur, convlog.WriterOptions{})
	if err != nil || cur2 != cur {
		t.Fatalf("reopen: %v %s", err, cur2)
	}
	w.Close()
}
