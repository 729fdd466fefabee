package convlog

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// appendAfterTail writes torn as a log, appends one event through
// OpenAppend and checks the result: every event a reader returned from the
// torn log, then the new one with the next seq, each once; no torn tail;
// every rule holds (a Validator reads it back); the zstd tool reads it when
// it is installed. It returns the events before the append.
func appendAfterTail(t *testing.T, dir, name string, torn []byte) []Event {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, torn, 0o600); err != nil {
		t.Fatal(err)
	}
	before, _, err := readAll(t, path)
	if err != nil {
		t.Fatalf("reading the torn log: %v", err)
	}
	w, err := OpenAppend(path, WriterOptions{})
	if err != nil {
		t.Fatalf("OpenAppend: %v", err)
	}
	// The next event valid where the log stands: the close of an open
	// turn, or the start of the next one.
	next := CloseTurn(w.Turn(), w.NextSeq(), 10, "interrupted")
	if next == nil {
		next = []Event{{Type: "turn/start", Time: 10, Data: []byte(fmt.Sprintf(`{"turn":%d}`, w.Turn().LastTurn+1))}}
	}
	if err := w.Append(next); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	after, st, err := readAll(t, path)
	if err != nil {
		t.Fatalf("reading after the append: %v", err)
	}
	if st.TornTail {
		t.Fatalf("a torn tail remains after the append: %+v", st)
	}
	if len(after) != len(before)+len(next) {
		t.Fatalf("%d events after the append, want the %d read before and the %d new", len(after), len(before), len(next))
	}
	for i, e := range after {
		if e.Seq != int64(i) {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
		if i < len(before) && !bytes.Equal(e.Raw, before[i].Raw) {
			t.Fatalf("event %d changed: %s, was %s", i, e.Raw, before[i].Raw)
		}
	}
	for i, e := range next {
		if got := after[len(before)+i]; got.Type != e.Type || !bytes.Equal(got.Data, e.Data) {
			t.Fatalf("event %d is %s %s, want the appended %s %s", len(before)+i, got.Type, got.Data, e.Type, e.Data)
		}
	}
	validateFile(t, path)
	if zstdBin, err := exec.LookPath("zstd"); err == nil && bytes.HasPrefix(torn, zstdMagicBytes) {
		if out, err := exec.Command(zstdBin, "-t", "-q", path).CombinedOutput(); err != nil {
			t.Fatalf("zstd -t after the append: %v %s", err, out)
		}
	}
	return before
}

var zstdMagicBytes = []byte{0x28, 0xb5, 0x2f, 0xfd}

// validateFile reads path with every rule of the format checked.
func validateFile(t *testing.T, path string) {
	t.Helper()
	r, err := Open(path, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	v := NewValidator(r.Header())
	evs, _, err := drain(r)
	if err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		if err := v.Check(&evs[i]); err != nil {
			t.Fatalf("%s: event %d breaks a rule: %v", path, i, err)
		}
	}
}

