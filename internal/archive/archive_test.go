package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/convkit/convkit/convlog"
)

const (
	convA = "conversations/0f7186fa-c74c-4bb0-9bd8-4ca3eb3f387b"
	logA  = convA + "/metadata.v4.jsonl"
	logB  = convA + "/1b688bed-3725-43cf-b410-efb077675796.v4.jsonl.zst"
	logC  = "conversations/team~002Fx/~006Detadata.v3.jsonl"
)

type entry struct {
	name string
	kind Kind
	data []byte
}

func randomText(rng *rand.Rand, n int) []byte {
	words := []string{"the", "model", "called", "a", "tool", "with", "arguments", "{\"path\":", "\"src/main.go\"}", "\n"}
	var b bytes.Buffer
	for b.Len() < n {
		b.WriteString(words[rng.IntN(len(words))])
		b.WriteByte(' ')
	}
	return b.Bytes()[:n]
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// write builds an archive of entries with a small chunk size, so that
// entries span frames.
func write(t *testing.T, entries []entry, opts WriterOptions) ([]byte, []Sum) {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, opts)
	var sums []Sum
	for i, e := range entries {
		var s Sum
		var err error
		if i%2 == 0 {
			s, err = writeBytes(w, e.name, e.kind, e.data)
		} else {
			s, err = w.WriteEntry(e.name, e.kind, int64(len(e.data)), bytes.NewReader(e.data))
		}
		if err != nil {
			t.Fatal(err)
		}
		if s.SHA256 != sha256.Sum256(e.data) || s.Size != int64(len(e.data)) {
			t.Fatalf("%s: sum %x size %d", e.name, s.SHA256, s.Size)
		}
		sums = append(sums, s)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	frames := 0
	for _, err := range convlog.NewFrameScanner(convlog.Bytes(buf.Bytes()), int64(buf.Len())).Frames() {
		if err != nil {
			t.Fatal(err)
		}
		frames++
	}
	if n := w.Written(); n != int64(buf.Len()) || (opts.ChunkSize > 0 && opts.ChunkSize < 512<<10 && frames < 2) {
		t.Fatalf("%d bytes written, %d frames for %d bytes", n, frames, buf.Len())
	}
	return buf.Bytes(), sums
}

func sampleEntries() []entry {
	rng := rand.New(rand.NewPCG(1, 2))
	return []entry{
		{IndexName, Text, randomText(rng, 300_000)},
		{logA, Text, randomText(rng, 1_000_000)},
		{logB, Compressed, randomBytes(rng, 700_000)},
		{logC, Text, nil}, // empty
		{ManifestName, Text, []byte(`{"format":"x"}` + "\n")},
	}
}

func TestRoundTrip(t *testing.T) {
	entries := sampleEntries()
	mtime := time.Date(2026, 9, 1, 9, 0, 0, 500, time.UTC)
	data, _ := write(t, entries, WriterOptions{ModTime: mtime, ChunkSize: 256 << 10, Workers: 3})

	ar, err := NewReader(bytes.NewReader(data), ReaderOptions{Archive: "a.tar.zst"})
	if err != nil {
		t.Fatal(err)
	}
	defer ar.Close()
	for i, e := range entries {
		h, err := ar.Next()
		if err != nil {
			t.Fatal(err)
		}
		if h.Index != i+1 || h.Name != e.name || h.Size != int64(len(e.data)) {
			t.Fatalf("entry %d: %+v", i, h)
		}
		got, err := io.ReadAll(ar)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, e.data) {
			t.Fatalf("%s: content differs", e.name)
		}
	}
	if _, err := ar.Next(); err != io.EOF {
		t.Fatalf("after the last entry: %v", err)
	}

	// The container is plain tar in zstd: every entry a regular 0600 file
	// without owner, with the caller's time (whole seconds).
	dec, _ := zstd.NewReader(bytes.NewReader(data))
	defer dec.Close()
	tr := tar.NewReader(dec)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg || h.Mode != 0o600 || h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" ||
			!h.ModTime.Equal(mtime.Truncate(time.Second)) {
			t.Fatalf("header %+v", h)
		}
	}
}

// needTools skips the test unless every tool is installed.
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool + " not installed")
		}
	}
}

