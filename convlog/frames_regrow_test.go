package convlog

import (
	"io"
	"math/rand/v2"
	"testing"
)

// regrowing is a live log that a writer cuts back and appends to again
// while a copy scans it: the first two reads at off come back short.
type regrowing struct {
	data  []byte
	off   int64
	short int
}

func (r *regrowing) ReadAt(p []byte, off int64) (int, error) {
	if off == r.off && r.short < 2 {
		r.short++
		return 0, io.EOF
	}
	if off >= int64(len(r.data)) {
		return 0, io.EOF
	}
	n := copy(p, r.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// TestFrameScannerFileRegrows: a frame start read short once and whole the
// next time is a torn frame (the file shrank under the scan), whatever
// the number of bytes past it; it once panicked past 32 bytes.
func TestFrameScannerFileRegrows(t *testing.T) {
	big := make([]byte, 100<<10) // past the scanner's 64 KiB window
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	first := encodeFrame(nil, append(append([]byte(nil), big...), '\n'))
	for _, rest := range []int{1, 3, 4, 5, 19, 40, 300} {
		second := encodeFrame(nil, big[:rest]) // incompressible: rest+13 bytes
		data := append(append([]byte(nil), first...), second...)
		r := &regrowing{data: data, off: int64(len(first))}
		var frames []Frame
		var ferr error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("%d bytes after the cut: panic %v", len(second), p)
				}
			}()
			for fr, err := range NewFrameScanner(r, int64(len(data))).Frames() {
				if err != nil {
					ferr = err
					break
				}
				frames = append(frames, fr)
			}
		}()
		if ferr != nil || len(frames) != 2 || !frames[1].Torn {
			t.Errorf("%d bytes after the cut: frames %+v, error %v; want the first whole and a torn one", len(second), frames, ferr)
		}
	}
}
