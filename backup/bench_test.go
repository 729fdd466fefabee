package backup

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/convkit/convkit/fixtures"
)

// benchStore is $CONVKIT_BENCH_STORE (an existing store, e.g. one written by
// `convkit fixtures --large --conversations 2000`), else a generated one.
func benchStore(b *testing.B) string {
	if dir := os.Getenv("CONVKIT_BENCH_STORE"); dir != "" {
		return dir
	}
	dir := filepath.Join(b.TempDir(), "data")
	if _, err := fixtures.Generate(dir, fixtures.Options{Seed: 3, Conversations: 200, Large: true}); err != nil {
		b.Fatal(err)
	}
	return dir
}

type countWriter struct{ n int64 }

func (c *countWriter) Write(p []byte) (int, error) { c.n += int64(len(p)); return len(p), nil }

// BenchmarkWrite streams a backup of the store to a counter: bytes/s is
// the throughput over the store's bytes.
func BenchmarkWrite(b *testing.B) {
	dir := benchStore(b)
	var in, out int64
	for b.Loop() {
		cw := &countWriter{}
		opts := Options{TempDir: b.TempDir()}
		if l := os.Getenv("CONVKIT_BENCH_LEVEL"); l != "" {
			_, lvl := zstd.EncoderLevelFromString(l)
			opts.Archive.TextLevel, opts.Archive.CompressedLevel = lvl, lvl
		}
		res, err := writeBackup(context.Background(), dir, cw, opts)
		if err != nil {
			b.Fatal(err)
		}
		in, out = res.Manifest.Counts.Bytes, cw.n
	}
	b.SetBytes(in)
	b.ReportMetric(float64(in)/float64(out), "ratio")
}

var _ = io.Discard

// BenchmarkToDir is a whole backup as the command takes it: the lock, the
// archive written to a temporary file, fsynced and published.
func BenchmarkToDir(b *testing.B) {
	dir := benchStore(b)
	out := b.TempDir()
	var in int64
	for b.Loop() {
		res, err := toDir(context.Background(), dir, out, DirOptions{Retention: Retention{Last: 1}})
		if err != nil {
			b.Fatal(err)
		}
		in = res.Result.Manifest.Counts.Bytes
	}
	b.SetBytes(in)
}
