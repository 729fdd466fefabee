package upgrade_test

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/convlog/upgrade"
	"github.com/convkit/convkit/fixtures"
)

// This benchmark lives outside package upgrade: it writes its log with
// fixtures, which imports store, which imports upgrade.

// BenchmarkPublishMemoryLongLines publishes a compressed v3 log whose tool
// outputs are single lines of 1–3 MiB (and base64 screenshots of half
// that) and reports the high-water mark of the in-use heap
// (MiB-heap-rise), sampled while the successor is written and verified.
// The heap is kept close to the live data (GOGC 2), so the mark follows
// what the upgrade holds at once: the source frames and line, the
// upgraded line, the chunk being filled, the frames in flight and being
// checked, the encoders' windows (docs/PERFORMANCE.md, migrate). The lower
// mark of two runs is taken, as a busy machine can shift a frame's
// compression and so what is held at once. A figure, not an assertion:
// memory is measured, never asserted in a test.
func BenchmarkPublishMemoryLongLines(b *testing.B) {
	dir := b.TempDir()
	src := filepath.Join(dir, "large.v3.jsonl.zst")
	if err := fixtures.LargeLog(src, 3, convlog.Zstd, fixtures.LongLines, 40<<20, 1); err != nil {
		b.Fatal(err)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(2))
	for b.Loop() {
		used := math.Inf(1)
		for run := 0; run < 2; run++ {
			used = math.Min(used, publishHighWater(b, src))
		}
		b.ReportMetric(used, "MiB-heap-rise")
		b.ReportMetric(float64(runtime.GOMAXPROCS(0)), "cores")
	}
}

// publishHighWater publishes src and returns by how many MiB the in-use
// heap rose above what it was before, at most, sampled every 200 µs.
func publishHighWater(t testing.TB, src string) float64 {
	t.Helper()
	// Two collections: the first moves pooled buffers to the victim
	// caches, the second frees them.
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse

	stop := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var high uint64
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			high = max(high, ms.HeapInuse)
			select {
			case <-stop:
				peak <- high
				return
			case <-tick.C:
			}
		}
	}()
	z := convlog.Zstd
	dst, err := upgrade.Publish(src, upgrade.PublishOptions{Compression: &z, Children: []upgrade.ChildFact{}})
	close(stop)
	high := <-peak
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(dst); err != nil {
		t.Fatal(err)
	}
	return float64(high-min(base, high)) / (1 << 20)
}
