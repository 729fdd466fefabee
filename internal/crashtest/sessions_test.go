//go:build unix

package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/internal/dshroot"
)

// TestSIGKILLSessionsRoot kills convkit migrate on a sessions root in the
// runtime's layout (session.lock per session, no runtime.lock) at random
// moments and checks, after every kill and after the rerun that follows:
// the originals are byte-identical; every file under a generation name is
// complete (no half-published successor); the rerun exits 0, leaves no
// temporary file and gives the uninterrupted run's files, byte for byte
// once decompressed (session.lock files included: each converted session
// has one, empty).
func TestSIGKILLSessionsRoot(t *testing.T) {
	kills, seed := killPlan(t, "per compression")
	h := &harness{env: childEnv(t.TempDir())}
	for i, comp := range []convlog.Compression{convlog.Zstd, convlog.Plain} {
		t.Run(comp.String(), func(t *testing.T) {
			gen := filepath.Join(t.TempDir(), "gen")
			if _, err := fixtures.GenerateSessions(context.Background(), gen, fixtures.SessionsOptions{Seed: 41 + int64(i), Sessions: 60,
				Compression: comp, OrdinaryOnly: true, Large: true}); err != nil {
				t.Fatal(err)
			}
			orig := hashTree(t, gen, nil)
			args := func(root string) []string { return []string{"-q", "migrate", "--sessions-dir", root, "--jobs", "2"} }

			ref := filepath.Join(t.TempDir(), "ref")
			copyTree(t, gen, ref)
			o := h.must(t, 0, args(ref)...)
			took := o.took
			want := digestTree(t, ref, plainDigest)
			if left := temps(t, ref); len(left) > 0 {
				t.Fatalf("the uninterrupted run left temporary files: %v", left)
			}
			successors := 0
			for rel := range want {
				if strings.HasSuffix(rel, "/"+dshroot.LockFileName) {
					successors++
				}
			}
			if successors == 0 {
				t.Fatal("the uninterrupted run converted nothing")
			}

			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			mid, left := 0, 0
			for k := range kills {
				root := filepath.Join(t.TempDir(), fmt.Sprintf("kill%d", k))
				copyTree(t, gen, root)
				delay := time.Duration(rng.Int64N(int64(took) + 1))
				at := fmt.Sprintf("kill %d at %s", k, delay.Round(time.Microsecond))
				if killed, ran := h.kill(t, delay, args(root)...); killed {
					mid++
				} else {
					at += " (after the exit)"
					// The uninterrupted run was slow (the machine loaded):
					// later kills are drawn from this run's length.
					took = min(took, ran)
				}
				check := func(at string) {
					sameFiles(t, at, root, orig, nil)
					for rel := range hashTree(t, root, nil) {
						if _, ok := orig[rel]; ok {
							continue
						}
						if _, gen := dshroot.ParseGeneration(filepath.Base(rel)); gen {
							mustRead(t, at, filepath.Join(root, rel))
						}
					}
				}
				check(at)
				left += len(temps(t, root))
				at += ", rerun"
				if o := h.run(t, args(root)...); o.code != 0 {
					t.Fatalf("%s: exit %d\n%s%s", at, o.code, o.stdout, o.stderr)
				}
				check(at)
				if left := temps(t, root); len(left) > 0 {
					t.Fatalf("%s: temporary files remain: %v", at, left)
				}
				compare(t, at, want, digestTree(t, root, plainDigest), nil)
				os.RemoveAll(root)
			}
			t.Logf("%s: %d of %d kills landed mid-way, leaving %d temporary files for the reruns (uninterrupted run: %s, %d sessions converted)",
				comp, mid, kills, left, took.Round(time.Millisecond), successors)
			if kills >= 4 && mid == 0 {
				t.Fatal("no kill landed while migrate ran: the test proves nothing")
			}
		})
	}
}