// testedByZstd writes the archive data to a file of its own, has `zstd -t`
// test it and returns its path.
func testedByZstd(t *testing.T, data []byte) string {
	t.Helper()
	a := filepath.Join(t.TempDir(), "a.tar.zst")
	if err := os.WriteFile(a, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("zstd", "-t", "-q", a).CombinedOutput(); err != nil {
		t.Fatalf("zstd -t: %v\n%s", err, out)
	}
	return a
}

// TestZstdToolReadsArchive checks interop with the real zstd and tar tools.
func TestZstdToolReadsArchive(t *testing.T) {
	needTools(t, "zstd", "tar")
	entries := sampleEntries()
	data, _ := write(t, entries, WriterOptions{ChunkSize: 128 << 10})
	a := testedByZstd(t, data)
	dir := filepath.Dir(a)
	out, err := exec.Command("sh", "-c", "zstd -dc "+a+" | tar -tf -").Output()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range entries {
		want = append(want, e.name)
	}
	if got := strings.Fields(string(out)); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("tar -t lists %q, want %q", got, want)
	}
	x := filepath.Join(dir, "x")
	os.Mkdir(x, 0o700)
	if out, err := exec.Command("sh", "-c", "zstd -dc "+a+" | tar -xf - -C "+x).CombinedOutput(); err != nil {
		t.Fatalf("tar -x: %v\n%s", err, out)
	}
	got, err := os.ReadFile(filepath.Join(x, logB))
	if err != nil || !bytes.Equal(got, entries[2].data) {
		t.Fatalf("tar extracted %d bytes (%v)", len(got), err)
	}
}

