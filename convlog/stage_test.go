package convlog

import (
	"os"
	"path/filepath"
	"testing"
)

// TestStageDropsTheBatch: staged events are checked against what is staged
// before them, nothing is written before Flush, and a refused event drops
// the whole batch, a replacement staged after the first call included.
func TestStageDropsTheBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.v4.jsonl")
	app := &SurfaceOp{}
	w, err := Create(path, testHeader("s"), []Event{{Type: TypeUserMessage, Time: 1, Data: userMsg("u0", "a"), SurfaceOp: app}}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	size := w.Size()
	replace := func(id string, end int64, sources ...int64) Event {
		return Event{Type: TypeUserMessage, Time: 1, Data: userMsg(id, "sum"), SurfaceOp: &SurfaceOp{Replace: true, StartSeq: 0, EndSeq: end}, SourceEventSeqs: sources}
	}
	if err := w.Stage([]Event{{Type: TypeUserMessage, Time: 1, Data: userMsg("u1", "b"), SurfaceOp: app}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Stage([]Event{replace("k", 1, 0, 1)}); err != nil {
		t.Fatal(err)
	}
	if w.NextSeq() != 3 {
		t.Fatalf("next seq %d with two staged, want 3", w.NextSeq())
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != size {
		t.Fatalf("staging wrote to the log (%v)", err)
	}
	if err := w.Stage([]Event{{Type: TypeStepEnd, Time: 1, Data: []byte(`{"turn":1,"step":1}`)}}); err == nil {
		t.Fatal("a step/end outside a turn was staged")
	}
	if err := w.Flush(); err != nil || w.NextSeq() != 1 || w.Size() != size {
		t.Fatalf("after the refusal: flush %v, next seq %d, %d bytes (want 1, %d)", err, w.NextSeq(), w.Size(), size)
	}
	// The history is back to u0 alone: replacing seq 0 through 0 is a span.
	if err := w.Append([]Event{replace("k2", 0, 0)}); err != nil {
		t.Fatal(err)
	}
	got, _, err := readAll(t, path)
	if err != nil || len(got) != 2 {
		t.Fatalf("read back %d events: %v", len(got), err)
	}
}
