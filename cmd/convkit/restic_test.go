package main

import (
	"context"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/store"
)

// dirBytes is the sum of the sizes of the regular files under dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestResticDeduplicates runs scripts/restic-backup.sh against a real
// restic on a migrated store of 500 conversations (a 73 MB archive: restic
// cuts chunks of 512 KiB to 8 MiB, so what one change costs is a fixed
// amount, and the store is large enough that two chunks stay under 5 %):
// a second snapshot of the unchanged store adds at most 1 % of what the
// first one added to the repository, and after 1 % of the conversations
// gained a turn (the second time: the conversations active in one hour
// are mostly those active in the hour before) at most 5 % (1.3 % with
// the committed chunker parameters; 1.4–10.3 % seen in repositories with
// chunkers drawn at random; 84 % without the rsyncable layout).
func TestResticDeduplicates(t *testing.T) {
	if testing.Short() {
		t.Skip("a store of 73 MB and four restic snapshots: not with -short")
	}
	for _, tool := range []string{"restic", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool + " is not installed (.ci/run installs it)")
		}
	}
	work := t.TempDir()
	data, repo := filepath.Join(work, "data"), filepath.Join(work, "repo")
	if _, err := fixtures.Generate(data, fixtures.Options{Seed: 11, Conversations: 500, OrdinaryOnly: true,
		Compression: convlog.Zstd, Sizes: &fixtures.SizeMix{Median: 256 << 10, Max: 16 << 20, Sigma: 1.5}}); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "CONVKIT_DATA_DIR="+data, "RESTIC_REPOSITORY="+repo, "RESTIC_PASSWORD=convkit-test", "RESTIC_FROM_PASSWORD=convkit-test",
		"RESTIC_CACHE_DIR="+filepath.Join(work, "cache"), "KEEP_LAST=10", "CONVKIT=convkit")
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	// A store after its one-time migration: every log version 4, so a
	// turn appends to a log instead of publishing its successor.
	run("convkit", "-q", "migrate", "--prune")
	run("convkit", "-q", "reindex")
	// The repository takes its chunker parameters from a committed one
	// (testdata/restic-chunker, the same password), so every run chunks the
	// same archive the same way: restic otherwise draws them at random, and
	// an unlucky draw stores a few more chunks of up to 8 MiB.
	template := filepath.Join(work, "template")
	if err := os.CopyFS(template, os.DirFS(filepath.Join("testdata", "restic-chunker"))); err != nil {
		t.Fatal(err)
	}
	run("restic", "init", "--quiet", "--from-repo", template, "--copy-chunker-params")
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "restic-backup.sh"))
	if err != nil {
		t.Fatal(err)
	}
	empty := dirBytes(t, repo)
	run("bash", script)
	first := dirBytes(t, repo) - empty
	before := dirBytes(t, repo)
	run("bash", script)
	again := dirBytes(t, repo) - before
	t.Logf("first snapshot: %d bytes; unchanged: %d bytes (%.2f%%)", first, again, 100*float64(again)/float64(first))
	if float64(again) > 0.01*float64(first) {
		t.Errorf("a snapshot of the unchanged store added %d bytes, %.2f%% of the first's %d (at most 1%%)", again, 100*float64(again)/float64(first), first)
	}

	// 1 % of the conversations gain a turn, twice: picked at random the
	// first time, then the same ones again, as the conversations active in
	// one hour are mostly those active the hour before. The runtime
	// updates the index as it goes: here an incremental reindex does.
	s, err := store.Open(context.Background(), data, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	tree, err := s.Walk()
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(tree.Conversations))
	for i, c := range tree.Conversations {
		ids[i] = c.ID
	}
	rng := rand.New(rand.NewPCG(3, 5))
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	k := max(1, len(ids)/100)
	var active []string
	turn := func(round int) int64 {
		t.Helper()
		s, err := store.Open(context.Background(), data, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
		if err != nil {
			t.Fatal(err)
		}
		if active == nil {
			for _, id := range ids {
				if len(active) < k && fixtures.AppendTurn(s, id, round) == nil {
					active = append(active, id)
				}
			}
		} else {
			for _, id := range active {
				if err := fixtures.AppendTurn(s, id, round); err != nil {
					t.Fatal(err)
				}
			}
		}
		s.Close()
		run("convkit", "-q", "reindex", "--incremental")
		before := dirBytes(t, repo)
		run("bash", script)
		return dirBytes(t, repo) - before
	}
	random := turn(1)
	t.Logf("after %d of %d conversations picked at random gained a turn: %d bytes (%.2f%%)", k, len(ids), random, 100*float64(random)/float64(first))
	grown := turn(2)
	t.Logf("after the same %d gained another turn: %d bytes (%.2f%%)", k, grown, 100*float64(grown)/float64(first))
	if float64(grown) > 0.05*float64(first) {
		t.Errorf("after %d of %d conversations gained a turn, the snapshot added %d bytes, %.2f%% of the first's %d (at most 5%%)",
			k, len(ids), grown, 100*float64(grown)/float64(first), first)
	}
}
