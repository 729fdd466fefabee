package archive

import (
	"bytes"
	"io"
	"math/rand/v2"
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
