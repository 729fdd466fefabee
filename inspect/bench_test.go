//go:build unix

package inspect

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
)

// BenchmarkValidateShortLines validates a compressed v4 log of many short
// text lines (8 MiB plain, or the log named by CONVKIT_BENCH_LOG) and
// reports the time, the CPU time (every goroutine's) and the allocations
// per line. For a profile:
//
//	go run ./scripts/genlog -version 4 -lines short -zstd /tmp/short.v4.jsonl.zst
//	CONVKIT_BENCH_LOG=/tmp/short.v4.jsonl.zst go test -run '^$' -bench Validate -cpuprofile cpu.out ./inspect
func BenchmarkValidateShortLines(b *testing.B) {
	path := os.Getenv("CONVKIT_BENCH_LOG")
	if path == "" {
		path = filepath.Join(b.TempDir(), "short.v4.jsonl.zst")
		if err := fixtures.LargeLogOf(path, "", convlog.CurrentVersion, convlog.Zstd, fixtures.ShortLines, 8<<20, 1); err != nil {
			b.Fatal(err)
		}
	}
	ctx := context.Background()
	var lines int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cpuTime()
	for range b.N {
		t, err := Resolve(path)
		if err != nil {
			b.Fatal(err)
		}
		v, err := Validate(ctx, t, ValidateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if !v.Valid {
			b.Fatalf("%s: not valid: %+v", path, v.Problems)
		}
		lines = v.Events
	}
	b.StopTimer()
	b.ReportMetric((cpuTime()-cpu).Seconds()/float64(b.N), "cpu-s/op")
	if lines > 0 {
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(int64(b.N)*lines), "ns/line")
	}
}

// cpuTime is the process's CPU time, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
