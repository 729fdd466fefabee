package convlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// sizelessFrames compresses each chunk as one frame: small ones as the log
// writer does (which states no content size below 256 bytes), large ones
// (more than a block) with the stream encoder, which does not state it
// either.
func sizelessFrames(t *testing.T, chunks ...[]byte) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, c := range chunks {
		if len(c) < 64<<10 {
			out.Write(encodeFrame(nil, c))
			continue
		}
		w, err := zstd.NewWriter(&out, zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(c); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// noSizeLog writes the plain log at plain again as a compressed log: the
// header alone, then the events in frames of perFrame lines (0: all in
// one); see sizelessFrames.
func noSizeLog(t *testing.T, plain, name string, perFrame int) string {
	t.Helper()
	lines := bytes.SplitAfter(mustRead(t, plain), []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	chunks := [][]byte{lines[0]}
	var cur []byte
	for k, l := range lines[1:] {
		cur = append(cur, l...)
		if (perFrame > 0 && (k+1)%perFrame == 0) || k == len(lines)-2 {
			chunks = append(chunks, cur)
			cur = nil
		}
	}
	data := sizelessFrames(t, chunks...)
	p := filepath.Join(filepath.Dir(plain), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func sameEvents(t *testing.T, got, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Type != w.Type || g.Seq != w.Seq || g.Time != w.Time || !bytes.Equal(g.Data, w.Data) || !bytes.Equal(g.Raw, w.Raw) {
			t.Fatalf("event %d = %.200s, want %.200s", i, g.Raw, w.Raw)
		}
	}
}

// TestFramesWithoutContentSize: such frames are decoded whole like the
// others, and what does not decode whole (too large, damaged) is read as a
// stream, as it always was.
func TestFramesWithoutContentSize(t *testing.T) {
	dir := t.TempDir()
	var batches [][]Event
	for i := range 30 {
		batches = append(batches, sampleTurn(int64(i+1)))
	}
	plain := writeLog(t, dir, "s1.v4.jsonl", Plain, batches...)
	want, wantStats, err := readAll(t, plain)
	if err != nil {
		t.Fatal(err)
	}

	small := noSizeLog(t, plain, "small.v4.jsonl.zst", 1)
	frames := scanFrames(t, small)
	var sizeless []Frame
	for _, f := range frames[1:] {
		if f.ContentSize < 0 {
			sizeless = append(sizeless, f)
		}
	}
	if len(sizeless) < 30 {
		t.Fatalf("%d of %d frames state no content size; want more for the test", len(sizeless), len(frames))
	}
	got, st, err := readAll(t, small)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got, want)
	if st.Events != wantStats.Events || st.PlainBytes != wantStats.PlainBytes || st.Frames != int64(len(frames)) {
		t.Fatalf("stats %+v, plain %+v", st, wantStats)
	}

	// A frame that decodes to more than a whole decode takes.
	var big [][]Event
	text := strings.Repeat("all work and no play makes jack a dull boy ", 200)
	for i := range 1000 {
		evs := sampleTurn(int64(i + 1))
		evs[2].Data = userMsg(fmt.Sprint("u", i), text)
		big = append(big, evs)
	}
	bigPlain := writeLog(t, dir, "s2.v4.jsonl", Plain, big...)
	if fi, _ := os.Stat(bigPlain); fi.Size() <= 2*smallFrameContent {
		t.Fatalf("plain log of %d bytes is too small for the test", fi.Size())
	}
	wantBig, _, err := readAll(t, bigPlain)
	if err != nil {
		t.Fatal(err)
	}
	bigZst := noSizeLog(t, bigPlain, "big.v4.jsonl.zst", 0)
	if f := scanFrames(t, bigZst)[1]; f.Size > smallFrameBytes || f.ContentSize >= 0 {
		t.Fatalf("frame %+v: want one small frame without content size", f)
	}
	got, _, err = readAll(t, bigZst)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got, wantBig)
	// Damaged near its end, it gives the lines of its blocks before the
	// damage, as a stream does, then the failure.
	badBig := mustRead(t, bigZst)
	badBig[len(badBig)-40] ^= 0x55
	os.WriteFile(bigZst, badBig, 0o600)
	got, _, err = readAll(t, bigZst)
	if !errors.Is(err, ErrCorrupt) || len(got) == 0 || len(got) >= len(wantBig) {
		t.Fatalf("damaged large frame: %d events, %v", len(got), err)
	}
	sameEvents(t, got, wantBig[:len(got)])

	// A damaged frame: the events of the frames before it, then the
	// frame's failure.
	victim := sizeless[len(sizeless)/2]
	bad := mustRead(t, small)
	bad[victim.Offset+victim.Size-6] ^= 0x55 // in the last block, before the checksum
	damaged := filepath.Join(dir, "damaged.v4.jsonl.zst")
	os.WriteFile(damaged, bad, 0o600)
	got, _, err = readAll(t, damaged)
	var fe *FormatError
	if !errors.As(err, &fe) || !errors.Is(err, ErrCorrupt) || fe.Pos.Frame != victim.Index ||
		!strings.Contains(err.Error(), "frame failed validation") {
		t.Fatalf("damaged frame: err = %v, want a corrupt frame %d", err, victim.Index)
	}
	// One event per frame: those of frames 2 .. victim-1.
	if n := int(victim.Index) - 2; len(got) != n {
		t.Fatalf("damaged frame %d: %d events before the failure, want %d", victim.Index, len(got), n)
	}
	sameEvents(t, got, want[:len(got)])
}

func scanFrames(t *testing.T, path string) []Frame {
	t.Helper()
	data := mustRead(t, path)
	s := NewFrameScanner(bytes.NewReader(data), int64(len(data)))
	var frames []Frame
	for f, err := range s.Frames() {
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f)
	}
	return frames
}

// TestOpenSmallLogWhole: a small log is read in one go, and the reader
// reports the size and modification time the file had.
func TestOpenSmallLogWhole(t *testing.T) {
	dir := t.TempDir()
	for _, comp := range []Compression{Plain, Zstd} {
		name := "s1.v4.jsonl"
		if comp == Zstd {
			name += ".zst"
		}
		p := writeLog(t, dir, name, comp, sampleTurn(1), sampleTurn(2))
		r, err := Open(p, ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := r.closer.(pooledBytes); !ok {
			t.Errorf("%s: small log not read whole", name)
		}
		n := 0
		for _, err := range r.Events() {
			if err != nil {
				t.Fatal(err)
			}
			n++
		}
		fi, _ := os.Lstat(p)
		if n != 14 || r.Stats().FileBytes != fi.Size() || !r.ModTime().Equal(fi.ModTime()) || r.ModTime().UnixNano() != fi.ModTime().UnixNano() {
			t.Errorf("%s: %d events, %d bytes, time %v; file %d bytes, time %v", name, n, r.Stats().FileBytes, r.ModTime(), fi.Size(), fi.ModTime())
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		// The file was closed at Open: it can go while the reader is
		// held.
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing.v4.jsonl"), ReaderOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing log: %v", err)
	}
}
