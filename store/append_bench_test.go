package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/durable"
)

// appendSessions opens a store in dir with n conversations, each with a
// turn running, for appends.
func appendSessions(b *testing.B, dir string, n int, comp convlog.Compression) (*Store, []*Session) {
	s, err := Open(context.Background(), dir, OpenOptions{Lock: LockOptions{Mode: LockExclusive, Command: "bench"}, Create: CreateAlways, Compression: comp})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	var ses []*Session
	for i := range n {
		se, err := s.NewConversation(NewConversation{ID: fmt.Sprintf("c%d", i), Cwd: "/w", SessionID: "root", Agent: "a", Model: "m"})
		if err != nil {
			b.Fatal(err)
		}
		p, _ := convlog.NewUserMessage("u1", convlog.TextBlock("go"))
		if _, err := se.BeginTurn(p); err != nil {
			b.Fatal(err)
		}
		ses = append(ses, se)
	}
	return s, ses
}

// stepCalls records k events in se: alternately step/start and step/end.
func stepCalls(se *Session, k int) error {
	for range k {
		var err error
		if se.rec.stepOpen {
			err = se.EndStep()
		} else {
			_, err = se.BeginStep()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parallel runs fn(i) for i < n in n goroutines and returns the time it
// took them all.
func parallel(n int, fn func(i int) error) (time.Duration, error) {
	var wg sync.WaitGroup
	errs := make([]error, n)
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	d := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return d, err
		}
	}
	return d, nil
}

// fileAppends appends k lines of size bytes to file i of files, each
// written and synced as the log's append syncs (durable.DataSync): the
// same disk work without the store.
func fileAppends(files []*os.File, i, k, size int) error {
	line := make([]byte, size)
	for j := range line {
		line[j] = 'x'
	}
	line[size-1] = '\n'
	for range k {
		if _, err := files[i].Write(line); err != nil {
			return err
		}
		if err := durable.DataSync(files[i]); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkConcurrentAppend: n conversations recording at once, one typed
// call (one event, one durable append) at a time each, against n
// independent files appended to and synced the same number of times in
// the same run. x-of-files is the store's appends per second over the
// files'; 1 would be appends costing no more than their disk work.
// batch=8 records eight calls per durable append (Session.Batch): its
// events-per-second over the files' appends per second.
func BenchmarkConcurrentAppend(b *testing.B) {
	for _, batch := range []int{1, 8} {
		for _, n := range []int{1, 2, 4, 8} {
			name := fmt.Sprint(n)
			if batch > 1 {
				name = fmt.Sprintf("%d/batch=%d", n, batch)
			}
			b.Run(name, func(b *testing.B) { benchAppend(b, n, batch) })
		}
	}
}

func benchAppend(b *testing.B, n, batch int) {
	dir := b.TempDir()
	_, ses := appendSessions(b, filepath.Join(dir, "store"), n, convlog.Plain)
	var files []*os.File
	for i := range n {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("file%d", i)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	// The size of a step/start or step/end line.
	const lineSize = 80
	// The store's appends and the files' alternate in rounds, so that both
	// meet the same load of a shared machine.
	const round = 50
	var storeTime, fileTime time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		k := min(round, b.N-done)
		d, err := parallel(n, func(i int) error {
			if batch == 1 {
				return stepCalls(ses[i], k)
			}
			for range k {
				if err := ses[i].Batch(func() error { return stepCalls(ses[i], batch) }); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		storeTime += d
		d, err = parallel(n, func(i int) error { return fileAppends(files, i, k, lineSize) })
		if err != nil {
			b.Fatal(err)
		}
		fileTime += d
	}
	b.StopTimer()
	events := float64(n * b.N * batch)
	storeRate := events / storeTime.Seconds()
	fileRate := float64(n*b.N) / fileTime.Seconds()
	b.ReportMetric(storeRate, "events/s")
	b.ReportMetric(fileRate, "file-appends/s")
	b.ReportMetric(storeRate/fileRate, "x-of-files")
}
