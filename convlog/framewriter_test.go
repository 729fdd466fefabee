package convlog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// frameWriterLog writes turns of sampleTurn with a FrameWriter, a chunk
// of about FrameBytes at a time (one holds a 3 MiB line, grown), and
// returns the frames written, the events, and the firstLine of each check
// in the order the checks ran.
func frameWriterLog(t *testing.T, compress bool, turns int) (frames [][]byte, events []Event, checked []int64, err error) {
	t.Helper()
	write := func(b []byte) error {
		frames = append(frames, bytes.Clone(b))
		return nil
	}
	fw, err := NewFrameWriter(write, "s1.jsonl", testHeader("s1"), FrameWriterOptions{Compress: compress, Parallel: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer fw.Close()
	var chunk []byte
	line, first := int64(2), int64(2)
	add := func() error {
		at := first
		first = line
		lines := chunk
		chunk = nil
		return fw.Add(lines, at, func(b []byte) error {
			if !bytes.Equal(b, lines) {
				t.Errorf("check of line %d on got other lines", at)
			}
			checked = append(checked, at) // checks run one at a time
			return nil
		})
	}
	for n := 1; n <= turns; n++ {
		for _, e := range sampleTurn(int64(n)) {
			if n == 2 && e.Type == TypeUserMessage {
				e.Data = userMsg("u1-2", strings.Repeat("long ", 3<<20/5))
			}
			e.Seq = int64(len(events))
			chunk = e.AppendJSON(fw.Grow(chunk, len(e.Data)+128))
			chunk = append(chunk, '\n')
			events = append(events, e)
			line++
			if len(chunk) >= FrameBytes {
				if err := add(); err != nil {
					return frames, events, checked, err
				}
			}
		}
	}
	if len(chunk) > 0 {
		if err := add(); err != nil {
			return frames, events, checked, err
		}
	}
	return frames, events, checked, fw.Close()
}

// TestFrameWriter: a whole log written by a FrameWriter, compressed or
// not, is frame 1 the header line, then one frame per chunk, in order,
// each chunk checked in order, and reads back as the events written, in
// the canonical framing.
func TestFrameWriter(t *testing.T) {
	for _, compress := range []bool{true, false} {
		t.Run(fmt.Sprint("compress=", compress), func(t *testing.T) {
			frames, events, checked, err := frameWriterLog(t, compress, 3000)
			if err != nil {
				t.Fatal(err)
			}
			if len(checked) < 4 || len(frames) != len(checked)+1 {
				t.Fatalf("%d frames written, %d chunks checked; want a frame per chunk after the header", len(frames), len(checked))
			}
			for i := 1; i < len(checked); i++ {
				if checked[i] <= checked[i-1] {
					t.Fatalf("checks ran out of order: %v", checked)
				}
			}
			name := "s1.v4.jsonl"
			if compress {
				name += ".zst"
			}
			path := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(path, bytes.Join(frames, nil), 0o600); err != nil {
				t.Fatal(err)
			}
			got, st, err := readAll(t, path)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(events) {
				t.Fatalf("read %d events, wrote %d", len(got), len(events))
			}
			for i := range got {
				if got[i].Type != events[i].Type || !bytes.Equal(got[i].Data, events[i].Data) {
					t.Fatalf("event %d reads back as %s %.60s, want %s %.60s", i, got[i].Type, got[i].Data, events[i].Type, events[i].Data)
				}
			}
			if compress && (!st.Framing.Canonical() || st.Frames != int64(len(frames))) {
				t.Fatalf("framing %+v, %d frames; want canonical, %d", st.Framing, st.Frames, len(frames))
			}
		})
	}
}

// TestFrameWriterFaults: a frame that does not decode to its lines, and a
// check that fails, stop the writer: the error is returned and no later
// frame is written.
func TestFrameWriterFaults(t *testing.T) {
	t.Run("bad frame", func(t *testing.T) {
		// By line, not by call: two compressors call the hook at once.
		frameTampered = func(firstLine int64, out []byte) {
			if firstLine == 2 { // the first chunk after the header
				out[len(out)/2] ^= 0x40
			}
		}
		defer func() { frameTampered = nil }()
		frames, _, _, err := frameWriterLog(t, true, 3000)
		if err == nil || !strings.Contains(err.Error(), "does not decode to the lines checked") {
			t.Fatalf("got %v, want the frame refused", err)
		}
		if len(frames) != 1 {
			t.Fatalf("%d frames written, want the header's before the bad one", len(frames))
		}
	})
	t.Run("bad line", func(t *testing.T) {
		frames, err := func() ([][]byte, error) {
			var frames [][]byte
			fw, err := NewFrameWriter(func(b []byte) error { frames = append(frames, b); return nil }, "s1.jsonl", testHeader("s1"), FrameWriterOptions{Compress: true})
			if err != nil {
				t.Fatal(err)
			}
			defer fw.Close()
			refuse := func([]byte) error { return fmt.Errorf("refused") }
			if err := fw.Add([]byte("{}\n"), 2, refuse); err != nil {
				return frames, err
			}
			return frames, fw.Close()
		}()
		if err == nil || err.Error() != "refused" || len(frames) != 1 {
			t.Fatalf("got %v after %d frames, want the check's error after the header's", err, len(frames))
		}
	})
}

// TestFrameWriterCheckOrder: a frame without a check between two with
// checks does not let the later check run before, or beside, the earlier.
func TestFrameWriterCheckOrder(t *testing.T) {
	fw, err := NewFrameWriter(func([]byte) error { return nil }, "s1.jsonl", testHeader("s1"), FrameWriterOptions{Compress: true, Parallel: 3})
	if err != nil {
		t.Fatal(err)
	}
	var order []int
	running := make(chan struct{}, 1)
	check := func(n int, wait time.Duration) func([]byte) error {
		return func([]byte) error {
			select {
			case running <- struct{}{}:
			default:
				t.Errorf("check %d runs beside another", n)
				return nil
			}
			time.Sleep(wait)
			order = append(order, n)
			<-running
			return nil
		}
	}
	line := []byte("{}\n")
	for _, add := range []func() error{
		func() error { return fw.Add(line, 2, check(0, 200*time.Millisecond)) },
		func() error { return fw.Add(line, 3, nil) },
		func() error { return fw.Add(line, 4, check(2, 0)) },
	} {
		if err := add(); err != nil {
			t.Fatal(err)
		}
	}
	if err := fw.Close(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, []int{0, 2}) {
		t.Errorf("checks ran in the order %v, want [0 2]", order)
	}
}
