package reindex

import (
	"bufio"
	"context"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/store"
)

// TestMain lets the test binary act as a reindexing process that the crash
// test kills.
func TestMain(m *testing.M) {
	if dir := os.Getenv("CONVKIT_TEST_REINDEX"); dir != "" {
		s, err := store.Open(context.Background(), dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
		if err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString("started\n")
		if _, err := Run(context.Background(), s, Options{Jobs: 2, Incremental: os.Getenv("CONVKIT_TEST_INCREMENTAL") != ""}); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSIGKILLDuringReindex kills a real reindexing process at random moments:
// the old index stays usable, and a rerun succeeds with no drift.
func TestSIGKILLDuringReindex(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := fixtures.Generate(dir, fixtures.Options{Seed: 9, Conversations: 60}); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	first, err := Run(ctx, s, Options{})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	kills := 0
	runs := crashRuns(12)
	for i := 0; i < runs; i++ {
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), "CONVKIT_TEST_REINDEX="+dir)
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		bufio.NewReader(out).ReadString('\n')
		time.Sleep(time.Duration(rng.Intn(150)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		if err := cmd.Wait(); err != nil {
			kills++
		}
		// Whatever the moment, metadata.db is a complete index.
		db, err := index.Open(filepath.Join(dir, store.IndexFileName))
		if err != nil {
			t.Fatalf("after kill %d: %v", i, err)
		}
		rows, err := db.List(ctx, index.ListOptions{All: true})
		db.Close()
		if err != nil || len(rows) != first.Indexed {
			t.Fatalf("after kill %d: %d rows, %v; want %d", i, len(rows), err, first.Indexed)
		}
	}
	if kills == 0 {
		t.Fatal("no reindex was killed mid-run; the test proves nothing")
	}
	s, err = store.Open(ctx, dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	again, err := Run(ctx, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if again.Indexed != first.Indexed {
		t.Fatalf("rerun indexed %d, first run %d", again.Indexed, first.Indexed)
	}
	if chk, _ := Check(ctx, reader(t, dir), Options{}); chk.Drift() {
		t.Fatalf("drift after rerun: %+v", chk.Differences)
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp") {
			t.Errorf("temporary file left after the rerun: %s", e.Name())
		}
	}
	t.Logf("%d of %d reindex runs were killed mid-run", kills, runs)
}

// TestSIGKILLDuringIncremental kills real incremental reindexing
// processes, each after changes to a third of the conversations: the
// index stays usable, its rows are those of a run or of the one before,
// and a rerun leaves what a rebuild writes.
func TestSIGKILLDuringIncremental(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := fixtures.Generate(dir, fixtures.Options{Seed: 11, Conversations: 60, OrdinaryOnly: true}); err != nil {
		t.Fatal(err)
	}
	exclusive := func() *store.Store {
		s, err := store.Open(ctx, dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := exclusive()
	first, err := Run(ctx, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := s.Walk()
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(2))
	kills := 0
	for i := 0; i < crashRuns(12); i++ {
		s := exclusive()
		titles := map[string]string{}
		for _, k := range rng.Perm(len(tree.Conversations))[:len(tree.Conversations)/3] {
			id := tree.Conversations[k].ID
			titles[id] = "round " + strconv.Itoa(i)
			if err := s.Rename(id, titles[id]); err != nil {
				t.Fatal(err)
			}
		}
		s.Close()
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), "CONVKIT_TEST_REINDEX="+dir, "CONVKIT_TEST_INCREMENTAL=1")
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		bufio.NewReader(out).ReadString('\n')
		time.Sleep(time.Duration(rng.Intn(120)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		killed := cmd.Wait() != nil
		db, err := index.Open(filepath.Join(dir, store.IndexFileName))
		if err != nil {
			t.Fatalf("after kill %d: %v", i, err)
		}
		rows, err := db.List(ctx, index.ListOptions{All: true})
		db.Close()
		if err != nil || len(rows) != first.Indexed {
			t.Fatalf("after kill %d: %d rows, %v; want %d", i, len(rows), err, first.Indexed)
		}
		// One transaction: all of this round's titles, or none.
		renamed := 0
		for _, r := range rows {
			if titles[r.ID] != "" && r.Title == titles[r.ID] {
				renamed++
			}
		}
		if renamed != 0 && renamed != len(titles) {
			t.Fatalf("after kill %d: %d of the %d renames indexed", i, renamed, len(titles))
		}
		if killed && renamed == 0 {
			kills++
		}
	}
	if kills == 0 {
		t.Fatal("no incremental run was killed mid-run; the test proves nothing")
	}
	s = exclusive()
	defer s.Close()
	if _, err := Run(ctx, s, Options{Incremental: true}); err != nil {
		t.Fatal(err)
	}
	if chk, err := Check(ctx, s, Options{}); err != nil || chk.Drift() {
		t.Fatalf("drift after the rerun: %v %+v", err, chk)
	}
	t.Logf("%d incremental runs killed before they committed", kills)
}

// crashRuns is how many processes a crash test kills: def in CI, more with
// CONVKIT_CRASH_KILLS=N for a longer run on a developer machine.
func crashRuns(def int) int {
	if n, err := strconv.Atoi(os.Getenv("CONVKIT_CRASH_KILLS")); err == nil && n > 0 {
		return n
	}
	return def
}

// TestIncrementalEqualsRebuild: Update applied conversation by conversation
// gives the same rows as a full reindex.
func TestIncrementalEqualsRebuild(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := fixtures.Generate(dir, fixtures.Options{Seed: 4, Conversations: 25}); err != nil {
		t.Fatal(err)
	}
	// The incremental index first: the full run finishes deletions.
	p := filepath.Join(t.TempDir(), "inc.db")
	inc, err := index.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	inc.Finish()
	inc, err = index.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer inc.Close()
	tree, _ := reader(t, dir).Walk()
	for _, c := range tree.Conversations {
		if _, err := Update(ctx, inc, reader(t, dir), c.ID, UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s, err := store.Open(ctx, dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := Run(ctx, s, Options{}); err != nil {
		t.Fatal(err)
	}
	full, err := index.Open(filepath.Join(dir, store.IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer full.Close()
	a, _ := inc.All(ctx)
	b, _ := full.All(ctx)
	if len(a) == 0 || !reflect.DeepEqual(a, b) {
		t.Fatalf("incremental index (%d rows) differs from the rebuild (%d rows)", len(a), len(b))
	}
	ha, _ := inc.Search(ctx, "retry", 1000)
	hb, _ := full.Search(ctx, "retry", 1000)
	if len(ha) != len(hb) {
		t.Fatalf("search: incremental %d hits, rebuild %d", len(ha), len(hb))
	}
}
