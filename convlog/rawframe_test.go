package convlog

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestRawFrame: raw frames of every length class decode with the zstd
// library (checksum verified), are exactly rawFrameLen long, and their
// checksum is the one the zstd encoder writes for the same content.
func TestRawFrame(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 3, 4, 7, 8, 31, 32, 33, 63, 64, 100, 1000, maxBlockSize - 1, maxBlockSize, maxBlockSize + 1, 3*maxBlockSize + 17} {
		content := make([]byte, n)
		for i := range content {
			content[i] = byte(rng.IntN(256))
		}
		var out bytes.Buffer
		fw, err := newRawFrameWriter(&out, int64(n))
		if err != nil {
			t.Fatal(err)
		}
		// Uneven writes.
		for rest := content; len(rest) > 0; {
			k := min(len(rest), 1+rng.IntN(70000))
			if _, err := fw.Write(rest[:k]); err != nil {
				t.Fatal(err)
			}
			rest = rest[k:]
		}
		if _, err := fw.Write([]byte{0}); err == nil {
			t.Errorf("n=%d: a byte past the declared length was taken", n)
		}
		frame := out.Bytes()
		if app := AppendRawFrame([]byte("x"), content); !bytes.Equal(app[1:], frame) || app[0] != 'x' {
			t.Errorf("n=%d: AppendRawFrame differs from the streamed frame", n)
		}
		if int64(len(frame)) != rawFrameLen(int64(n)) {
			t.Errorf("n=%d: frame of %d bytes, rawFrameLen %d", n, len(frame), rawFrameLen(int64(n)))
		}
		got, err := refDecoder.DecodeAll(frame, nil)
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("n=%d: decodes to %d bytes, %v", n, len(got), err)
		}
		ref := enc.EncodeAll(content, nil)
		if !bytes.Equal(ref[len(ref)-4:], frame[len(frame)-4:]) {
			t.Errorf("n=%d: checksum %x, the zstd encoder's %x", n, frame[len(frame)-4:], ref[len(ref)-4:])
		}
		s := NewFrameScanner(Bytes(frame), int64(len(frame)))
		f, err := s.next()
		if err != nil || f.Torn || f.Size != int64(len(frame)) || !f.Checksum || f.ContentSize != int64(n) {
			t.Errorf("n=%d: scanned as %+v, %v", n, f, err)
		}
		// A damaged checksum is caught.
		bad := bytes.Clone(frame)
		binary.LittleEndian.PutUint32(bad[len(bad)-4:], binary.LittleEndian.Uint32(bad[len(bad)-4:])^1)
		if _, err := refDecoder.DecodeAll(bad, nil); err == nil {
			t.Errorf("n=%d: a bad checksum decodes", n)
		}
	}
}
