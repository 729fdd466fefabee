package convlog

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLowMemoryKeepsHistory: a LowMemory reader (a migration's) streams
// the large frames of long lines with one decoder, whose history is made
// once for windows up to keepHistBytes and kept through the small frames
// between them, and dropped past that; the lines read are those written,
// and those a reader without LowMemory reads.
func TestLowMemoryKeepsHistory(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	random := func(n int) string {
		b := make([]byte, n*3/4)
		rng.Read(b)
		return base64.StdEncoding.EncodeToString(b)
	}
	compressible := func(n int) string { return strings.Repeat("all work and no play. ", n/22) }
	// Random text frames compress to more than smallFrameBytes and are
	// streamed; the compressible ones are decoded whole, their text more
	// than keepBufBytes.
	texts := []string{
		random(3 << 20), compressible(3 << 20), random(6 << 20), compressible(3 << 20),
		random(10 << 20), compressible(3 << 20), random(3 << 19),
	}
	var batches [][]Event
	for i, s := range texts {
		batches = append(batches, []Event{{Type: TypeUserMessage, Seq: int64(i + 1), Time: int64(1000 + i),
			Data: userMsg("u"+string(rune('a'+i)), s), SurfaceOp: &SurfaceOp{}}})
	}
	path := writeLog(t, t.TempDir(), "s1.v4.jsonl.zst", Zstd, batches...)

	r, err := Open(path, ReaderOptions{LowMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []Event
	var first any
	for e, err := range r.Events() {
		if err != nil {
			t.Fatal(err)
		}
		i := len(got)
		got = append(got, e.Clone())
		switch i {
		case 0:
			if r.dec == nil || r.decWin != keepHistBytes {
				t.Fatalf("after the first large frame: decoder %v, history for a window of %d bytes, want %d", r.dec != nil, r.decWin, keepHistBytes)
			}
			first = r.dec
		case 1, 2, 3:
			if any(r.dec) != first || r.decWin != keepHistBytes {
				t.Fatalf("line %d: the decoder and its history were not kept (window %d)", i+1, r.decWin)
			}
		case 4:
			// A frame this large states a window in its header.
			if r.decWin >= 0 && r.decWin <= keepHistBytes {
				t.Fatalf("line 5: window %d, want the frame's or -1", r.decWin)
			}
		case 5, 6:
			if any(r.dec) == first {
				t.Fatalf("line %d: a history for a window of %d bytes was kept through a frame decoded whole", i+1, r.decWin)
			}
		}
	}
	want, _, err := readAll(t, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(texts) || len(want) != len(texts) {
		t.Fatalf("read %d and %d events, want %d", len(got), len(want), len(texts))
	}
	for i := range got {
		if !bytes.Equal(got[i].Data, batches[i][0].Data) || !bytes.Equal(want[i].Data, got[i].Data) || got[i].Seq != want[i].Seq {
			t.Fatalf("event %d differs from the one written", i+1)
		}
	}
}

// TestLowMemoryOnTheZstdToolsFrames: a log the zstd tool compressed line
// by line (its frames concatenated: frames that state their content
// size and a window of their own, of megabytes and of a few bytes in turn)
// reads as the same events through a LowMemory reader as through a reader
// without LowMemory; such frames state their window apart from their size,
// so the LowMemory reader does not keep one history across them.
func TestLowMemoryOnTheZstdToolsFrames(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	random := func(n int) string {
		b := make([]byte, n*3/4)
		rng.Read(b)
		return base64.StdEncoding.EncodeToString(b)
	}
	var batches [][]Event
	for i, n := range []int{3 << 20, 200, 6 << 20, 100, 2 << 20, 7 << 20, 50} {
		batches = append(batches, []Event{{Type: TypeUserMessage, Seq: int64(i + 1), Time: int64(1000 + i),
			Data: userMsg("u"+string(rune('a'+i)), random(n)), SurfaceOp: &SurfaceOp{}}})
	}
	plain, err := os.ReadFile(writeLog(t, t.TempDir(), "s1.v4.jsonl", Plain, batches...))
	if err != nil {
		t.Fatal(err)
	}
	var log []byte
	for _, line := range bytes.SplitAfter(plain, []byte("\n")) {
		if len(line) > 0 {
			log = append(log, zstdTool(t, line, fmt.Sprintf("--stream-size=%d", len(line)))...)
		}
	}
	path := filepath.Join(t.TempDir(), "s1.v4.jsonl.zst")
	if err := os.WriteFile(path, log, 0o600); err != nil {
		t.Fatal(err)
	}
	want, _, err := readAll(t, path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Open(path, ReaderOptions{LowMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []Event
	for e, err := range r.Events() {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, e.Clone())
		if len(got) == 1 && r.decWin != -1 {
			// The tool's frames state a window apart from their size:
			// the history is not kept for them (keepHistory).
			t.Fatalf("after the first frame: a history for a window of %d bytes, want none stated (-1)", r.decWin)
		}
	}
	if r.Stats().Frames != int64(len(batches)+1) {
		t.Fatalf("%d frames, want one a line (%d)", r.Stats().Frames, len(batches)+1)
	}
	if len(got) != len(batches) || len(want) != len(batches) {
		t.Fatalf("read %d and %d events, want %d", len(got), len(want), len(batches))
	}
	for i := range got {
		if !bytes.Equal(got[i].Data, batches[i][0].Data) || !bytes.Equal(want[i].Data, got[i].Data) {
			t.Fatalf("event %d differs from the one written", i+1)
		}
	}
}
