package convlog

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
)

// TestCommittedPrefixForeignFraming: for logs the zstd tool wrote in
// another framing than the writer's (one frame for the whole text, frames
// cut inside lines) and logs whose text ends inside a line (a torn line in
// a complete frame, or a plain torn line), the committed prefix is where
// the reader puts CommittedBytes, its recovered lines are those the reader
// returns, and a copy (what backup and export archive) reads as exactly
// the events the reader accepts, with no torn tail.
func TestCommittedPrefixForeignFraming(t *testing.T) {
	dir := t.TempDir()
	plain := mustRead(t, writeLog(t, dir, "s1.v4.jsonl", Plain, sampleTurn(1), sampleTurn(2)))
	torn := append(bytes.Clone(plain), `{"type":"turn/start","seq":99,"ti`...)
	// frames compresses text in pieces of n bytes (n 0: one frame), each
	// a frame of the zstd tool.
	frames := func(text []byte, n int) []byte {
		if n == 0 {
			return zstdTool(t, text)
		}
		var out []byte
		for off := 0; off < len(text); off += n {
			out = append(out, zstdTool(t, text[off:min(off+n, len(text))])...)
		}
		return out
	}
	header := bytes.IndexByte(plain, '\n') + 1
	cases := []struct {
		name string
		comp Compression
		data []byte
	}{
		{"one frame", Zstd, frames(plain, 0)},
		{"frames cut inside lines", Zstd, frames(plain, 97)},
		{"header frame, then one frame cut inside a line", Zstd, append(frames(plain[:header], 0), frames(plain[header:], len(plain)-header-40)...)},
		{"one frame ending inside a line", Zstd, frames(torn, 0)},
		{"frames cut inside lines, the last ending inside one", Zstd, frames(torn, 97)},
		{"canonical frames, then one ending inside a line", Zstd, append(frames(plain[:header], 0), append(frames(plain[header:], 0), frames(torn[len(plain):], 0)...)...)},
		{"frames cut inside lines, the last torn", Zstd, func() []byte { b := frames(plain, 97); return b[:len(b)-7] }()},
		{"one frame, torn", Zstd, func() []byte { b := frames(plain, 0); return b[:len(b)-3] }()},
		{"plain, a torn last line", Plain, torn},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			evs, st, err := readBytes(t, c.data, c.comp)
			if err != nil {
				t.Fatal(err)
			}
			p, err := CommittedPrefix(Bytes(c.data), int64(len(c.data)), c.comp, "x")
			if err != nil {
				t.Fatal(err)
			}
			fp, ferr := CommittedPrefix(bytes.NewReader(c.data), int64(len(c.data)), c.comp, filepath.Join(dir, "x.v4.jsonl.zst"))
			if ferr != nil || fp.Bytes != p.Bytes || fp.Torn != p.Torn || fp.RecoveredLines != p.RecoveredLines {
				t.Fatalf("through the file %+v %v, in memory %+v", fp, ferr, p)
			}
			if p.Bytes != st.CommittedBytes || p.Torn != st.TornTail || p.RecoveredLines != st.RecoveredLines {
				t.Fatalf("prefix %d bytes, torn %v, %d lines recovered; the reader: %d bytes, torn %v, %d lines recovered",
					p.Bytes, p.Torn, p.RecoveredLines, st.CommittedBytes, st.TornTail, st.RecoveredLines)
			}
			// A strict read that found the log whole gives the same prefix.
			comp := c.comp
			r, err := NewReader(bytes.NewReader(c.data), int64(len(c.data)), "x", ReaderOptions{Version: -1, Compression: &comp})
			if err != nil {
				t.Fatal(err)
			}
			for _, err = range r.Events() {
				// err is what ended the read: nil at the end.
			}
			rp, whole := r.ReadPrefix()
			r.Close()
			if err != nil || whole != (!p.Torn && p.RecoveredLines == 0 && p.Bytes == int64(len(c.data))) || whole && rp != p {
				t.Fatalf("read to %v, ReadPrefix %+v %v; the prefix %+v", err, rp, whole, p)
			}
			cp := copyOf(t, p, c.data)
			cevs, cst, err := readBytes(t, cp, c.comp)
			if err != nil || cst.TornTail || len(cevs) != len(evs) {
				t.Fatalf("the copy reads %d events of %d, torn %v: %v", len(cevs), len(evs), cst.TornTail, err)
			}
			for i := range evs {
				if !bytes.Equal(cevs[i].Raw, evs[i].Raw) {
					t.Fatalf("event %d of the copy is %s, want %s", i, cevs[i].Raw, evs[i].Raw)
				}
			}
			if !bytes.HasPrefix(cp, c.data[:p.Bytes]) {
				t.Fatal("the copy does not begin with the committed bytes")
			}
			t.Log(fmt.Sprintf("%d events; committed %d of %d bytes, %d lines recovered, copy %d bytes", len(evs), p.Bytes, len(c.data), p.RecoveredLines, len(cp)))
		})
	}
}
