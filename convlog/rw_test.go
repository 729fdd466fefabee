package convlog

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestWriteReadRoundTrip(t *testing.T) {
	for _, comp := range []Compression{Plain, Zstd} {
		t.Run(comp.String(), func(t *testing.T) {
			dir := t.TempDir()
			evs := sampleEvents()
			path := writeLog(t, dir, FileName("s1", 4, comp), comp, evs[:3], evs[3:5], evs[5:])
			got, st, err := readAll(t, path)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(evs) {
				t.Fatalf("read %d events, wrote %d", len(got), len(evs))
			}
			for i, e := range got {
				if e.Seq != int64(i) || e.Type != evs[i].Type || !bytes.Equal(e.Data, evs[i].Data) {
					t.Errorf("event %d = %s seq %d %s, want %s %s", i, e.Type, e.Seq, e.Data, evs[i].Type, evs[i].Data)
				}
			}
			if st.TornTail || st.Events != int64(len(evs)) || st.Lines != int64(len(evs))+1 {
				t.Errorf("stats = %+v", st)
			}
			if comp == Zstd && st.Frames != 4 {
				t.Errorf("frames = %d, want header frame + 3 batches", st.Frames)
			}
			if comp == Plain && !bytes.Contains(mustRead(t, path), []byte(`List the files <&>`)) {
				t.Errorf("HTML characters were escaped:\n%s", mustRead(t, path))
			}
		})
	}
}

func TestCreatePrivateAndNoOverwrite(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "a", "b")
	path := filepath.Join(dir, "s1.v4.jsonl.zst")
	w, err := Create(path, testHeader("s1"), sampleEvents(), WriterOptions{Compression: Zstd})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700, filepath.Dir(dir): 0o700} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %v, want %v", p, fi.Mode().Perm(), want)
		}
	}
	before := mustRead(t, path)
	if _, err := Create(path, testHeader("s1"), nil, WriterOptions{Compression: Zstd}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second Create: err = %v, want ErrExist", err)
	}
	if !bytes.Equal(before, mustRead(t, path)) {
		t.Fatal("second Create changed the existing log")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("directory holds %d entries, want only the log (no temp files)", len(ents))
	}
}

func TestZstdToolInterop(t *testing.T) {
	zstdBin, err := exec.LookPath("zstd")
	if err != nil {
		t.Skip("zstd tool not installed")
	}
	dir := t.TempDir()
	evs := sampleEvents()
	path := writeLog(t, dir, "s1.v4.jsonl.zst", Zstd, evs[:2], evs[2:])
	out, err := exec.Command(zstdBin, "-dc", path).Output()
	if err != nil {
		t.Fatalf("zstd -dc: %v", err)
	}
	plain := writeLog(t, dir, "s1.v4.jsonl", Plain, evs[:2], evs[2:])
	if !bytes.Equal(out, mustRead(t, plain)) {
		t.Fatalf("zstd -dc output differs from the plain log:\n%s\n---\n%s", out, mustRead(t, plain))
	}
	// Frames written by the zstd tool: header frame, then one frame for
	// the rest, concatenated as the format says.
	lines := bytes.SplitAfter(out, []byte("\n"))
	os.WriteFile(filepath.Join(dir, "h"), lines[0], 0o600)
	os.WriteFile(filepath.Join(dir, "b"), bytes.Join(lines[1:], nil), 0o600)
	for _, n := range []string{"h", "b"} {
		if err := exec.Command(zstdBin, "-q", "-f", filepath.Join(dir, n)).Run(); err != nil {
			t.Fatal(err)
		}
	}
	cat := append(mustRead(t, filepath.Join(dir, "h.zst")), mustRead(t, filepath.Join(dir, "b.zst"))...)
	tool := filepath.Join(dir, "tool.v4.jsonl.zst")
	os.WriteFile(tool, cat, 0o600)
	got, st, err := readAll(t, tool)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(evs) || st.Frames != 2 {
		t.Fatalf("read %d events in %d frames from zstd-tool frames", len(got), st.Frames)
	}
}

func TestTornTails(t *testing.T) {
	evs := sampleEvents()
	t.Run("plain", func(t *testing.T) {
		dir := t.TempDir()
		path := writeLog(t, dir, "s1.v4.jsonl", Plain, evs)
		full := mustRead(t, path)
		torn := append(bytes.Clone(full), []byte(`{"type":"turn/start","seq":7,"ti`)...)
		os.WriteFile(path, torn, 0o600)
		got, st, err := readAll(t, path)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(evs) || !st.TornTail || st.CommittedBytes != int64(len(full)) {
			t.Fatalf("events %d stats %+v", len(got), st)
		}
		if !bytes.Equal(mustRead(t, path), torn) {
			t.Fatal("reading changed the file")
		}
		// A writer cuts the torn tail before its first append.
		w, err := OpenAppend(path, WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(mustRead(t, path), torn) {
			t.Fatal("opening for append changed the file before any append")
		}
		if err := w.Append(sampleTurn(2)[:1]); err != nil {
			t.Fatal(err)
		}
		w.Close()
		got, st, err = readAll(t, path)
		if err != nil || st.TornTail || len(got) != len(evs)+1 || got[len(evs)].Seq != int64(len(evs)) {
			t.Fatalf("after append: %d events, stats %+v, err %v", len(got), st, err)
		}
	})
	t.Run("zstd", func(t *testing.T) {
		dir := t.TempDir()
		path := writeLog(t, dir, "s1.v4.jsonl.zst", Zstd, evs[:3], evs[3:])
		full := mustRead(t, path)
		// Cut the last frame inside its checksum: its lines are recovered.
		os.WriteFile(path, full[:len(full)-2], 0o600)
		got, st, err := readAll(t, path)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(evs) || !st.TornTail || st.RecoveredLines != int64(len(evs)-3) {
			t.Fatalf("events %d stats %+v", len(got), st)
		}
		w, err := OpenAppend(path, WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Append(sampleTurn(2)[:1]); err != nil {
			t.Fatal(err)
		}
		w.Close()
		got, st, err = readAll(t, path)
		if err != nil || st.TornTail || len(got) != len(evs)+1 {
			t.Fatalf("after repair and append: %d events, stats %+v, err %v", len(got), st, err)
		}
		if out, err := exec.Command("zstd", "-t", path).CombinedOutput(); err == nil || !strings.Contains(err.Error(), "not found") {
			_ = out // the repaired file must be a valid zstd stream when the tool exists
			if err != nil {
				t.Fatalf("zstd -t on repaired log: %v %s", err, out)
			}
		}
	})
}
