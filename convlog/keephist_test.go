package convlog

import (
	"bytes"
	"encoding/base64"
	"io"
	"math/rand"
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
	for i := 0; ; i++ {
		e, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
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
