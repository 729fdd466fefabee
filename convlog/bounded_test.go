package convlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// rleFrame is a zstd frame (no checksum) of n RLE blocks of 128 KiB of b:
// 4 bytes on disk for each 128 KiB it decodes to.
func rleFrame(b byte, n int) []byte {
	out := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 7 << 3} // no size, no checksum; 128 KiB window
	for i := range n {
		bh := uint32(maxBlockSize)<<3 | 1<<1 // an RLE block
		if i == n-1 {
			bh |= 1
		}
		out = append(out, byte(bh), byte(bh>>8), byte(bh>>16), b)
	}
	return out
}

// TestDecompressionBombs: every decompression is bounded. A 3.2 MB log
// whose second frame decodes to 100 GiB of one byte is read to the line
// limit and no further; a frame of 100 GiB of newlines stops a strict
// reader at its first line and, through OnProblem, a reader that calls
// Stop; valid events beyond the decode limit are refused as a bomb.
func TestDecompressionBombs(t *testing.T) {
	dir := t.TempDir()
	hdr := zframe(hdrV4 + "\n")
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	bomb := write("a.v4.jsonl.zst", append(bytes.Clone(hdr), rleFrame('a', 819200)...))
	if fi, _ := os.Stat(bomb); fi.Size() > 3300000 {
		t.Fatalf("the bomb is %d bytes", fi.Size())
	}
	start := time.Now()
	_, _, _, err := readLogStrict(bomb, ReaderOptions{})
	var fe *FormatError
	if !errors.As(err, &fe) || !errors.Is(err, ErrCorrupt) || fe.Pos.Line != 2 || fe.Pos.Frame != 2 ||
		!strings.Contains(err.Error(), "line is longer than the limit of 67108864 bytes (the log is not decoded past it)") {
		t.Fatalf("one-byte bomb: %v", err)
	}
	t.Logf("one-byte bomb refused in %v", time.Since(start))

	nl := write("n.v4.jsonl.zst", append(bytes.Clone(hdr), rleFrame('\n', 819200)...))
	if _, _, _, err := readLogStrict(nl, ReaderOptions{}); err == nil || !strings.Contains(err.Error(), "line 2 column 1, frame 2 at file byte") {
		t.Fatalf("newline bomb, strict: %v", err)
	}
	var r *Reader
	probs := 0
	r, err = Open(nl, ReaderOptions{OnProblem: func(*FormatError) {
		if probs++; probs == 1000 {
			r.Stop()
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, err = range r.Events() {
	}
	r.Close()
	if err != nil || probs != 1000 {
		t.Fatalf("newline bomb with Stop: %v after %d problems", err, probs)
	}

	// Valid events, a 1 MiB line each, compressing to a few hundred bytes.
	var batches [][]string
	for i := range 40 {
		batches = append(batches, []string{fmt.Sprintf(`{"type":"x/pad","seq":%d,"time":1,"data":%q,"ignorable":true}`, i, strings.Repeat("A", 1<<20))})
	}
	valid := write("v.v4.jsonl.zst", zlog(batches...))
	if evs, _, _, err := readLogStrict(valid, ReaderOptions{}); err != nil || len(evs) != 40 {
		t.Fatalf("under the default limit: %d events, %v", len(evs), err)
	}
	evs, _, _, err := readLogStrict(valid, ReaderOptions{MaxPlainBytes: 10 << 20})
	if !errors.As(err, &fe) || len(evs) != 9 || fe.Pos.Frame != 11 ||
		!strings.Contains(err.Error(), "the log decodes to more than 10485760 bytes (the limit set): refused as a decompression bomb") {
		t.Fatalf("over the limit: %d events, %v", len(evs), err)
	}
}

// TestNoDecodeLimit: a negative MaxPlainBytes reads a compressed log
// without the limit.
func TestNoDecodeLimit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s1.v4.jsonl.zst")
	os.WriteFile(p, zlog([]string{lTurnStart(0)}, []string{lStepStart(1)}), 0o600)
	if evs, _, _, err := readLogStrict(p, ReaderOptions{MaxPlainBytes: -1}); err != nil || len(evs) != 2 {
		t.Fatalf("%d events, %v", len(evs), err)
	}
	if evs, _, _, err := readLogStrict(p, ReaderOptions{MaxPlainBytes: 1}); err == nil || len(evs) != 0 || !strings.Contains(err.Error(), "decompression bomb") {
		t.Fatalf("limit of 1 byte: %d events, %v", len(evs), err)
	}
}