func TestWriterRefuses(t *testing.T) {
	w := NewWriter(io.Discard, WriterOptions{})
	defer w.Abort()
	for _, name := range []string{"", "/etc/passwd", "a/../b", "./a", "a//b", "a/"} {
		if _, err := writeBytes(w, name, Text, nil); err == nil {
			t.Fatalf("%q accepted", name)
		}
	}
	w = NewWriter(io.Discard, WriterOptions{})
	if _, err := writeBytes(w, logA, Text, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := writeBytes(w, logA, Text, []byte("x")); err == nil {
		t.Fatal("a second entry of one name accepted")
	}
	w.Abort()
	// A reader giving fewer bytes than announced breaks the archive.
	w = NewWriter(io.Discard, WriterOptions{})
	if _, err := w.WriteEntry(logA, Text, 10, strings.NewReader("short")); err == nil {
		t.Fatal("short entry accepted")
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close after a failed entry succeeded")
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("disk full")
	}
	f.n--
	return len(p), nil
}

func TestWriterReportsWriteErrors(t *testing.T) {
	w := NewWriter(&failWriter{n: 1}, WriterOptions{ChunkSize: 64 << 10})
	rng := rand.New(rand.NewPCG(3, 4))
	var err error
	for i := 0; i < 20 && err == nil; i++ {
		_, err = writeBytes(w, fmt.Sprintf("%s/s%d.v4.jsonl", convA, i), Text, randomText(rng, 100_000))
	}
	if cerr := w.Close(); err == nil && cerr == nil {
		t.Fatal("no error from a failing destination")
	}
}

func TestCheckStoreName(t *testing.T) {
	ok := []string{ManifestName, IndexName, logA, logB, logC, "conversations/a/b.v2.jsonl.zstd", "conversations/a/b.jsonl"}
	bad := []string{
		"", "/metadata.db", "../metadata.db", "conversations/../x", "conversations/a/../../x",
		"conversations", "conversations/a", "conversations/a/b/c.v4.jsonl", "conversations/a/notes.txt",
		"conversations/a/b.v0.jsonl", "conversations/a/b.v4.jsonl.tmp", "conversations/./b.v4.jsonl",
		"conversations/a b/c.v4.jsonl", "conversations/a/b c.v4.jsonl", "other/a/b.v4.jsonl", "runtime.lock",
		"metadata.db-wal", "conversations/a\\b/c.v4.jsonl", "conversations/a/metadata.v4.jsonl/x",
		"conversations/~002e/b.v4.jsonl", "conversations/a/b.c.v4.jsonl",
	}
	for _, n := range ok {
		if err := CheckStoreName(n); err != nil {
			t.Errorf("%q refused: %v", n, err)
		}
	}
	for _, n := range bad {
		if err := CheckStoreName(n); err == nil {
			t.Errorf("%q accepted", n)
		}
	}
}

// hostile builds a tar.zst stream from raw tar headers, the way an
// attacker would.
func hostile(t *testing.T, hdrs ...*tar.Header) []byte {
	t.Helper()
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, h := range hdrs {
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg && h.Size > 0 {
			tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
		}
	}
	tw.Close()
	return zstdOf(t, tb.Bytes())
}

func zstdOf(t *testing.T, b []byte) []byte {
	t.Helper()
	e, _ := zstd.NewWriter(nil)
	defer e.Close()
	return e.EncodeAll(b, nil)
}

func hostileCases(t *testing.T) map[string][]byte {
	ok := &tar.Header{Name: logA, Size: 3}
	cases := map[string][]byte{
		"absolute":        hostile(t, ok, &tar.Header{Name: "/tmp/evil", Size: 3}),
		"dotdot":          hostile(t, ok, &tar.Header{Name: "../evil.v4.jsonl", Size: 3}),
		"dotdot inside":   hostile(t, ok, &tar.Header{Name: "conversations/../../evil", Size: 3}),
		"symlink":         hostile(t, ok, &tar.Header{Name: logB, Typeflag: tar.TypeSymlink, Linkname: "/etc/passwd"}),
		"hard link":       hostile(t, ok, &tar.Header{Name: logB, Typeflag: tar.TypeLink, Linkname: logA}),
		"directory":       hostile(t, ok, &tar.Header{Name: convA + "/", Typeflag: tar.TypeDir, Mode: 0o755}),
		"char device":     hostile(t, ok, &tar.Header{Name: logB, Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3}),
		"block device":    hostile(t, ok, &tar.Header{Name: logB, Typeflag: tar.TypeBlock, Devmajor: 8}),
		"fifo":            hostile(t, ok, &tar.Header{Name: logB, Typeflag: tar.TypeFifo}),
		"duplicate":       hostile(t, ok, &tar.Header{Name: logA, Size: 3}),
		"outside layout":  hostile(t, ok, &tar.Header{Name: "etc/cron.d/evil", Size: 3}),
		"noncanonical":    hostile(t, ok, &tar.Header{Name: "conversations/x/./y.v4.jsonl", Size: 3}),
		"runtime.lock":    hostile(t, ok, &tar.Header{Name: "runtime.lock", Size: 3}),
		"setuid regular":  hostile(t, ok, &tar.Header{Name: "conversations/x/y.v4.jsonl", Size: 3, Mode: 0o4755, Uid: 0}),
		"not zstd":        []byte("this is not an archive at all, just text\n"),
		"truncated":       hostile(t, ok, &tar.Header{Name: logB, Size: 3})[:40],
		"trailing frames": append(hostile(t, ok), zstdOf(t, bytes.Repeat([]byte{1}, 2<<20))...),
	}
	// A zstd frame that asks for a window over the limit.
	var big bytes.Buffer
	zw, _ := zstd.NewWriter(&big, zstd.WithWindowSize(64<<20), zstd.WithEncoderConcurrency(1))
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	tw.WriteHeader(&tar.Header{Name: logA, Size: 1 << 20, Mode: 0o600, Typeflag: tar.TypeReg})
	tw.Write(randomBytes(rand.New(rand.NewPCG(7, 8)), 1<<20))
	tw.Close()
	zw.Write(tb.Bytes())
	zw.Close()
	cases["huge window"] = big.Bytes()
	return cases
}

func TestReaderRefusesHostileArchives(t *testing.T) {
	for name, data := range hostileCases(t) {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "x")
			os.Mkdir(dir, 0o700)
			_, err := Extract(context.Background(), bytes.NewReader(data), dir, ExtractOptions{
				ReaderOptions: ReaderOptions{Archive: name, Limits: Limits{MaxWindow: 8 << 20}}})
			if name == "setuid regular" {
				// A regular file in the layout: accepted, and written 0600
				// whatever the header says.
				if err != nil {
					t.Fatal(err)
				}
				fi, err := os.Stat(filepath.Join(dir, "conversations/x/y.v4.jsonl"))
				if err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&fs.ModeSetuid != 0 {
					t.Fatalf("mode %v (%v)", fi.Mode(), err)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			var ae *Error
			if !errors.As(err, &ae) {
				t.Fatalf("error %T %v is not an *archive.Error", err, err)
			}
			t.Log(err)
			// Nothing outside dir.
			ents, _ := os.ReadDir(parent)
			if len(ents) != 1 {
				t.Fatalf("the parent holds %d entries", len(ents))
			}
			if _, err := os.Lstat("/tmp/evil"); err == nil {
				t.Fatal("/tmp/evil was written")
			}
		})
	}
}

