package convlog

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestAppendDataWhitespace: data given with white space around it or with
// newlines inside (pretty-printed JSON) still makes one line per event, and
// a log read back and rewritten is byte-identical.
func TestAppendDataWhitespace(t *testing.T) {
	for _, comp := range []Compression{Plain, Zstd} {
		t.Run(comp.String(), func(t *testing.T) {
			dir := t.TempDir()
			evs := []Event{
				{Type: "turn/start", Time: 1, Data: []byte(" {\"turn\":1}\n")},
				{Type: "step/start", Time: 2, Data: []byte("{\n  \"turn\": 1,\n  \"step\": 1\n}")},
				{Type: TypeUserMessage, Time: 3, Data: []byte("\t" + string(userMsg("u1", "a\nb")) + " "), SurfaceOp: &SurfaceOp{}},
			}
			path := writeLog(t, dir, FileName("a", 4, comp), comp, evs)
			got, st, err := readAll(t, path)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 3 || st.Lines != 4 {
				t.Fatalf("%d events, stats %+v", len(got), st)
			}
			if string(got[1].Data) != `{"turn":1,"step":1}` || !bytes.Equal(got[2].Data, userMsg("u1", "a\nb")) {
				t.Errorf("data read back: %s %s", got[1].Data, got[2].Data)
			}
			r, err := Open(path, ReaderOptions{})
			if err != nil {
				t.Fatal(err)
			}
			h := r.Header()
			r.Close()
			path2 := filepath.Join(dir, FileName("b", 4, comp))
			w, err := Create(path2, h, got, WriterOptions{Compression: comp})
			if err != nil {
				t.Fatal(err)
			}
			w.Close()
			if comp == Plain && !bytes.Equal(mustRead(t, path), mustRead(t, path2)) {
				t.Errorf("rewritten log differs:\n%s---\n%s", mustRead(t, path), mustRead(t, path2))
			}
		})
	}
	// Data that is not JSON is refused, naming the event.
	w, err := Create(filepath.Join(t.TempDir(), "c.v4.jsonl"), testHeader("s1"), nil, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	for _, d := range []string{"{\n", "{} {}", "\n"} {
		err := w.Append([]Event{{Type: "feedback/record", Data: []byte(d)}})
		if err == nil || !strings.Contains(err.Error(), "event 0 of the batch (feedback/record)") {
			t.Errorf("data %q: err = %v", d, err)
		}
	}
	// Empty data is written as null, which no type's schema admits.
	if err := w.Append([]Event{{Type: "feedback/record"}}); err == nil || !strings.Contains(err.Error(), "data: must be an object, not null") {
		t.Errorf("no data: err = %v", err)
	}
	if err := w.Append([]Event{{Type: "feedback/record", Data: []byte("{}")}}); err != nil {
		t.Fatal(err)
	}
	got, _, err := readAll(t, filepath.Join(filepath.Dir(w.path), "c.v4.jsonl"))
	if err != nil || len(got) != 1 {
		t.Fatalf("%d events, %v", len(got), err)
	}
}
