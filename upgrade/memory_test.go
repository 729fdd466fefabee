package upgrade

import (
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
)

// TestMemoryFlat upgrades a large v0 log (packed chunk rows folded into
// streams by the v1→v2 step) and checks that the live heap stays small:
// memory does not grow with the log.
func TestMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("large log")
	}
	var sb strings.Builder
	sb.WriteString(v0Header + "\n")
	seq := 0
	line := func(typ, data string, extra ...string) {
		fmt.Fprintf(&sb, `{"type":%q,"seq":%d,"time":%d,"data":%s`, typ, seq, seq, data)
		for _, x := range extra {
			sb.WriteString("," + x)
		}
		sb.WriteString("}\n")
		seq++
	}
	texts := `"` + strings.Repeat("tok ", 5) + `"`
	for turn := 1; sb.Len() < 24<<20; turn++ {
		line("turn/start", fmt.Sprintf(`{"turn":%d}`, turn))
		line("step/start", fmt.Sprintf(`{"turn":%d,"step":1}`, turn))
		line("user/message", userMsg(fmt.Sprintf("u%d", turn), strings.Repeat("q", 500)), app)
		fmt.Fprintf(&sb, `{"type":"text-chunks","seq0":%d,"time0":%d,"data":{"turn":%d,"step":1,"index":0,"dt":[%s],"texts":[%s]}}`+"\n",
			seq, seq, turn, strings.TrimSuffix(strings.Repeat("1,", 99), ","), strings.TrimSuffix(strings.Repeat(texts+",", 100), ","))
		seq += 100
		line("assistant/message", fmt.Sprintf(`{"turn":%d,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"x"}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a%d"}}`, turn, turn), app)
		line("step/end", fmt.Sprintf(`{"turn":%d,"step":1}`, turn))
		line("turn/end", fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, turn))
	}
	p := filepath.Join(t.TempDir(), "s.jsonl")
	if err := os.WriteFile(p, []byte(sb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	sb = strings.Builder{}
	r, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var maxHeap uint64
	for n := 0; ; n++ {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if n%20000 == 0 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > maxHeap {
				maxHeap = ms.HeapAlloc
			}
		}
	}
	if maxHeap > 16<<20 {
		t.Fatalf("live heap reached %d MiB while upgrading a 24 MiB log", maxHeap>>20)
	}
	t.Logf("max live heap %.1f MiB", float64(maxHeap)/(1<<20))
}

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
	if err := fixtures.LargeLog(src, 3, convlog.Zstd, 40<<20, 1); err != nil {
		t.Fatal(err)
	}
	defer debug.SetGCPercent(debug.SetGCPercent(2))
	used := math.Inf(1)
	for run := 0; run < 2; run++ {
		used = math.Min(used, publishHighWater(t, src))
	}
	t.Logf("in-use heap rose at most %.1f MiB (%d cores)", used, cap(encodeSlots))
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
	dst, err := Publish(src, PublishOptions{Compression: &z, Children: []ChildFact{}})
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
