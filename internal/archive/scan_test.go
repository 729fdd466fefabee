package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// emptyEntries is an archive of n empty entries in one conversation
// directory, compressed as an attacker would: megabytes of tar headers in
// a few kilobytes.
func emptyEntries(tb testing.TB, n int) []byte {
	tb.Helper()
	var out bytes.Buffer
	zw, err := zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		tb.Fatal(err)
	}
	tw := tar.NewWriter(zw)
	for i := range n {
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("conversations/c/s%07d.v4.jsonl", i), Mode: 0o600, Typeflag: tar.TypeReg}); err != nil {
			tb.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return out.Bytes()
}

// TestScan: Scan counts the entries of a good archive and refuses what
// Extract refuses, at the same entry, having written nothing.
func TestScan(t *testing.T) {
	ctx := context.Background()
	if n, _, err := scan(ctx, bytes.NewReader(emptyEntries(t, 300)), t.TempDir(), nil, ExtractOptions{}); n != 300 || err != nil {
		t.Fatalf("300 entries: %d, %v", n, err)
	}
	_, _, err := scan(ctx, bytes.NewReader(emptyEntries(t, 301)), t.TempDir(), nil, ExtractOptions{ReaderOptions: ReaderOptions{Archive: "a.tar.zst", Limits: Limits{MaxEntries: 300}}})
	var ae *Error
	if !errors.As(err, &ae) || ae.Entry != 301 || !strings.Contains(err.Error(), `a.tar.zst: entry 301 "conversations/c/s0000300.v4.jsonl" (tar byte 153600): more than 300 entries`) {
		t.Fatalf("301 entries, limit 300: %v", err)
	}
	// A declared size over the free space is refused at its header, as
	// Extract refuses it, before a byte of it is read.
	big := zstdOf(t, ustar(logA, tar.TypeReg, 900<<30, false))
	_, _, err = scan(ctx, bytes.NewReader(big), t.TempDir(), nil, ExtractOptions{ReaderOptions: ReaderOptions{Archive: "big"}, SpaceName: "DATA"})
	if !errors.As(err, &ae) || ae.Entry != 1 || !strings.Contains(err.Error(), "refused: extracting the archive up to this entry needs 966367641600 bytes") ||
		!strings.Contains(err.Error(), "on the file system of DATA") {
		t.Fatalf("900 GiB declared: %v", err)
	}
	for name, data := range hostileCases(t) {
		_, _, err := scan(ctx, bytes.NewReader(data), t.TempDir(), nil, ExtractOptions{ReaderOptions: ReaderOptions{Archive: name, Limits: Limits{MaxWindow: 8 << 20}}})
		// Names are Extract's to find twice: the scan keeps none.
		if name == "setuid regular" || name == "duplicate" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
			continue
		}
		if !errors.As(err, &ae) {
			t.Errorf("%s: %v, want an *archive.Error", name, err)
		}
	}
}

// TestManifestScan: the manifest must come last, as Verify wants it; a
// spool receives every byte of the archive scanned.
func TestManifestScan(t *testing.T) {
	ctx := context.Background()
	opts := ExtractOptions{ReaderOptions: ReaderOptions{Archive: "a.tar.zst", CheckName: func(string) error { return nil }}}
	err := testFormat.Scan(ctx, bytes.NewReader(emptyEntries(t, 3)), t.TempDir(), nil, opts)
	var ae *Error
	if !errors.As(err, &ae) || err.Error() != "a.tar.zst: no MANIFEST.json as the last entry: an incomplete archive, or not a convkit test" {
		t.Fatalf("no manifest: %v", err)
	}
	good := writeWithManifest(t, []entry{{name: logA, kind: Text, data: []byte("abc")}}, &testManifest{ManifestHeader: testFormat.Header("v1", time.Now())}, nil)
	var spool bytes.Buffer
	if err := testFormat.Scan(ctx, bytes.NewReader(good), t.TempDir(), &spool, opts); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(spool.Bytes(), good) {
		t.Fatalf("spool holds %d bytes of the %d read", spool.Len(), len(good))
	}
	// A spool that fails stops the reading with its problem.
	err = testFormat.Scan(ctx, bytes.NewReader(good), t.TempDir(), &failWriter{}, opts)
	if !errors.As(err, &ae) || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("failing spool: %v", err)
	}
}

// BenchmarkScanEmptyEntries reads an archive of 100,000 empty entries
// through, as an import dry run first does.
func BenchmarkScanEmptyEntries(b *testing.B) {
	data := emptyEntries(b, 100_000)
	dir := b.TempDir()
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, _, err := scan(context.Background(), bytes.NewReader(data), dir, nil, ExtractOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(100_000*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}
