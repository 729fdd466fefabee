package convlog

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// A frame damaged inside a block is refused in the same words whether it
// is decoded whole, as a stream on one goroutine, or as a stream on
// several: the decoder's own words differ between the three.
func TestZstdFaultSameOnEveryPath(t *testing.T) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		t.Fatal(err)
	}
	var plain bytes.Buffer
	for i := range 400 {
		fmt.Fprintf(&plain, `{"type":"user/message","seq":%d,"data":{"text":"line %d of a log, %x"}}`+"\n", i, i*i, i*7919)
	}
	frame := enc.EncodeAll(plain.Bytes(), nil)
	seen := map[string]bool{}
	for i := 6; i < len(frame)-4; i++ {
		bad := bytes.Clone(frame)
		bad[i] ^= 0x01
		var got []string
		whole, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
		if _, err := whole.DecodeAll(bad, nil); err != nil {
			got = append(got, zstdFault(err))
		}
		whole.Close()
		for _, c := range []int{1, 4} {
			d, _ := zstd.NewReader(bytes.NewReader(bad), zstd.WithDecoderConcurrency(c))
			if _, err := io.Copy(io.Discard, d); err != nil {
				got = append(got, zstdFault(err))
			}
			d.Close()
		}
		if len(got) == 0 {
			continue
		}
		for _, g := range got[1:] {
			if g != got[0] {
				t.Fatalf("byte %d flipped: worded %q", i, got)
			}
		}
		seen[got[0]] = true
	}
	if !seen["corrupt compressed block"] || !seen[zstd.ErrCRCMismatch.Error()] {
		t.Fatalf("flipping each byte gave only %v", seen)
	}
}

func TestZstdFaultKeepsOtherErrors(t *testing.T) {
	for _, err := range []error{
		&fs.PathError{Op: "read", Path: "x", Err: syscall.EIO},
		fmt.Errorf("reading: %w", syscall.EIO),
		errDecodeBudget,
		&FormatError{Path: "x", Msg: "line too long"},
	} {
		if got := zstdFault(err); got != err.Error() {
			t.Errorf("zstdFault(%v) = %q", err, got)
		}
	}
	if got := zstdFault(fmt.Errorf("frame: %w", zstd.ErrCRCMismatch)); got != "CRC check failed" {
		t.Errorf("CRC: %q", got)
	}
}
