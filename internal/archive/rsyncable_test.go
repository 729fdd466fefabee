package archive

import (
	"bytes"
	"io"
	"math/rand/v2"
	"os/exec"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
)

// frames splits an archive into its zstd frames.
func frames(t *testing.T, data []byte) [][]byte {
	t.Helper()
	s := convlog.NewFrameScanner(convlog.Bytes(data), int64(len(data)))
	var out [][]byte
	for f, err := range s.Frames() {
		if err != nil || f.Torn {
			t.Fatalf("frame %d: %+v, %v", len(out)+1, f, err)
		}
		out = append(out, data[f.Offset:f.Offset+f.Size])
	}
	return out
}

// newBytes counts the bytes of b's frames that are not frames of a.
func newBytes(t *testing.T, a, b []byte) (n, total int) {
	t.Helper()
	old := map[string]bool{}
	for _, f := range frames(t, a) {
		old[string(f)] = true
	}
	for _, f := range frames(t, b) {
		total += len(f)
		if !old[string(f)] {
			n += len(f)
		}
	}
	return n, total
}

// TestRsyncableLayout: an rsyncable archive is the same bytes for the same
// entries, is read back by the Reader and by the zstd and tar tools, stores
// compressed entries verbatim, and when entries grow by appends (a
// compressed log, a plain one) or a text entry changes in its middle, the
// frames of the rest are the same bytes as before.
func TestRsyncableLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	mtime := time.Date(2026, 9, 1, 3, 15, 0, 0, time.UTC)
	index := randomText(rng, 900_000)
	plain := randomText(rng, 1_500_000)
	comp := randomBytes(rng, 700_000)
	small := make([][]byte, 40)
	for i := range small {
		small[i] = randomBytes(rng, 100+rng.IntN(3000))
	}
	build := func(index, plain, comp []byte) []entry {
		es := []entry{{logA, Text, plain}, {logB, Compressed, comp}}
		for i, b := range small {
			es = append(es, entry{convA + "/" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + ".v4.jsonl.zst", Compressed, b})
		}
		return append(es, entry{IndexName, Text, index}, entry{ManifestName, Text, []byte(`{"format":"x"}` + "\n")})
	}
	opts := WriterOptions{ModTime: mtime, ChunkSize: 256 << 10, Workers: 2, Rsyncable: true}
	a, _ := write(t, build(index, plain, comp), opts)
	a2, _ := write(t, build(index, plain, comp), opts)
	if !bytes.Equal(a, a2) {
		t.Fatal("two rsyncable archives of the same entries differ")
	}
	if !bytes.Contains(a, comp[:128<<10]) || !bytes.Contains(a, small[7]) {
		t.Error("compressed entries are not stored verbatim")
	}
	r, err := NewReader(bytes.NewReader(a), ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range build(index, plain, comp) {
		h, err := r.Next()
		if err != nil || h.Name != e.name {
			t.Fatalf("entry %s: %+v, %v", e.name, h, err)
		}
		got, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(got, e.data) {
			t.Fatalf("%s: read back %d of %d bytes, %v", e.name, len(got), len(e.data), err)
		}
	}
	r.Close()

	// Appends to the plain and the compressed log, two pages of the index
	// rewritten.
	grown := append(append([]byte{}, plain...), randomText(rng, 3000)...)
	grownComp := append(append([]byte{}, comp...), randomBytes(rng, 2000)...)
	edited := append([]byte{}, index...)
	copy(edited[300_000:], randomText(rng, 4096))
	copy(edited[700_000:], randomText(rng, 4096))
	b, _ := write(t, build(edited, grown, grownComp), opts)
	n, total := newBytes(t, a, b)
	// What may change: the frames holding the headers, the tails of the two
	// logs, the two edited pages of the index, each with up to a frame of
	// text around it (compressed, 1/3 of at most a chunk), and the
	// compressed log's last raw frame.
	if limit := 6*(256<<10)/3 + 256<<10; n > limit || n == 0 {
		t.Errorf("%d of %d bytes in frames the first archive lacks, want at most %d", n, total, limit)
	}
	t.Logf("after the appends and edits, %d of %d bytes are in new frames", n, total)

	// The default layout spreads such a change over every later frame.
	opts.Rsyncable = false
	da, _ := write(t, build(index, plain, comp), opts)
	db, _ := write(t, build(edited, grown, grownComp), opts)
	if dn, dtotal := newBytes(t, da, db); dn < dtotal/2 {
		t.Errorf("the default layout: %d of %d bytes new; the test does not change what it means to", dn, dtotal)
	}

	needTools(t, "zstd", "tar")
	p := testedByZstd(t, b)
	got, err := exec.Command("sh", "-c", `zstd -dcq "$1" | tar -xOf - "$2"`, "sh", p, logB).Output()
	if err != nil || !bytes.Equal(got, grownComp) {
		t.Fatalf("zstd -dc | tar -xO gave %d bytes of %d (%v)", len(got), len(grownComp), err)
	}
}

// TestEntryModTime: each entry carries the time set for it, the writer's
// ModTime until one is.
func TestEntryModTime(t *testing.T) {
	needTools(t, "zstd", "tar")
	var buf bytes.Buffer
	w := NewWriter(&buf, WriterOptions{ModTime: time.Unix(1_790_000_000, 0)})
	writeBytes(w, logA, Text, []byte("a\n"))
	w.SetModTime(time.Unix(1_700_000_000, 900_000_000))
	writeBytes(w, logB, Compressed, []byte("b"))
	w.SetModTime(time.Time{})
	writeBytes(w, ManifestName, Text, []byte("{}\n"))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	p := testedByZstd(t, buf.Bytes())
	out, err := exec.Command("sh", "-c", `zstd -dcq "$1" | TZ=UTC tar -tvf - --full-time`, "sh", p).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2026-09-21 14:13:20 " + logA, "2023-11-14 22:13:20 " + logB, "2026-09-21 14:13:20 " + ManifestName} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("tar -tv lists\n%s\nwithout %q", out, want)
		}
	}
}
