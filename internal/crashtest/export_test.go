//go:build unix

package crashtest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/convkit/convkit/fixtures"
)

// TestSIGKILLExport kills `export --to FILE` at random moments, and once
// as soon as its temporary file exists, and checks after every kill:
//
//  1. the store is byte-identical (export takes no lock and writes
//     nothing there);
//  2. FILE, if the kill came after it was published, is the complete
//     archive: its manifest is the uninterrupted run's (createdAt aside);
//  3. the next export to FILE leaves no temporary file beside it: it
//     removes the one the killed export left (its writer's flock died
//     with it), then exits as the uninterrupted run did and publishes the
//     same archive, or, when FILE was published already, refuses to
//     overwrite it (exit 1).
func TestSIGKILLExport(t *testing.T) {
	kills, seed := killPlan(t, "")
	rng := rand.New(rand.NewPCG(seed, 7))
	h := &harness{env: childEnv(t.TempDir())}
	base := t.TempDir()
	data := filepath.Join(base, "data")
	rep, err := fixtures.Generate(data, fixtures.Options{Seed: 33, Conversations: 40, Large: true})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range rep.Conversations {
		if !c.Deleting && !c.Has(fixtures.CaseCorrupt) {
			ids = append(ids, c.ID)
		}
	}
	orig := hashTree(t, data, isLockFile)
	args := func(file string) []string {
		return append([]string{"--data-dir", data, "-q", "export", "--to", file}, ids...)
	}
	intact := func(at string) {
		t.Helper()
		sameFiles(t, at, data, orig, nil)
		if got := hashTree(t, data, isLockFile); len(got) != len(orig) {
			t.Fatalf("%s: export wrote into the store", at)
		}
	}

	ref := filepath.Join(base, "ref", "out.tar.zst")
	if err := os.MkdirAll(filepath.Dir(ref), 0o700); err != nil {
		t.Fatal(err)
	}
	o := h.run(t, args(ref)...)
	refCode, took := o.code, o.took
	if refCode != 0 {
		t.Fatalf("the uninterrupted export exits %d\n%s", refCode, o.stderr)
	}
	want := withoutKeys(t, manifestOf(t, ref), "createdAt")
	intact("uninterrupted run")

	mid, published := 0, 0
	for k := range kills + 1 {
		dir := filepath.Join(base, fmt.Sprintf("kill%d", k))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(dir, "out.tar.zst")
		var at string
		var killed bool
		if k == kills {
			at = fmt.Sprintf("kill %d once the temporary file exists", k)
			killed = h.killWhen(t, func() bool { return len(temps(t, dir)) > 0 }, args(file)...)
			if left := temps(t, dir); len(left) == 0 && killed {
				t.Fatalf("%s: the kill left no temporary file to remove", at)
			}
		} else {
			delay := time.Duration(rng.Int64N(int64(took) + 1))
			at = fmt.Sprintf("kill %d at %s", k, delay.Round(time.Microsecond))
			killed, _ = h.kill(t, delay, args(file)...)
		}
		if killed {
			mid++
		} else {
			at += " (after the exit)"
		}
		intact(at)
		existed := false
		if _, err := os.Lstat(file); err == nil {
			existed = true
			published++
			if got := withoutKeys(t, manifestOf(t, file), "createdAt"); got != want {
				t.Fatalf("%s: the published archive's manifest is not the uninterrupted run's", at)
			}
		}

		at += ", rerun"
		o := h.run(t, args(file)...)
		switch {
		case existed && (o.code != 1 || !strings.Contains(o.stderr, "export never overwrites a file")):
			t.Fatalf("%s: exit %d over the published archive, want 1 (never overwritten)\n%s", at, o.code, o.stderr)
		case !existed && o.code != refCode:
			t.Fatalf("%s: exit %d, the uninterrupted run exits %d\n%s", at, o.code, refCode, o.stderr)
		}
		if left := temps(t, dir); len(left) > 0 {
			t.Fatalf("%s: temporary files remain: %v", at, left)
		}
		if got := withoutKeys(t, manifestOf(t, file), "createdAt"); got != want {
			t.Fatalf("%s: the archive's manifest is not the uninterrupted run's", at)
		}
		intact(at)
		os.RemoveAll(dir)
	}
	t.Logf("%d of %d kills landed mid-way, %d after the archive was published (uninterrupted run: %s)",
		mid, kills+1, published, took.Round(time.Millisecond))
}

// killWhen starts convkit, sends it SIGKILL as soon as ready reports true
// (polled every millisecond) and reports whether the signal ended it.
func (h *harness) killWhen(t *testing.T, ready func() bool, args ...string) bool {
	t.Helper()
	cmd, _, _ := h.command(args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	for {
		select {
		case <-done:
			return false
		default:
		}
		if ready() {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	<-done
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}
