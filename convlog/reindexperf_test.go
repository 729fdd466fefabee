package convlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"
)

// sizelessFrames compresses each chunk as one frame: small ones as the log
// writer does (which states no content size below 256 bytes), large ones
// (more than a block) with the stream encoder, which does not state it
// either.
func sizelessFrames(t *testing.T, chunks ...[]byte) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, c := range chunks {
		if len(c) < 64<<10 {
			out.Write(encodeFrame(nil, c))
			continue
		}
		w, err := zstd.NewWriter(&out, zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(c); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

// noSizeLog writes the plain log at plain again as a compressed log: the
// header alone, then the events in frames of perFrame lines (0: all in
// one); see sizelessFrames.
func noSizeLog(t *testing.T, plain, name string, perFrame int) string {
	t.Helper()
	lines := bytes.SplitAfter(mustRead(t, plain), []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	chunks := [][]byte{lines[0]}
	var cur []byte
	for k, l := range lines[1:] {
		cur = append(cur, l...)
		if (perFrame > 0 && (k+1)%perFrame == 0) || k == len(lines)-2 {
			chunks = append(chunks, cur)
			cur = nil
		}
	}
	data := sizelessFrames(t, chunks...)
	p := filepath.Join(filepath.Dir(plain), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func sameEvents(t *testing.T, got, want []Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d events, want %d", len(got), len(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Type != w.Type || g.Seq != w.Seq || g.Time != w.Time || !bytes.Equal(g.Data, w.Data) || !bytes.Equal(g.Raw, w.Raw) {
			t.Fatalf("event %d = %.200s, want %.200s", i, g.Raw, w.Raw)
		}
	}
}

// TestFramesWithoutContentSize: such frames are decoded whole like the
// others, and what does not decode whole (too large, damaged) is read as a
// stream, as it always was.
func TestFramesWithoutContentSize(t *testing.T) {
	dir := t.TempDir()
	var batches [][]Event
	for range 30 {
		batches = append(batches, sampleEvents())
	}
	plain := writeLog(t, dir, "s1.v4.jsonl", Plain, batches...)
	want, wantStats, err := readAll(t, plain)
	if err != nil {
		t.Fatal(err)
	}

	small := noSizeLog(t, plain, "small.v4.jsonl.zst", 1)
	frames := scanFrames(t, small)
	var sizeless []Frame
	for _, f := range frames[1:] {
		if f.ContentSize < 0 {
			sizeless = append(sizeless, f)
		}
	}
	if len(sizeless) < 30 {
		t.Fatalf("%d of %d frames state no content size; want more for the test", len(sizeless), len(frames))
	}
	got, st, err := readAll(t, small)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got, want)
	if st.Events != wantStats.Events || st.PlainBytes != wantStats.PlainBytes || st.Frames != int64(len(frames)) {
		t.Fatalf("stats %+v, plain %+v", st, wantStats)
	}

	// A frame that decodes to more than a whole decode takes.
	var big [][]Event
	text := strings.Repeat("all work and no play makes jack a dull boy ", 200)
	for range 1000 {
		evs := sampleEvents()
		evs[2].Data = userMsg("u1", text)
		big = append(big, evs)
	}
	bigPlain := writeLog(t, dir, "s2.v4.jsonl", Plain, big...)
	if fi, _ := os.Stat(bigPlain); fi.Size() <= 2*smallFrameContent {
		t.Fatalf("plain log of %d bytes is too small for the test", fi.Size())
	}
	wantBig, _, err := readAll(t, bigPlain)
	if err != nil {
		t.Fatal(err)
	}
	bigZst := noSizeLog(t, bigPlain, "big.v4.jsonl.zst", 0)
	if f := scanFrames(t, bigZst)[1]; f.Size > smallFrameBytes || f.ContentSize >= 0 {
		t.Fatalf("frame %+v: want one small frame without content size", f)
	}
	got, _, err = readAll(t, bigZst)
	if err != nil {
		t.Fatal(err)
	}
	sameEvents(t, got, wantBig)
	// Damaged near its end, it gives the lines of its blocks before the
	// damage, as a stream does, then the failure.
	badBig := mustRead(t, bigZst)
	badBig[len(badBig)-40] ^= 0x55
	os.WriteFile(bigZst, badBig, 0o600)
	got, _, err = readAll(t, bigZst)
	if !errors.Is(err, ErrCorrupt) || len(got) == 0 || len(got) >= len(wantBig) {
		t.Fatalf("damaged large frame: %d events, %v", len(got), err)
	}
	sameEvents(t, got, wantBig[:len(got)])

	// A damaged frame: the events of the frames before it, then the
	// frame's failure.
	victim := sizeless[len(sizeless)/2]
	bad := mustRead(t, small)
	bad[victim.Offset+victim.Size-6] ^= 0x55 // in the last block, before the checksum
	damaged := filepath.Join(dir, "damaged.v4.jsonl.zst")
	os.WriteFile(damaged, bad, 0o600)
	got, _, err = readAll(t, damaged)
	var fe *FormatError
	if !errors.As(err, &fe) || !errors.Is(err, ErrCorrupt) || fe.Pos.Frame != victim.Index ||
		!strings.Contains(err.Error(), "frame failed validation") {
		t.Fatalf("damaged frame: err = %v, want a corrupt frame %d", err, victim.Index)
	}
	// One event per frame: those of frames 2 .. victim-1.
	if n := int(victim.Index) - 2; len(got) != n {
		t.Fatalf("damaged frame %d: %d events before the failure, want %d", victim.Index, len(got), n)
	}
	sameEvents(t, got, want[:len(got)])
}

func scanFrames(t *testing.T, path string) []Frame {
	t.Helper()
	data := mustRead(t, path)
	s := NewFrameScanner(bytes.NewReader(data), int64(len(data)))
	var frames []Frame
	for {
		f, err := s.Next()
		if err == io.EOF {
			return frames
		}
		if err != nil {
			t.Fatal(err)
		}
		frames = append(frames, f)
	}
}

// TestOpenSmallLogWhole: a small log is read in one go, and the reader
// reports the size and modification time the file had.
func TestOpenSmallLogWhole(t *testing.T) {
	dir := t.TempDir()
	for _, comp := range []Compression{Plain, Zstd} {
		name := "s1.v4.jsonl"
		if comp == Zstd {
			name += ".zst"
		}
		p := writeLog(t, dir, name, comp, sampleEvents(), sampleEvents())
		r, err := Open(p, ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.whole == nil || r.closer != nil {
			t.Errorf("%s: small log not read whole", name)
		}
		n := 0
		for {
			if _, err := r.Next(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			n++
		}
		fi, _ := os.Lstat(p)
		if n != 14 || r.Stats().FileBytes != fi.Size() || !r.ModTime().Equal(fi.ModTime()) || r.ModTime().UnixNano() != fi.ModTime().UnixNano() {
			t.Errorf("%s: %d events, %d bytes, time %v; file %d bytes, time %v", name, n, r.Stats().FileBytes, r.ModTime(), fi.Size(), fi.ModTime())
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		// The file was closed at Open: it can go while the reader is
		// held.
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Open(filepath.Join(dir, "missing.v4.jsonl"), ReaderOptions{}); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing log: %v", err)
	}
}

// skipStringReference is skipString as it was before it jumped to the
// first byte that needs a look.
func skipStringReference(b []byte, i int) (int, error) {
	start := i
	i++
	for i < len(b) {
		for i+8 <= len(b) {
			v := binary.LittleEndian.Uint64(b[i:])
			if (hasLess(v, 0x20)|hasZero(v^0x2222222222222222)|hasZero(v^0x5C5C5C5C5C5C5C5C)|v)&0x8080808080808080 != 0 {
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(b) {
				return i, synErr(i, "unterminated string escape")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return i, synErr(i, "truncated \\u escape")
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return i, synErr(i, "invalid \\u escape")
					}
				}
				i += 6
			default:
				return i, synErr(i, "invalid escape \\%c in string", b[i+1])
			}
		case c < 0x20:
			return i, synErr(i, "control character 0x%02x in string", c)
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return i, synErr(i, "invalid UTF-8 in string")
			}
			i += size
		}
	}
	return start, synErr(start, "unterminated string")
}

func TestSkipStringMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "b", " ", "\"", "\\", "\\\"", "\\n", "\\u00e9", "\\u12", "\\x", "\n", "\x01", "\x7f",
		"é", "€", "𝄞", "\xff", "\xc3", "\xe2\x82", "0123456789abcdef", strings.Repeat("z", 9)}
	for range 200000 {
		var b strings.Builder
		b.WriteByte('"')
		for range rng.IntN(12) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		if rng.IntN(4) > 0 {
			b.WriteString(`"`)
		}
		b.WriteString(strings.Repeat(",", rng.IntN(10)))
		s := []byte(b.String())
		got, gerr := skipString(s, 0)
		want, werr := skipStringReference(s, 0)
		if got != want || fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Fatalf("skipString(%q) = %d, %v; want %d, %v", s, got, gerr, want, werr)
		}
	}
}

