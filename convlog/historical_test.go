package convlog

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// writeHistorical writes a log of any version verbatim, unchecked: the
// header line, then the lines as given (compressed: the header as frame 1,
// then a frame per historicalLinesPerFrame lines). fixtures.WriteHistorical
// is the published form, for other packages.
func writeHistorical(t testing.TB, path string, h *Header, lines [][]byte, c Compression) {
	t.Helper()
	head := append(h.AppendJSON(nil), '\n')
	var out []byte
	if c == Plain {
		out = head
		for _, l := range lines {
			out = append(append(out, l...), '\n')
		}
	} else {
		out = encodeFrame(nil, head)
		for i := 0; i < len(lines); i += historicalLinesPerFrame {
			var plain []byte
			for _, l := range lines[i:min(i+historicalLinesPerFrame, len(lines))] {
				plain = append(append(plain, l...), '\n')
			}
			out = encodeFrame(out, plain)
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

const historicalLinesPerFrame = 16

// historicalLines returns the event lines of a small log of version v and
// the seq and type of every event a reader returns (packed rows once, at
// their first seq).
func historicalLines(v int) (lines [][]byte, seqs []int64, types []string) {
	seq := int64(0)
	add := func(line string, n int64) {
		lines = append(lines, []byte(line))
		typ := strings.SplitN(line, `"`, 5)[3]
		seqs = append(seqs, seq)
		types = append(types, typ)
		seq += n
	}
	ev := func(typ, data string, surface string) {
		line := fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":%s`, typ, seq, 1786870000000+seq, data)
		if surface != "" {
			line += `,"surfaceOp":` + surface
		}
		add(line+"}", 1)
	}
	user := `{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"u1"}`
	ev("turn/start", `{"turn":1}`, "")
	ev("step/start", `{"turn":1,"step":1}`, "")
	if v >= 3 {
		ev("system/message", `{"turn":1,"step":1,"message":{"role":"system","content":[],"source":{"kind":"plugin","plugin":"@deepseek-ai/dsh-system-prompt"},"id":"s0"}}`, `"append"`)
	}
	ev("user/message", user, `"append"`)
	header := `{"header":{"config":{"provider":"p","model":"m"}},"reason":"initial"}`
	if v <= 2 {
		header = `{"header":{"config":{"provider":"p","model":"m"},"system":"You are terse."},"reason":"initial"}`
	}
	ev("request/header", header, "")
	if v <= 1 {
		add(fmt.Sprintf(`{"type":"text-chunks","seq0":%d,"time0":%d,"data":{"turn":1,"step":1,"index":0,"dt":[1,2],"texts":["a","b","c"]}}`, seq, 1786870000000+seq), 3)
		ev("assistant/chunk", `{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"d"}}`, "")
		ev("assistant/message", `{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"abcd"}],"source":{"kind":"model"},"id":"a1"}}`, `"append"`)
	} else {
		ev("assistant/message", `{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"abc"}],"source":{"kind":"model"},"id":"a1"},"stream":[{"type":"text-chunks","time0":5,"index":0,"dt":[1,2],"texts":["a","b","c"]}]}`, `"append"`)
	}
	if v >= 3 {
		ev("user/message", `{"content":[{"type":"text","text":"summary"}],"source":{"kind":"plugin","plugin":"compact"},"role":"user","id":"cp"}`,
			fmt.Sprintf(`{"op":"replace","startSeq":%d,"endSeq":%d}`, 3, seq-1))
	}
	ev("step/end", `{"turn":1,"step":1}`, "")
	ev("turn/end", `{"turn":1,"reason":{"kind":"completed"}}`, "")
	return lines, seqs, types
}

func TestReadHistoricalEveryVersion(t *testing.T) {
	for v := 0; v <= CurrentVersion; v++ {
		for _, comp := range []Compression{Plain, Zstd} {
			t.Run(fmt.Sprintf("v%d-%s", v, comp), func(t *testing.T) {
				dir := t.TempDir()
				h := &Header{Type: SessionLog, Version: v, ID: "s1", CreatedAt: 1786870000000, Cwd: "/home/u/p"}
				if v <= 1 {
					n := int64(0)
					h.SeedLength = &n
				}
				lines, seqs, types := historicalLines(v)
				if v == CurrentVersion {
					// V4 tool results and sources; the rest is admissible as is.
					lines, seqs, types = lines[:0], nil, nil
					for i, e := range sampleEvents() {
						e.Seq = int64(i)
						lines = append(lines, e.AppendJSON(nil))
						seqs, types = append(seqs, e.Seq), append(types, e.Type)
					}
				}
				path := filepath.Join(dir, "sub", FileName("s1", v, comp))
				writeHistorical(t, path, h, lines, comp)
				evs, st, err := readAll(t, path)
				if err != nil {
					t.Fatal(err)
				}
				if len(evs) != len(seqs) {
					t.Fatalf("read %d events, want %d", len(evs), len(seqs))
				}
				for i, e := range evs {
					if e.Seq != seqs[i] || e.Type != types[i] || string(e.Raw) != string(lines[i]) {
						t.Errorf("event %d: seq %d %s %s, want seq %d %s", i, e.Seq, e.Type, e.Raw, seqs[i], types[i])
					}
					if e.Type == "text-chunks" && e.Packed != 3 {
						t.Errorf("packed row stands for %d events, want 3", e.Packed)
					}
				}
				if st.TornTail || st.Lines != int64(len(lines))+1 {
					t.Errorf("stats %+v", st)
				}
				if comp == Zstd {
					if want := 1 + (len(lines)+historicalLinesPerFrame-1)/historicalLinesPerFrame; st.Frames != int64(want) {
						t.Errorf("frames = %d, want %d", st.Frames, want)
					}
				}
				r, err := Open(path, ReaderOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got := r.Header().Version; got != v {
					t.Errorf("header version %d", got)
				}
				r.Close()
				if comp == Zstd {
					if zstd, err := exec.LookPath("zstd"); err == nil {
						out, err := exec.Command(zstd, "-dc", path).Output()
						if err != nil || strings.Count(string(out), "\n") != len(lines)+1 {
							t.Errorf("zstd -dc: %v, %d lines", err, strings.Count(string(out), "\n"))
						}
					}
				}
			})
		}
	}
}

func TestReadHistoricalManyFrames(t *testing.T) {
	dir := t.TempDir()
	var lines [][]byte
	for i := 0; i < 40; i++ {
		lines = append(lines, []byte(fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":1,"data":{"turn":%d}}`, i, i+1)))
	}
	path := filepath.Join(dir, "s.v3.jsonl.zst")
	h := &Header{Type: SessionLog, Version: 3, ID: "s", CreatedAt: 1}
	writeHistorical(t, path, h, lines, Zstd)
	evs, st, err := readAll(t, path)
	if err != nil || len(evs) != 40 || st.Frames != 1+3 {
		t.Fatalf("%d events, %d frames, %v", len(evs), st.Frames, err)
	}
}

// TestReadGarbageLine: a garbage line in an old log is found where it is.
func TestReadGarbageLine(t *testing.T) {
	dir := t.TempDir()
	h := &Header{Type: SessionLog, Version: 4, ID: "s", CreatedAt: 1}
	// Verbatim: a garbage line is written as given, and the reader finds it.
	path := filepath.Join(dir, "g.v4.jsonl")
	lines := [][]byte{[]byte(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`), []byte("\x00garbage{"),
		[]byte(`{"type":"turn/end","seq":2,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}`)}
	writeHistorical(t, path, h, lines, Plain)
	_, _, err := readAll(t, path)
	var fe *FormatError
	if !errors.As(err, &fe) || !errors.Is(err, ErrCorrupt) || fe.Pos.Line != 3 {
		t.Fatalf("garbage line: %v", err)
	}
}
