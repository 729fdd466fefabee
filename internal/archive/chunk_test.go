package archive

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
)

// TestFrameBound: a chunk's frame, in any encoding the chunker uses, fits
// the out buffer a chunk is made with, whatever its bytes:
// EncodeAll never has to grow it.
func TestFrameBound(t *testing.T) {
	const size = DefaultChunkSize
	rng := rand.New(rand.NewPCG(3, 4))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	// Incompressible runs between compressible ones make the encoder cut
	// blocks of several sizes, each with its header.
	var mixed []byte
	for k := 1; len(mixed) < size; k++ {
		mixed = append(mixed, random(k*1500%40000+100)...)
		mixed = append(mixed, bytes.Repeat([]byte{'a' + byte(k%26)}, k*700%9000+10)...)
	}
	inputs := map[string][]byte{
		"random":  random(size),
		"zeros":   make([]byte, size),
		"text":    bytes.Repeat([]byte(`{"type":"assistant/message","seq":1,"data":{"text":"an answer"}}`+"\n"), size/64+1)[:size],
		"mixed":   mixed[:size],
		"a block": random(128 << 10),
		"a byte":  {1},
	}
	for _, enc := range []encoding{{level: TextLevel}, {level: CompressedLevel}, {level: CompressedLevel, noEntropy: true}} {
		e, err := enc.encoder(size)
		if err != nil {
			t.Fatal(err)
		}
		for name, in := range inputs {
			out := make([]byte, 0, frameBound(len(in)))
			got := e.EncodeAll(in, out)
			if cap(got) != cap(out) || &got[:1][0] != &out[:1][0] {
				t.Errorf("%+v, %s (%d bytes): the frame (%d bytes) did not fit %d bytes", enc, name, len(in), len(got), cap(out))
			}
		}
		e.Close()
	}
}

// TestChunkEncoding: frames of text are entropy-coded at the text level;
// frames mostly of compressed entries at the compressed level, and without
// entropy coding only when hardly anything else shares them.
func TestChunkEncoding(t *testing.T) {
	c := newChunker(io.Discard, WriterOptions{ChunkSize: DefaultChunkSize, Workers: 1,
		TextLevel: TextLevel, CompressedLevel: CompressedLevel})
	defer c.close(true)
	for _, tc := range []struct {
		text, comp int
		want       encoding
	}{
		{0, 0, encoding{level: TextLevel}},
		{1 << 20, 0, encoding{level: TextLevel}},
		{512, 512, encoding{level: TextLevel}},
		{500, 524, encoding{level: CompressedLevel}},
		{129, 895, encoding{level: CompressedLevel}},
		{128, 896, encoding{level: CompressedLevel, noEntropy: true}},
		{0, 1 << 20, encoding{level: CompressedLevel, noEntropy: true}},
	} {
		if got := c.encodingOf(tc.text, tc.comp); got != tc.want {
			t.Errorf("%d text and %d compressed bytes: %+v, want %+v", tc.text, tc.comp, got, tc.want)
		}
	}
}

// TestHeadersCountAsNeitherKind: a frame of small compressed logs (4 KiB,
// an eighth of it their tar headers and padding) is one of compressed
// bytes only, written without entropy coding; a plain log's bytes count.
func TestHeadersCountAsNeitherKind(t *testing.T) {
	w := NewWriter(io.Discard, WriterOptions{Workers: 1})
	defer w.Abort()
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 20 {
		if _, err := w.WriteEntry(fmt.Sprintf("conversations/a/%02d.v4.jsonl.zst", i), Compressed, 4000, bytes.NewReader(randomBytes(rng, 4000))); err != nil {
			t.Fatal(err)
		}
	}
	if ch := w.ch.cur; ch.text != 0 || ch.comp != 20*4000 || !w.ch.encodingOf(ch.text, ch.comp).noEntropy {
		t.Fatalf("%d text and %d compressed bytes, want 0 and %d, without entropy coding", ch.text, ch.comp, 20*4000)
	}
	if _, err := w.WriteEntry("conversations/a/b.v4.jsonl", Text, 3, strings.NewReader("{}\n")); err != nil {
		t.Fatal(err)
	}
	if ch := w.ch.cur; ch.text != 3 {
		t.Fatalf("%d text bytes, want the plain log's 3", ch.text)
	}
}

// TestCompressedLogFramesReadByTools: a log of small frames written by the
// zstd tool, as a runtime appends batches, fills frames the chunker writes
// without entropy coding. Those frames still match what repeats across the
// log's frames (here whole frames: the archive is a fraction of the log),
// and the zstd and tar tools read them back byte for byte.
func TestCompressedLogFramesReadByTools(t *testing.T) {
	needTools(t, "zstd", "tar")
	rng := rand.New(rand.NewPCG(5, 6))
	var frames [][]byte
	for seq := 0; seq < 40; seq += 2 {
		batch := fmt.Sprintf(`{"type":"step/start","seq":%d,"time":%d,"data":{"turn":%d,"step":%d}}`+"\n"+
			`{"type":"tool/call","seq":%d,"time":%d,"data":{"turn":%d,"step":%d,"callId":"call_%x","name":"bash","arguments":%q}}`+"\n",
			seq, 1788253211042+seq*37, seq/8, seq%8, seq+1, 1788253211060+seq*37, seq/8, seq%8, rng.Uint32(), randomText(rng, 20+rng.IntN(200)))
		cmd := exec.Command("zstd", "-q", "-c")
		cmd.Stdin = strings.NewReader(batch)
		frame, err := cmd.Output()
		if err != nil {
			t.Fatalf("zstd: %v", err)
		}
		frames = append(frames, frame)
	}
	var log []byte
	for len(log) < 96<<10 {
		log = append(log, frames[rng.IntN(len(frames))]...)
	}
	c := newChunker(io.Discard, WriterOptions{ChunkSize: 32 << 10, Workers: 1, TextLevel: TextLevel, CompressedLevel: CompressedLevel})
	if enc := c.encodingOf(512, len(log)); !enc.noEntropy {
		t.Fatalf("a chunk of the log and one tar header: %+v, want no entropy coding", enc)
	}
	c.close(true)

	data, _ := write(t, []entry{{logB, Compressed, log}}, WriterOptions{ChunkSize: 32 << 10})
	if len(data) > len(log)/4 {
		t.Errorf("the archive is %d bytes for a log of %d: the frames repeated in it were not matched", len(data), len(log))
	}
	a := testedByZstd(t, data)
	got, err := exec.Command("sh", "-c", `zstd -dcq "$1" | tar -xOf - "$2"`, "sh", a, logB).Output()
	if err != nil || !bytes.Equal(got, log) {
		t.Fatalf("zstd -dc | tar -xO gave %d bytes of %d (%v)", len(got), len(log), err)
	}
}
