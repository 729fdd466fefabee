package reindex

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/store"
)

// BenchmarkRun rebuilds the index of a generated store of 500 ordinary
// conversations, or of the store named by CONVKIT_BENCH_STORE (reindexed in
// place: run `convkit reindex` on it once first, so its interrupted
// deletions are finished before the timing starts). For a profile of the
// whole rebuild:
//
//	convkit fixtures --to /tmp/s --seed 42 --conversations 10000
//	convkit --data-dir /tmp/s reindex
//	CONVKIT_BENCH_STORE=/tmp/s go test -run '^$' -bench Run -benchtime 3x -cpuprofile cpu.out ./reindex
func BenchmarkRun(b *testing.B) {
	benchRun(b, Options{})
}

// BenchmarkRunNoText is BenchmarkRun without the search index.
func BenchmarkRunNoText(b *testing.B) {
	benchRun(b, Options{NoText: true})
}

func benchRun(b *testing.B, opts Options) {
	dir := benchStore(b)
	ctx := context.Background()
	s, err := store.Open(ctx, dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "bench"}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	for range b.N {
		if _, err := Run(ctx, s, opts); err != nil {
			b.Fatal(err)
		}
	}
}

// benchStore is CONVKIT_BENCH_STORE, or a generated store.
func benchStore(b *testing.B) string {
	dir := os.Getenv("CONVKIT_BENCH_STORE")
	if dir == "" {
		dir = b.TempDir()
		if _, err := fixtures.Generate(dir, fixtures.Options{Seed: 42, Conversations: 500, OrdinaryOnly: true}); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

// BenchmarkRead reads every conversation in one goroutine, without SQLite:
// the readers' share of a rebuild.
func BenchmarkRead(b *testing.B) {
	dir := benchStore(b)
	tree, err := reader(b, dir).Walk()
	if err != nil {
		b.Fatal(err)
	}
	present := map[string]bool{}
	for _, c := range tree.Conversations {
		present[c.ID] = true
	}
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	for range b.N {
		for _, c := range tree.Conversations {
			readConversation(c, present, true)
		}
	}
}

// BenchmarkWrite writes every conversation, read beforehand, into a new
// index: the writer's share of a rebuild.
func BenchmarkWrite(b *testing.B) {
	dir := benchStore(b)
	tree, err := reader(b, dir).Walk()
	if err != nil {
		b.Fatal(err)
	}
	present := map[string]bool{}
	for _, c := range tree.Conversations {
		present[c.ID] = true
	}
	var all []*built
	for _, c := range tree.Conversations {
		if bt := readConversation(c, present, true); bt.conv != nil {
			all = append(all, bt)
		}
	}
	// A context that can be canceled, as the command's (a signal ends
	// it): the driver's cost per statement depends on it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ResetTimer()
	defer reportCPU(b, cpuTime())
	for i := range b.N {
		db, err := index.Create(filepath.Join(b.TempDir(), fmt.Sprintf("m%d.db", i)))
		if err != nil {
			b.Fatal(err)
		}
		w, err := db.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, bt := range all {
			if err := w.Put(ctx, bt.conv, bt.msgs); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Commit(); err != nil {
			b.Fatal(err)
		}
		if err := db.Finish(); err != nil {
			b.Fatal(err)
		}
	}
}

// cpuTime is the process's user and system CPU time so far. The machine is
// shared: CPU time per operation is steadier than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric((cpuTime()-start).Seconds()/float64(b.N), "cpu-s/op")
}
