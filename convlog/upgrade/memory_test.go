package upgrade

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// BenchmarkMemoryFlat upgrades a large v0 log (packed chunk rows folded
// into streams by the v1→v2 step) and reports the highest live heap seen
// (MiB-live): memory does not grow with the log (docs/UPGRADE.md). A
// figure, not an assertion: memory is measured, never asserted in a test.
func BenchmarkMemoryFlat(b *testing.B) {
	for b.Loop() {
		b.ReportMetric(memoryFlat(b), "MiB-live")
	}
}

func memoryFlat(t testing.TB) float64 {
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
	n := 0
	for _, err := range r.Events() {
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
		n++
	}
	return float64(maxHeap) / (1 << 20)
}
