package convlog

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestEndsLine: whether a frame's text ends with a newline, for frames
// that declare their size (the small ones decoded whole, the others by
// pooled decoders, called in turn so that a decoder's state from one
// frame would show in the next) and frames that do not (a stream
// encoder's), within the budget or past it, and for frames that do not
// decode: corrupt, a wrong checksum, a declared size the content does
// not have.
func TestEndsLine(t *testing.T) {
	sized := func(s string) []byte {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		return e.EncodeAll([]byte(s), nil)
	}
	streamed := func(s string, opts ...zstd.EOption) []byte {
		var b bytes.Buffer
		e, err := zstd.NewWriter(&b, append([]zstd.EOption{zstd.WithEncoderConcurrency(1)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		e.Write([]byte(s))
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	long := strings.Repeat("a tool's output line\n", 20000) // 420,000 bytes
	// Text that does not compress: its frame is larger than the half of
	// endsLine's buffer that a frame is read into whole.
	rng := rand.New(rand.NewPCG(1, 2))
	noise := make([]byte, 48<<10)
	for i := range noise {
		noise[i] = 'a' + byte(rng.IntN(26))
	}
	noisy := string(noise) + "\n"
	smallWindow := func(s string) []byte { return streamed(s, zstd.WithWindowSize(1<<20)) }
	// Frames of a few kilobytes and more declare a single segment of their
	// size (those of less than a kilobyte do not).
	pad := strings.Repeat("{\"type\":\"step/start\"}\n", 200)
	corrupt := sized("a line\nand another\n")
	corrupt[len(corrupt)-6] ^= 0xff
	// A frame decoded whole whose checksum is wrong.
	badSum := sized(pad)
	badSum[len(badSum)-1] ^= 0xff
	// Single-segment frames holding one raw block "abcdefghi\n" that
	// declare 5 and 20 bytes of text: the block is the one to trust of
	// neither.
	lying := func(declared byte) []byte {
		const n = 10
		const bh = 1 | n<<3 // last, raw, 10 bytes
		return append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x20, declared, bh, 0, 0}, "abcdefghi\n"...)
	}
	// frames by how endsLine decodes them: whole, by a pooled decoder, by
	// a decoder of its own
	paths := map[string]int{}
	for round := range 2 {
		for _, tc := range []struct {
			name   string
			frame  []byte
			budget int64
			want   bool
		}{
			{"sized, ends a line", sized(pad + "{\"a\":1}\n{\"b\":2}\n"), 1 << 20, true},
			{"sized, ends inside a line", sized(pad + "{\"a\":1}\n{\"b\":"), 1 << 20, false},
			// Under 256 bytes: a window of 1 KiB and no size declared.
			{"sized, tiny, ends a line", sized("{\"a\":1}\n"), 1 << 20, true},
			{"sized, tiny, past the budget", sized("{\"a\":1}\n"), 4, false},
			{"sized, tiny, ends inside a line", sized("{\"a\":1}\n{"), 1 << 20, false},
			{"sized, empty", sized(""), 1 << 20, false},
			{"sized, long, ends a line", sized(long), 1 << 20, true},
			{"sized, long, past the budget", sized(long), 1000, false},
			{"sized, exactly the budget", sized(pad), int64(len(pad)), false},
			{"sized, one byte under the budget", sized(pad), int64(len(pad)) + 1, true},
			{"streamed, ends a line", streamed(long), 1 << 20, true},
			{"streamed, ends inside a line", streamed(long + "{\"c\""), 1 << 20, false},
			{"streamed, past the budget", streamed(long), 4096, false},
			{"streamed, 1 MiB window, ends a line", smallWindow(long), 1 << 20, true},
			{"streamed, 1 MiB window, ends inside a line", smallWindow(long + "{\"c\""), 1 << 20, false},
			{"sized, larger than the read buffer, ends a line", sized(noisy), 1 << 20, true},
			{"sized, larger than the read buffer, ends inside a line", sized(noisy + "{"), 1 << 20, false},
			{"sized, larger than the read buffer, past the budget", sized(noisy), 40 << 10, false},
			{"corrupt", corrupt, 1 << 20, false},
			{"sized, a wrong checksum", badSum, 1 << 20, false},
			{"declares less text than it holds", lying(5), 1 << 20, false},
			{"declares more text than it holds", lying(20), 1 << 20, false},
			{"declares the text it holds", lying(10), 1 << 20, true},
		} {
			f, err := NewFrameScanner(Bytes(tc.frame), int64(len(tc.frame))).next()
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			switch {
			case decodedWhole(f):
				paths["whole"]++
			case pooledFrame(f):
				paths["pooled"]++
			default:
				paths["own"]++
			}
			if got := endsLine(bytes.NewReader(tc.frame), f, tc.budget); got != tc.want {
				t.Errorf("round %d, %s: endsLine = %v, want %v", round, tc.name, got, tc.want)
			}
		}
	}
	if paths["whole"] == 0 || paths["pooled"] == 0 || paths["own"] == 0 {
		t.Errorf("frames decoded whole, by a pooled decoder, by a decoder of their own: %v; want each way", paths)
	}
}

// TestEndsLineZstdTool: frames the zstd tool wrote, with the size
// declared (--stream-size: a single segment, decoded by a pooled decoder)
// and without, ending a line or inside one; streamed with a window set
// (--zstd=wlog): 128 KiB, decoded by a pooled decoder, and 16 MiB, by a
// decoder of its own.
func TestEndsLineZstdTool(t *testing.T) {
	text := []byte(strings.Repeat("{\"type\":\"tool/result\",\"data\":\"output\"}\n", 300))
	cut := text[:len(text)-10]
	for _, tc := range []struct {
		name   string
		text   []byte
		sized  bool
		wlog   int  // --zstd=wlog, 0: the tool's own
		pooled bool // with wlog: the decoder endsLine takes
		want   bool
	}{
		{"sized, ends a line", text, true, 0, true, true},
		{"sized, ends inside a line", cut, true, 0, true, false},
		{"streamed, ends a line", text, false, 0, false, true},
		{"streamed, ends inside a line", cut, false, 0, false, false},
		{"streamed, 128 KiB window, ends a line", text, false, 17, true, true},
		{"streamed, 128 KiB window, ends inside a line", cut, false, 17, true, false},
		{"streamed, 16 MiB window, ends a line", text, false, 24, false, true},
		{"streamed, 16 MiB window, ends inside a line", cut, false, 24, false, false},
	} {
		var args []string
		if tc.sized {
			args = append(args, fmt.Sprintf("--stream-size=%d", len(tc.text)))
		}
		if tc.wlog > 0 {
			args = append(args, fmt.Sprintf("--zstd=wlog=%d", tc.wlog))
		}
		frame := zstdTool(t, tc.text, args...)
		f, err := NewFrameScanner(Bytes(frame), int64(len(frame))).next()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if single := f.fhd&0x20 != 0 && f.ContentSize >= 0; single != tc.sized {
			t.Fatalf("%s: the frame declares a single segment of its size: %v", tc.name, single)
		}
		if (tc.sized || tc.wlog > 0) && pooledFrame(f) != tc.pooled {
			t.Fatalf("%s: decoded by a pooled decoder: %v, want %v (window %d)", tc.name, pooledFrame(f), tc.pooled, f.window)
		}
		for round := range 2 {
			if got := endsLine(bytes.NewReader(frame), f, 1<<20); got != tc.want {
				t.Errorf("round %d, %s: endsLine = %v, want %v", round, tc.name, got, tc.want)
			}
		}
	}
}

// BenchmarkCommittedPrefixSmall is the committed prefix of a small
// compressed log held in memory, as backup and export take it for each
// log: one frame of 8 KiB, decoded to see that it ends a line.
func BenchmarkCommittedPrefixSmall(b *testing.B) {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("{\"type\":\"assistant/message\",\"seq\":1,\"data\":{\"text\":\"a line of an answer\"}}\n", 100)
	log := e.EncodeAll([]byte(text), nil)
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		p, err := CommittedPrefix(Bytes(log), int64(len(log)), Zstd, "bench.v4.jsonl.zst")
		if err != nil || p.Bytes != int64(len(log)) || p.RecoveredLines != 0 {
			b.Fatalf("prefix %+v, %v", p, err)
		}
	}
}

// BenchmarkEndsLineTinyFrameFile is the line-end check of a log's last
// frame when it is a runtime batch of under 256 bytes (a window and no
// size declared), read from a file as backup and export read it.
func BenchmarkEndsLineTinyFrameFile(b *testing.B) {
	e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	frame := e.EncodeAll([]byte("{\"type\":\"turn/end\",\"seq\":9,\"time\":\"2026-12-02T10:00:00Z\",\"data\":{}}\n"), nil)
	path := filepath.Join(b.TempDir(), "tiny.zst")
	if err := os.WriteFile(path, frame, 0o600); err != nil {
		b.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	fr, err := NewFrameScanner(f, int64(len(frame))).next()
	if err != nil || fr.ContentSize >= 0 {
		b.Fatalf("frame %+v, %v: want one without a declared size", fr, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !endsLine(f, fr, 1<<20) {
			b.Fatal("the frame ends a line")
		}
	}
}