func TestExtractModesIgnoreUmask(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	data, _ := write(t, sampleEntries(), WriterOptions{})
	dir := t.TempDir()
	ents, err := Extract(context.Background(), bytes.NewReader(data), dir, ExtractOptions{Sync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range slices.Collect(ents.All(ents.Len())) {
		if want := sha256.Sum256(sampleEntries()[i].data); e.SHA256 != want {
			t.Fatalf("%s: sha differs", e.Name)
		}
	}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := d.Info()
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
			if p == dir {
				return nil
			}
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v", p, fi.Mode().Perm())
		}
		return nil
	})
}

func TestReaderLimits(t *testing.T) {
	data, _ := write(t, sampleEntries(), WriterOptions{})
	for _, lim := range []Limits{{MaxEntries: 3}, {MaxEntryBytes: 500_000}, {MaxTotalBytes: 1_500_000}} {
		_, err := Extract(context.Background(), bytes.NewReader(data), t.TempDir(), ExtractOptions{ReaderOptions: ReaderOptions{Limits: lim}})
		if !errors.Is(err, ErrRefused) {
			t.Fatalf("%+v: %v", lim, err)
		}
	}
}

// TestDamageIsFound flips bytes all over an archive: the frame checksums,
// the block structure or tar's own header checksums catch every flip that
// the reader does not simply ignore (padding).
func TestDamageIsFound(t *testing.T) {
	data, _ := write(t, sampleEntries(), WriterOptions{ChunkSize: 64 << 10})
	rng := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < 200; i++ {
		bad := bytes.Clone(data)
		pos := rng.IntN(len(bad))
		bad[pos] ^= byte(1 + rng.IntN(255))
		ents, err := Extract(context.Background(), bytes.NewReader(bad), t.TempDir(), ExtractOptions{})
		if err != nil {
			continue
		}
		// Accepted only if every entry is intact.
		for j, e := range slices.Collect(ents.All(ents.Len())) {
			if e.SHA256 != sha256.Sum256(sampleEntries()[j].data) {
				t.Fatalf("flip at %d: %s changed silently", pos, e.Name)
			}
		}
	}
}

func FuzzReader(f *testing.F) {
	for _, e := range sampleEntries()[1:3] {
		var buf bytes.Buffer
		w := NewWriter(&buf, WriterOptions{})
		writeBytes(w, e.name, e.kind, e.data[:1000])
		w.Close()
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		parent := t.TempDir()
		dir := filepath.Join(parent, "x")
		os.Mkdir(dir, 0o700)
		Extract(context.Background(), bytes.NewReader(data), dir, ExtractOptions{ReaderOptions: ReaderOptions{
			Limits: Limits{MaxEntries: 100, MaxTotalBytes: 1 << 20, MaxWindow: 1 << 20}}})
		filepath.WalkDir(parent, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && !d.Type().IsRegular() {
				t.Fatalf("%s: not a regular file", p)
			}
			return nil
		})
	})
}

// TestWriterRefusesDuplicateNames: a name written twice is refused, in
// its directory or after it was left, without a set of every name.
func TestWriterRefusesDuplicateNames(t *testing.T) {
	for _, tc := range []struct {
		names []string
		bad   string // the name refused; "" none
	}{
		{[]string{"conversations/a/x", "conversations/a/y", "conversations/b/x", "metadata.db", "MANIFEST.json"}, ""},
		{[]string{"conversations/a/x", "conversations/a/x"}, "conversations/a/x"},
		{[]string{"metadata.db", "conversations/a/x", "MANIFEST.json"}, ""},
		{[]string{"metadata.db", "conversations/a/x", "metadata.db"}, "metadata.db"},
		{[]string{"conversations/a/x", "conversations/b/x", "conversations/a/y"}, "conversations/a/y"},
		{[]string{"conversations/a/x", "conversations/b/x", "conversations/a/x"}, "conversations/a/x"},
		{[]string{"MANIFEST.json", "MANIFEST.json"}, "MANIFEST.json"},
	} {
		w := NewWriter(io.Discard, WriterOptions{})
		var refused string
		for _, n := range tc.names {
			if _, err := writeBytes(w, n, Text, []byte("x")); err != nil {
				refused = n
				if !strings.Contains(err.Error(), n) {
					t.Errorf("%v: the error does not name the entry: %v", tc.names, err)
				}
				break
			}
		}
		if refused != tc.bad {
			t.Errorf("%v: refused %q, want %q", tc.names, refused, tc.bad)
		}
		w.Abort()
	}
}

func writeBytes(w *Writer, name string, kind Kind, data []byte) (Sum, error) {
	return w.WriteHashed(name, kind, data, sha256.Sum256(data))
}