// TestAppendAfterTornTailEveryCut appends after a log cut at every byte of
// its last frame or line, and after NUL padding: the events read before
// stay, each once, and only the new event follows.
func TestAppendAfterTornTailEveryCut(t *testing.T) {
	evs := sampleEvents()
	dir := t.TempDir()
	t.Run("zstd", func(t *testing.T) {
		full := mustRead(t, writeLog(t, dir, "base.v4.jsonl.zst", Zstd, evs[:3], evs[3:5], evs[5:]))
		sc := NewFrameScanner(Bytes(full), int64(len(full)))
		var last Frame
		for f, err := range sc.Frames() {
			if err != nil {
				break
			}
			last = f
		}
		frame := full[last.Offset:]
		whole := int64(len(evs))
		committed := int64(5)
		// A frame that never finished, cut at every byte, then one
		// torn only in its checksum, after a complete log.
		extra := encodeFrame(nil, []byte(`{"type":"turn/start","seq":7,"time":9,"data":{"turn":2}}`+"\n"))
		for cut := 1; cut < len(extra); cut++ {
			before := appendAfterTail(t, dir, fmt.Sprintf("next%d.v4.jsonl.zst", cut), append(bytes.Clone(full), extra[:cut]...))
			want := whole
			if cut >= len(extra)-4 {
				want++ // the checksum alone is torn: the line counts
			}
			if int64(len(before)) != want {
				t.Fatalf("cut %d of a following frame: read %d events, want %d", cut, len(before), want)
			}
		}
		// The last frame of the log itself, cut at every byte.
		for cut := 1; cut < len(frame); cut++ {
			before := appendAfterTail(t, dir, fmt.Sprintf("last%d.v4.jsonl.zst", cut), bytes.Clone(full[:last.Offset+int64(cut)]))
			if n := int64(len(before)); n != committed && n != whole {
				t.Fatalf("cut %d of the last frame: read %d events, want %d or %d", cut, n, committed, whole)
			}
		}
		for _, pad := range []int{1, 4, 512} {
			appendAfterTail(t, dir, fmt.Sprintf("nul%d.v4.jsonl.zst", pad), append(bytes.Clone(full), make([]byte, pad)...))
		}
	})
	t.Run("zstd one frame", func(t *testing.T) {
		// The zstd tool's framing: the whole text in one frame, torn
		// in its checksum (the header line is rewritten too) and
		// cut after the header line's frame is gone.
		text := mustRead(t, writeLog(t, dir, "text.v4.jsonl", Plain, evs))
		one := encodeFrame(nil, text)
		before := appendAfterTail(t, dir, "one.v4.jsonl.zst", one[:len(one)-2])
		if len(before) != len(evs) {
			t.Fatalf("one frame torn in its checksum: read %d events, want %d", len(before), len(evs))
		}
	})
	t.Run("plain", func(t *testing.T) {
		full := mustRead(t, writeLog(t, dir, "base.v4.jsonl", Plain, evs))
		lastLine := bytes.LastIndexByte(full[:len(full)-1], '\n') + 1
		for cut := lastLine + 1; cut < len(full); cut++ {
			before := appendAfterTail(t, dir, fmt.Sprintf("cut%d.v4.jsonl", cut), bytes.Clone(full[:cut]))
			if len(before) != len(evs)-1 {
				t.Fatalf("cut %d: read %d events, want %d", cut, len(before), len(evs)-1)
			}
		}
		for _, pad := range []int{1, 512} {
			appendAfterTail(t, dir, fmt.Sprintf("nul%d.v4.jsonl", pad), append(bytes.Clone(full), make([]byte, pad)...))
		}
	})
}

// FuzzAppendAfterTail appends after arbitrary bytes that follow a complete
// log: whenever the result reads, with every rule holding, as a log with a
// torn tail (or none), an append must keep every event read and add only
// its own.
func FuzzAppendAfterTail(f *testing.F) {
	frame := encodeFrame(nil, []byte(`{"type":"turn/start","seq":7,"time":9,"data":{"turn":2}}`+"\n"))
	f.Add(true, frame[:4])
	f.Add(true, frame[:len(frame)-2])
	f.Add(true, frame[:9])
	f.Add(true, make([]byte, 16))
	f.Add(false, []byte(`{"type":"turn/start","seq":7,"ti`))
	f.Add(false, make([]byte, 3))
	f.Fuzz(func(t *testing.T, compressed bool, tail []byte) {
		name, comp := "f.v4.jsonl", Plain
		if compressed {
			name, comp = "f.v4.jsonl.zst", Zstd
		}
		dir := t.TempDir()
		evs := sampleEvents()
		full := mustRead(t, writeLog(t, dir, "base-"+name, comp, evs[:3], evs[3:]))
		path := filepath.Join(dir, "torn-"+name)
		torn := append(full, tail...)
		if err := os.WriteFile(path, torn, 0o600); err != nil {
			t.Fatal(err)
		}
		if !readsValid(path) {
			return // refused as corrupt: nothing may append to it
		}
		appendAfterTail(t, dir, name, torn)
	})
}

// readsValid reports whether path reads to its end with every rule holding.
func readsValid(path string) bool {
	r, err := Open(path, ReaderOptions{})
	if err != nil {
		return false
	}
	defer r.Close()
	v := NewValidator(r.Header())
	evs, _, err := drain(r)
	if err != nil {
		return false
	}
	for i := range evs {
		if v.Check(&evs[i]) != nil {
			return false
		}
	}
	return true
}
