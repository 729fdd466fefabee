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
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/upgrade"
)

// This test lives outside package upgrade: it writes its log with
// fixtures, which imports store, which imports upgrade.

// TestPublishMemoryLongLines publishes a compressed v3 log whose tool
// outputs are single lines of 1–3 MiB (and base64 screenshots of half that)
// and checks the high-water mark of the in-use heap, sampled while the
// successor is written and verified. The heap is kept close to the live
// data (GOGC 2), so the mark follows what the upgrade holds at once: the
// source frame and line, the upgraded line, the chunk being filled, the
// frames in flight and the encoders' windows (docs/PERFORMANCE.md,
// migrate). It was 46–51 MiB before frames in flight were bounded, the
// encoders' history halved and large buffers let go; 36–42 MiB after. The
// lower mark of two runs is taken, as a busy machine can shift a frame's
// compression and so what is held at once.
func TestPublishMemoryLongLines(t *testing.T) {
	if testing.Short() {
		t.Skip("large log")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "large.v3.jsonl.zst")
	if err := fixtures.LargeLog(src, 3, convlog.Zstd, fixtures.LongLines, 40<<20, 1); err != nil {
		t.Fatal(err)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(2))
	used := math.Inf(1)
	for run := 0; run < 2; run++ {
		used = math.Min(used, publishHighWater(t, src))
	}
	t.Logf("in-use heap rose at most %.1f MiB (%d cores)", used, upgrade.EncodeSlots())
	// One job's share of the migrate target is 32 MiB beside 64 MiB for
	// the process, and migrate sets a soft memory limit to match.
	const limit = 44
	if used > limit {
		t.Errorf("in-use heap rose %.1f MiB while publishing a log of 1–3 MiB lines; the bound is %d MiB", used, limit)
	}
}

// publishHighWater publishes src and returns by how many MiB the in-use
// heap rose above what it was before, at most, sampled every 200 µs.
func publishHighWater(t *testing.T, src string) float64 {
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
