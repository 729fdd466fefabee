package migrate

import (
	"bufio"
	"context"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/internal/dshroot"
	"github.com/convkit/convkit/store"
)

// TestMain lets the test binary act as a migrating process that the crash
// test kills.
func TestMain(m *testing.M) {
	if dir := os.Getenv("CONVKIT_TEST_HOLD_SESSION"); dir != "" {
		holdSession(dir)
	}
	if root := os.Getenv("CONVKIT_TEST_MIGRATE_SESSIONS"); root != "" {
		os.Stdout.WriteString("started\n")
		r, err := dshroot.Open(root)
		if err == nil {
			_, err = RunSessions(context.Background(), r, Options{Jobs: 2, ReportDir: os.Getenv("CONVKIT_TEST_TMP")})
		}
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	if root := os.Getenv("CONVKIT_TEST_MIGRATE"); root != "" {
		os.Stdout.WriteString("started\n")
		s, err := openRoot(root, false)
		if err == nil {
			_, err = Run(context.Background(), s, Options{Jobs: 2, ReportDir: os.Getenv("CONVKIT_TEST_TMP")})
		}
		if err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// strictRead reads a log to its end and reports any error or torn tail.
func strictRead(path string) error {
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		return err
	}
	defer r.Close()
	for _, err := range r.Events() {
		if err != nil {
			return err
		}
	}
	if r.Stats().TornTail {
		return os.ErrInvalid
	}
	return nil
}

// TestSIGKILLDuringMigrate kills a real migrating process at random
// moments. After every kill the originals are byte-identical and every
// published successor is complete; a final run finishes the job with the
// same successors as an uninterrupted run.
func TestSIGKILLDuringMigrate(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	gen := filepath.Join(t.TempDir(), "gen")
	if _, err := fixtures.Generate(gen, fixtures.Options{Seed: 21, Conversations: 40, Large: true}); err != nil {
		t.Fatal(err)
	}
	// The uninterrupted reference run, on a copy.
	ref := filepath.Join(t.TempDir(), "ref")
	copyTree(t, gen, ref)
	run(t, store.ConversationsDir(ref), Options{Jobs: 2})
	want := hashTree(t, store.ConversationsDir(ref))

	dir := filepath.Join(t.TempDir(), "data")
	copyTree(t, gen, dir)
	root := store.ConversationsDir(dir)
	originals := hashTree(t, root)
	rng := rand.New(rand.NewSource(3))
	kills := 0
	runs := 25
	if n, err := strconv.Atoi(os.Getenv("CONVKIT_CRASH_KILLS")); err == nil && n > 0 {
		runs = n
	}
	for i := 0; i < runs; i++ {
		cmd := exec.Command(os.Args[0], "-test.run", "^$")
		cmd.Env = append(os.Environ(), "CONVKIT_TEST_MIGRATE="+root, "CONVKIT_TEST_TMP="+t.TempDir())
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		bufio.NewReader(out).ReadString('\n')
		time.Sleep(time.Duration(rng.Intn(60)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		if err := cmd.Wait(); err != nil && strings.Contains(err.Error(), "killed") {
			kills++
		}
		now := hashTree(t, root)
		for p, h := range originals {
			if now[p] != h {
				t.Fatalf("kill %d: original %s changed", i, p)
			}
		}
		for p := range now {
			if _, orig := originals[p]; orig {
				continue
			}
			if strings.HasSuffix(p, ".tmp") {
				continue // never published; removed by the next run
			}
			if err := strictRead(filepath.Join(root, p)); err != nil {
				t.Fatalf("kill %d: published successor %s is not complete: %v", i, p, err)
			}
		}
	}
	if kills == 0 {
		t.Fatal("no run was killed mid-way; the test proves nothing")
	}
	sum, out := run(t, root, Options{Jobs: 2})
	if sum.Totals.Failed != 1 { // the generated corrupt log
		t.Fatalf("final run: %+v\n%s", sum.Totals, out)
	}
	got := hashTree(t, root)
	for p, h := range want {
		if got[p] != h {
			t.Errorf("after the kills and a rerun, %s differs from an uninterrupted run", p)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("after the rerun, an extra file remains: %s", p)
		}
	}
	t.Logf("%d of %d runs killed mid-way", kills, runs)
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", src, dst).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
}
