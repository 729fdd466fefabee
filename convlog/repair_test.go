package convlog

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestRepairKeepsRecoveredLines cuts zstd logs at every byte and repairs
// each torn tail that holds recovered lines. At the repair's crash point
// (its frames written, the file not yet cut) and after it, the file reads
// as every event the torn log held: a process killed mid-repair loses none.
// Tails longer than the fresh frames (a recovered frame of stored blocks)
// are padded, and the padding reads as a torn frame.
func TestRepairKeepsRecoveredLines(t *testing.T) {
	dir := t.TempDir()
	framed := mustRead(t, writeLog(t, dir, "s1.v4.jsonl.zst", Zstd, sampleTurn(1), sampleTurn(2)))
	plain := mustRead(t, writeLog(t, dir, "s2.v4.jsonl", Plain, sampleTurn(1), sampleTurn(2)))
	sources := [][]byte{framed, zframe(string(plain))} // the writer's frames; one frame for the whole log
	if _, err := exec.LookPath("zstd"); err == nil {
		sources = append(sources, zstdTool(t, plain)) // as `zstd FILE` writes it
	}
	defer func() { tornTailWritten = func() {} }()
	tried, padded := 0, 0
	repair := func(data []byte) {
		want, st, err := readBytes(t, data, Zstd)
		if err != nil || !st.TornTail || st.RecoveredLines == 0 {
			return
		}
		tried++
		path := filepath.Join(t.TempDir(), "s1.v4.jsonl.zst")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		w, err := OpenAppend(path, WriterOptions{})
		if err != nil {
			t.Fatalf("%d bytes: %v", len(data), err)
		}
		defer w.Close()
		var mid []byte
		tornTailWritten = func() { mid, _ = os.ReadFile(path) }
		if err := w.repairTornTail(); err != nil {
			t.Fatal(err)
		}
		final, _ := os.ReadFile(path)
		if mid == nil {
			t.Fatalf("%d bytes: the repair wrote no frames", len(data))
		}
		if len(mid) > len(final) {
			padded++
		}
		for _, c := range []struct {
			name string
			b    []byte
		}{{"at the crash point", mid}, {"after the repair", final}} {
			got, gst, err := readBytes(t, c.b, Zstd)
			if err != nil || len(got) != len(want) || (c.name == "after the repair" && gst.TornTail) {
				t.Fatalf("%d bytes, %s: %d events of %d, stats %+v, %v", len(data), c.name, len(got), len(want), gst, err)
			}
			for i := range got {
				if !bytes.Equal(got[i].Raw, want[i].Raw) {
					t.Fatalf("%d bytes, %s: event %d reads %s, want %s", len(data), c.name, i, got[i].Raw, want[i].Raw)
				}
			}
		}
	}
	for _, src := range sources {
		for cut := range len(src) + 1 {
			data := src[:cut]
			repair(data)
			// The same lines in a frame of stored blocks (a copy's), torn
			// in its checksum: a longer tail than the writer's frame.
			p, err := CommittedPrefix(Bytes(data), int64(len(data)), Zstd, "s1.v4.jsonl.zst")
			if err != nil || p.RecoveredLines == 0 {
				continue
			}
			cp := copyOf(t, p, data)
			repair(cp[:len(cp)-2])
		}
	}
	t.Logf("%d repairs with recovered lines, %d of them padded", tried, padded)
	if tried == 0 || padded == 0 {
		t.Fatalf("%d repairs with recovered lines, %d of them padded", tried, padded)
	}

	// A tail of stored blocks far longer than its fresh frames is padded
	// too, not cut before the frames are written.
	var turns [][]Event
	for n := range int64(2) {
		ev := sampleTurn(n + 1)
		for i := range ev {
			ev[i].Data = bytes.Replace(ev[i].Data, []byte("README.md"), bytes.Repeat([]byte("x"), 36<<20), 1)
		}
		turns = append(turns, ev)
	}
	big := mustRead(t, writeLog(t, dir, "s3.v4.jsonl", Plain, turns...))
	one := zframe(string(big))
	one = one[:len(one)-2]
	p, err := CommittedPrefix(Bytes(one), int64(len(one)), Zstd, "s1.v4.jsonl.zst")
	if err != nil || p.RecoveredLines == 0 {
		t.Fatalf("prefix %+v, %v", p, err)
	}
	stored := copyOf(t, p, one) // the recovered lines in stored blocks
	tried, padded = 0, 0
	repair(stored[:len(stored)-2])
	if tried != 1 || padded != 1 {
		t.Fatalf("a %d MB torn frame: %d repairs, %d padded; want it padded", len(stored)>>20, tried, padded)
	}
}
