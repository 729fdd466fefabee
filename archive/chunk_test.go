package archive

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestFrameBound: a chunk's frame, at either level the chunker encodes
// with, fits the out buffer a chunk is made with, whatever its bytes:
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
	for _, level := range []zstd.EncoderLevel{TextLevel, CompressedLevel} {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(level), zstd.WithEncoderConcurrency(1),
			zstd.WithWindowSize(size), zstd.WithEncoderCRC(true), zstd.WithAllLitEntropyCompression(true))
		if err != nil {
			t.Fatal(err)
		}
		for name, in := range inputs {
			out := make([]byte, 0, frameBound(len(in)))
			got := e.EncodeAll(in, out)
			if cap(got) != cap(out) || &got[:1][0] != &out[:1][0] {
				t.Errorf("level %v, %s (%d bytes): the frame (%d bytes) did not fit %d bytes", level, name, len(in), len(got), cap(out))
			}
		}
		e.Close()
	}
}
