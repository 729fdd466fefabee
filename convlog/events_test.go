package convlog

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"reflect"
	"testing"
)

// tornLog writes a log of three batches (21 events) and tears its tail: half
// a line, or the first bytes of a further frame.
func tornLog(t *testing.T, comp Compression) []byte {
	t.Helper()
	name := "s1.v4.jsonl"
	if comp == Zstd {
		name += ".zst"
	}
	b := mustRead(t, writeLog(t, t.TempDir(), name, comp, sampleTurn(1), sampleTurn(2), sampleTurn(3)))
	if comp == Zstd {
		return append(b, 0x28, 0xB5, 0x2F)
	}
	return append(b, `{"type":"turn/start","se`...)
}

func openMem(t *testing.T, b []byte, comp Compression) *Reader {
	t.Helper()
	name := "s1.v4.jsonl"
	if comp == Zstd {
		name += ".zst"
	}
	r, err := NewReader(Bytes(b), int64(len(b)), name, ReaderOptions{Version: -1})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestEventsAsNext(t *testing.T) {
	for _, comp := range []Compression{Plain, Zstd} {
		b := tornLog(t, comp)
		// want: the reader's own step, next, called by hand.
		r := openMem(t, b, comp)
		var want []Event
		e, err := r.next()
		for ; err == nil; e, err = r.next() {
			want = append(want, e.Clone())
		}
		wantStats := r.Stats()
		r.Close()
		if err != io.EOF || len(want) != 21 || !wantStats.TornTail {
			t.Fatalf("%v: Next read %d events, %+v, %v", comp, len(want), wantStats, err)
		}

		r = openMem(t, b, comp)
		var got []Event
		for e, err := range r.Events() {
			if err != nil {
				t.Fatalf("%v: %v", comp, err)
			}
			got = append(got, e.Clone())
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%v: Events yielded %d events, not as Next returned them", comp, len(got))
		}
		if st := r.Stats(); st != wantStats {
			t.Fatalf("%v: stats after Events %+v, after Next %+v", comp, st, wantStats)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEventsErrorOnce(t *testing.T) {
	b := mustRead(t, writeLog(t, t.TempDir(), "s1.v4.jsonl", Plain, sampleTurn(1), sampleTurn(2)))
	// Line 5 (the fourth event) is damaged.
	lines := bytes.SplitAfter(b, []byte("\n"))
	lines[4] = []byte("{not json\n")
	b = bytes.Join(lines, nil)

	r := openMem(t, b, Plain)
	evs, _, wantErr := drain(r)
	r.Close()
	var fe *FormatError
	if !errors.As(wantErr, &fe) || len(evs) != 3 {
		t.Fatalf("Next: %d events, then %v", len(evs), wantErr)
	}

	r = openMem(t, b, Plain)
	defer r.Close()
	n, errs := 0, 0
	for e, err := range r.Events() {
		if err != nil {
			if e != nil || err.Error() != wantErr.Error() {
				t.Fatalf("yielded (%v, %v), want (nil, %v)", e, err, wantErr)
			}
			errs++
			continue // the loop ends by itself after the error
		}
		n++
	}
	if n != 3 || errs != 1 {
		t.Fatalf("yielded %d events and %d errors, want 3 and 1", n, errs)
	}
	again := 0
	for _, err := range r.Events() {
		if again++; err == nil || err.Error() != wantErr.Error() {
			t.Fatalf("Events after the loop: %v", err)
		}
	}
	if again != 1 {
		t.Fatalf("Events after the loop yielded %d times, want the error once", again)
	}
}

func TestEventsBreak(t *testing.T) {
	for _, comp := range []Compression{Plain, Zstd} {
		r := openMem(t, tornLog(t, comp), comp)
		var seqs []int64
		for e, err := range r.Events() {
			if err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, e.Seq)
			if len(seqs) == 3 {
				break
			}
		}
		// Stats covers what was read up to the break: the torn tail is
		// not reached yet.
		if st := r.Stats(); st.Events != 3 || st.Lines != 4 || st.TornTail {
			t.Fatalf("%v: stats after a break at the third event: %+v", comp, st)
		}
		// A second loop goes on with the fourth event, to the end.
		for e, err := range r.Events() {
			if err != nil {
				t.Fatal(err)
			}
			seqs = append(seqs, e.Seq)
		}
		if len(seqs) != 21 || seqs[3] != 3 || seqs[20] != 20 {
			t.Fatalf("%v: seqs %v", comp, seqs)
		}
		if st := r.Stats(); st.Events != 21 || !st.TornTail {
			t.Fatalf("%v: stats at the end: %+v", comp, st)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestFramesAsNext(t *testing.T) {
	b := mustRead(t, writeLog(t, t.TempDir(), "s1.v4.jsonl.zst", Zstd, sampleTurn(1), sampleTurn(2)))
	for _, tc := range []struct {
		name    string
		tail    []byte
		frames  int
		wantErr bool
	}{
		{"whole", nil, 3, false},
		{"torn", []byte{0x28, 0xB5}, 4, false},
		{"foreign", []byte("foreign bytes after the frames"), 3, true},
	} {
		f := append(bytes.Clone(b), tc.tail...)
		var want []Frame
		var wantErr error
		s := NewFrameScanner(Bytes(f), int64(len(f)))
		for {
			fr, err := s.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				wantErr = err
				break
			}
			want = append(want, fr)
		}
		if (wantErr != nil) != tc.wantErr || len(want) != tc.frames || want[len(want)-1].Torn != (tc.name == "torn") {
			t.Fatalf("%s: Next: %d frames, then %v", tc.name, len(want), wantErr)
		}

		var got []Frame
		var gotErr error
		errs := 0
		for fr, err := range NewFrameScanner(Bytes(f), int64(len(f))).Frames() {
			if err != nil {
				gotErr = err
				errs++
				continue
			}
			got = append(got, fr)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotErr, wantErr) || errs > 1 {
			t.Fatalf("%s: Frames yielded %+v, %d errors (%v); Next returned %+v, %v", tc.name, got, errs, gotErr, want, wantErr)
		}
	}
}

func TestFramesBreak(t *testing.T) {
	path := writeLog(t, t.TempDir(), "s1.v4.jsonl.zst", Zstd, sampleTurn(1), sampleTurn(2), sampleTurn(3))
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	s := NewFrameScanner(f, fi.Size())
	for fr, err := range s.Frames() {
		if err != nil || fr.Index != 1 {
			t.Fatalf("frame %+v, %v", fr, err)
		}
		break
	}
	var next []int64
	for fr, err := range s.Frames() {
		if err != nil {
			t.Fatal(err)
		}
		next = append(next, fr.Index)
	}
	if len(next) == 0 || next[0] != 2 {
		t.Fatalf("Frames after a break at frame 1: %v", next)
	}
}

// TestAdmitChecksContext: Admit looks at ctx at every 1024th read, the
// first and the end included, and stops with its error.
func TestAdmitChecksContext(t *testing.T) {
	dir := t.TempDir()
	var turns [][]Event
	for n := int64(1); n <= 300; n++ {
		turns = append(turns, sampleTurn(n))
	}
	long := writeLog(t, dir, "long.v4.jsonl", Plain, turns...)
	empty := writeLog(t, dir, "empty.v4.jsonl", Plain)
	admit := func(path string, ctx context.Context, opts AdmitOptions) error {
		r, err := Open(path, ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		return Admit(ctx, r, r.Header(), opts)
	}
	for _, p := range []string{long, empty} {
		if err := admit(p, context.Background(), AdmitOptions{}); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}

	done, cancel := context.WithCancel(context.Background())
	cancel()
	for _, p := range []string{long, empty} {
		if err := admit(p, done, AdmitOptions{}); err != context.Canceled {
			t.Fatalf("%s with a cancelled context: %v", p, err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	each := 0
	err := admit(long, ctx, AdmitOptions{Each: func(*Event, *Validator) error {
		if each++; each == 1500 {
			cancel()
		}
		return nil
	}})
	if err != context.Canceled || each != 2048 {
		t.Fatalf("cancelled at event 1500: %v after %d events, want the cancel after 2048", err, each)
	}
}
