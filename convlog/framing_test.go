package convlog

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// zstdTool compresses in with the zstd command-line tool (checksums on, as
// it writes them by default), skipping the test where it is missing.
func zstdTool(t *testing.T, in []byte, args ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Skip("zstd tool not installed")
	}
	cmd := exec.Command("zstd", append([]string{"-q", "-c"}, args...)...)
	cmd.Stdin = bytes.NewReader(in)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("zstd: %v: %s", err, stderr.String())
	}
	return out.Bytes()
}

// TestForeignFraming: logs the zstd tool recompressed (one frame for the
// whole text; frames cut at arbitrary bytes) read as the plain text they
// hold, say how their framing departs from the writer's, and take appends
// as canonical frames after the untouched original bytes.
func TestForeignFraming(t *testing.T) {
	dir := t.TempDir()
	plainPath := writeLog(t, dir, "s1.v4.jsonl", Plain, sampleTurn(1), sampleTurn(2))
	plain := mustRead(t, plainPath)
	want, _, err := readAll(t, plainPath)
	if err != nil {
		t.Fatal(err)
	}
	whole := zstdTool(t, plain)
	var cut []byte
	for off := 0; off < len(plain); off += 97 { // 97 bytes a frame: lines cut anywhere
		cut = append(cut, zstdTool(t, plain[off:min(off+97, len(plain))])...)
	}
	for _, c := range []struct {
		name, first string
		data        []byte
	}{
		{"one frame", "frame 1 holds more than the header line", whole},
		{"frames cut anywhere", "frame 1 at file byte 0 ends inside line 1", cut},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s1.v4.jsonl.zst")
			if err := os.WriteFile(path, c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			got, st, err := readAll(t, path)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) || st.TornTail || st.Framing.Canonical() || !bytes.HasPrefix([]byte(st.Framing.First), []byte(c.first)) {
				t.Fatalf("%d events of %d, stats %+v", len(got), len(want), st)
			}
			for i := range got {
				if !bytes.Equal(got[i].Raw, want[i].Raw) {
					t.Fatalf("event %d reads %s, want %s", i, got[i].Raw, want[i].Raw)
				}
			}
			w, err := OpenAppend(path, WriterOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Append(sampleTurn(3)); err != nil {
				t.Fatal(err)
			}
			w.Close()
			after := mustRead(t, path)
			if !bytes.HasPrefix(after, c.data) {
				t.Fatal("the append changed the original bytes")
			}
			got, st2, err := readAll(t, path)
			if err != nil || len(got) != len(want)+len(sampleTurn(3)) || st2.Frames != st.Frames+1 || st2.Framing.Departures != st.Framing.Departures {
				t.Fatalf("after the append: %d events, stats %+v, %v", len(got), st2, err)
			}
		})
	}

	// The tool's one frame of a log whose last line was torn: the torn line
	// is a torn tail inside a complete frame. A writer cuts the file at the
	// last frame start between two lines (here: the file's start is the
	// only one) and rewrites the complete lines as a fresh frame.
	t.Run("torn line in one frame", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "s1.v4.jsonl.zst")
		torn := append(append([]byte(nil), plain...), `{"type":"turn/st`...)
		if err := os.WriteFile(path, zstdTool(t, torn), 0o600); err != nil {
			t.Fatal(err)
		}
		got, st, err := readAll(t, path)
		if err != nil || len(got) != len(want) || !st.TornTail || st.CommittedBytes != 0 || st.RecoveredLines != int64(len(want))+1 {
			t.Fatalf("%d events, stats %+v, %v", len(got), st, err)
		}
		w, err := OpenAppend(path, WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Append(sampleTurn(3)[:1]); err != nil {
			t.Fatal(err)
		}
		w.Close()
		got, st, err = readAll(t, path)
		if err != nil || len(got) != len(want)+1 || st.TornTail || !st.Framing.Canonical() || st.Frames != 3 {
			t.Fatalf("after the repair: %d events, stats %+v, %v", len(got), st, err)
		}
	})
}
