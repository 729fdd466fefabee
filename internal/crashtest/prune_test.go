//go:build unix

package crashtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/internal/dshroot"
	"github.com/convkit/convkit/store"
)

// prune: the store gen, migrated, killed while its older generations are
// removed. After every kill each older generation is whole or gone, every
// other file byte-identical and every current log readable; compared is
// the tree after the rerun.
func pruneJob(h *harness, in *inputs) *job {
	return &job{name: "prune", prepare: func(t *testing.T, dir string) *trial {
		data := filepath.Join(dir, "data")
		copyTree(t, in.migrated, data)
		root := store.ConversationsDir(data)
		orig := hashTree(t, root, nil)
		older, current := generations(t, data)
		if len(older) == 0 {
			t.Fatal("the migrated store has no older generation")
		}
		return &trial{
			args:    []string{"--data-dir", data, "-q", "prune"},
			dataDir: data,
			scan:    []string{data},
			intact: func(t *testing.T, at string) {
				sameFiles(t, at, root, orig, func(rel string) bool { return older[rel] })
			},
			published: func(t *testing.T, at string, _ map[string]string) {
				for _, p := range current {
					readsToEnd(t, at, p)
				}
			},
			result: func(t *testing.T) map[string]string { return digestTree(t, root, rawDigest) },
		}
	}}
}

// generations lists the store's older generations (by path under its
// conversations directory) and its current logs.
func generations(t *testing.T, data string) (older map[string]bool, current []string) {
	t.Helper()
	s := reader(t, data)
	defer s.Close()
	tree, err := s.Walk()
	if err != nil {
		t.Fatal(err)
	}
	older = map[string]bool{}
	for _, c := range tree.Conversations {
		for _, l := range c.Logs {
			current = append(current, l.Path)
			for _, g := range l.Generations[1:] {
				if g.Version < l.Current.Version {
					older[filepath.ToSlash(filepath.Join(c.Name, g.String()))] = true
				}
			}
		}
	}
	return older, current
}

// readsToEnd fails unless the log at path reads to its end (a torn tail
// the store had is no error).
func readsToEnd(t *testing.T, at, path string) {
	t.Helper()
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err == nil {
		for _, err = range r.Events() {
			// err is what ended the read: nil at the end.
		}
		r.Close()
	}
	if err != nil {
		t.Fatalf("%s: %s does not read: %v", at, path, err)
	}
}

// TestSIGKILLPruneSessionsRoot kills convkit prune on a migrated sessions
// root in the runtime's layout (session.lock per session) at random
// moments: after every kill each older generation is whole or gone, every
// other file byte-identical, every session's current generation reads;
// the rerun exits 0 and leaves the uninterrupted run's files.
func TestSIGKILLPruneSessionsRoot(t *testing.T) {
	kills, seed := killPlan(t, "")
	h := &harness{env: childEnv(t.TempDir())}
	gen := filepath.Join(t.TempDir(), "gen")
	if _, err := fixtures.GenerateSessions(context.Background(), gen, fixtures.SessionsOptions{Seed: 43, Sessions: 60,
		Compression: convlog.Zstd, OrdinaryOnly: true}); err != nil {
		t.Fatal(err)
	}
	h.must(t, 0, "-q", "migrate", "--sessions-dir", gen, "--jobs", "2")
	orig := hashTree(t, gen, nil)
	r, err := dshroot.Open(gen)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := r.Walk()
	if err != nil {
		t.Fatal(err)
	}
	older := map[string]bool{}
	var current []string
	for _, e := range tree.Entries {
		if s := e.Session; s != nil && s.Path() != "" {
			current = append(current, s.Path())
			for _, g := range s.Generations[1:] {
				rel, _ := filepath.Rel(gen, filepath.Join(s.Dir, g.File))
				older[filepath.ToSlash(rel)] = true
			}
		}
	}
	if len(older) == 0 {
		t.Fatal("the migrated root has no older generation")
	}
	args := func(root string) []string { return []string{"-q", "prune", "--sessions-dir", root} }
	ref := filepath.Join(t.TempDir(), "ref")
	copyTree(t, gen, ref)
	took := h.must(t, 0, args(ref)...).took
	want := digestTree(t, ref, rawDigest)

	rng := rand.New(rand.NewPCG(seed, 7))
	mid, partial := 0, 0
	for k := range kills {
		root := filepath.Join(t.TempDir(), fmt.Sprintf("kill%d", k))
		copyTree(t, gen, root)
		delay := time.Duration(rng.Int64N(int64(took) + 1))
		at := fmt.Sprintf("kill %d at %s", k, delay.Round(time.Microsecond))
		if killed, _ := h.kill(t, delay, args(root)...); killed {
			mid++
		} else {
			at += " (after the exit)"
		}
		check := func(at string) {
			sameFiles(t, at, root, orig, func(rel string) bool { return older[rel] })
			for _, p := range current {
				rel, _ := filepath.Rel(gen, p)
				readsToEnd(t, at, filepath.Join(root, rel))
			}
		}
		check(at)
		gone := 0
		for rel := range older {
			if _, err := os.Lstat(filepath.Join(root, rel)); err != nil {
				gone++
			}
		}
		if gone > 0 && gone < len(older) {
			partial++
		}
		at += ", rerun"
		if o := h.run(t, args(root)...); o.code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", at, o.code, o.stdout, o.stderr)
		}
		check(at)
		compare(t, at, want, digestTree(t, root, rawDigest), nil)
		os.RemoveAll(root)
	}
	t.Logf("%d of %d kills landed mid-way, %d of them between two removals (uninterrupted run: %s, %d older generations)",
		mid, kills, partial, took.Round(time.Millisecond), len(older))
}