func TestJSONMembers(t *testing.T) {
	got, ok := JSONMembers([]byte(` { "a" : 1 , "b\u0041":[1,{"x":"}"}], "a":"s\"" } `), nil)
	want := []JSONMember{{"a", []byte("1")}, {"bA", []byte(`[1,{"x":"}"}]`)}, {"a", []byte(`"s\""`)}}
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("members = %q, %v", got, ok)
	}
	for _, in := range []string{`[]`, `"x"`, `null`, ``} {
		if _, ok := JSONMembers([]byte(in), nil); ok {
			t.Errorf("JSONMembers(%q) accepted it", in)
		}
	}
	if got, ok := JSONMembers([]byte(`{}`), nil); !ok || len(got) != 0 {
		t.Errorf("empty object: %q, %v", got, ok)
	}
}

func TestSkipStringTrustedMatchesIndexByte(t *testing.T) {
	reference := func(b []byte, i int) (int, error) {
		j := i + 1
		for {
			k := bytes.IndexByte(b[j:], '"')
			if k < 0 {
				return i, synErr(i, "unterminated string")
			}
			j += k
			n := 0
			for p := j - 1; p > i && b[p] == '\\'; p-- {
				n++
			}
			if n%2 == 0 {
				return j + 1, nil
			}
			j++
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	parts := []string{"a", "\\\"", "\\\\", "\\", "é", strings.Repeat("x", 7), strings.Repeat("y", 40), "\\u0041"}
	for range 100000 {
		var b strings.Builder
		b.WriteByte('"')
		for range rng.IntN(10) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		if rng.IntN(5) > 0 {
			b.WriteByte('"')
		}
		b.WriteString(strings.Repeat(`,"z"`, rng.IntN(3)))
		s := []byte(b.String())
		got, gerr := skipStringTrusted(s, 0)
		want, werr := reference(s, 0)
		if got != want || fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Fatalf("skipStringTrusted(%q) = %d, %v; want %d, %v", s, got, gerr, want, werr)
		}
	}
}
