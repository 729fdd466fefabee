package backup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gofrs/flock"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/internal/archive"
)

// TestRestoreRemovesKilledStaging: what a killed restore left beside its
// target (a staging directory and its free lock file beside it, named as
// this build or an earlier one names it, or such a lock file alone) is
// removed by the next restore into that target; a live restore's staging
// directory, and one whose lock file is missing and that is not yet old,
// are left alone. A killed single-conversation restore's staging
// directory inside the store is removed under runtime.lock, a live one's
// is not.
func TestRestoreRemovesKilledStaging(t *testing.T) {
	dataDir, rep := generate(t, 17, 20, false)
	a, _ := backupFile(t, dataDir, Options{})
	target := filepath.Join(t.TempDir(), "store")
	parent := filepath.Dir(target)
	n := 0
	stage := func() string { // a staging directory as an earlier build made it
		n++
		p := filepath.Join(parent, fmt.Sprintf(".%s.restore-%012x.tmp", filepath.Base(target), n))
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "MANIFEST.json"), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const lockExt = ".lock"
	killed := stage()
	if err := os.WriteFile(killed+lockExt, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(parent, "."+filepath.Base(target)+".restore-0123456789ab.tmp"+lockExt)
	if err := os.WriteFile(orphan, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	live := stage()
	held := flock.New(live + lockExt)
	if ok, err := held.TryLock(); err != nil || !ok {
		t.Fatalf("lock: %v", err)
	}
	defer held.Close()
	young := stage() // its restore has not locked it yet
	// This build's: the lock file beside, <staging>.lock.tmp.
	killedNow := stage()
	if err := os.WriteFile(strings.TrimSuffix(killedNow, ".tmp")+".lock.tmp", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	liveNow, err := archive.NewStaging(parent, "."+filepath.Base(target)+".restore")
	if err != nil {
		t.Fatal(err)
	}
	defer liveNow.Remove()

	if _, err := restoreFile(t, a, RestoreOptions{Target: target}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{killed, killed + lockExt, orphan, killedNow, strings.TrimSuffix(killedNow, ".tmp") + ".lock.tmp"} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was left: %v", filepath.Base(p), err)
		}
	}
	for _, p := range []string{live, live + lockExt, young, liveNow.Dir(), liveNow.Tree()} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(p), err)
		}
	}
	ents, _ := os.ReadDir(parent)
	if len(ents) != 6 { // the store, live and its lock, young, liveNow and its lock
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("beside the target: %v", names)
	}

	inside := filepath.Join(target, ".restore-123.tmp")
	if err := os.MkdirAll(filepath.Join(inside, "conversations"), 0o700); err != nil {
		t.Fatal(err)
	}
	liveInside, err := archive.NewStaging(target, ".restore")
	if err != nil {
		t.Fatal(err)
	}
	defer liveInside.Remove()
	fork := rep.Find(fixtures.CaseForkAfterCompaction)
	if _, err := restoreFile(t, a, RestoreOptions{Target: target, Conversation: fork.ID, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(inside); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s was left: %v", inside, err)
	}
	if _, err := os.Lstat(liveInside.Tree()); err != nil {
		t.Errorf("a live staging directory inside the store was removed: %v", err)
	}
	var left []string
	ents, _ = os.ReadDir(target)
	for _, e := range ents {
		live := strings.TrimSuffix(filepath.Base(liveInside.Dir()), ".tmp")
		if strings.HasPrefix(e.Name(), ".restore-") && !strings.HasPrefix(e.Name(), live+".") {
			left = append(left, e.Name())
		}
	}
	if len(left) > 0 {
		t.Errorf("staging left in the store: %v", left)
	}
}

// TestRefusedRestoreRemovesKilledStaging: a restore killed after renaming
// its tree into the target leaves its staging directory and lock file
// beside it; the rerun is refused (the target is full) and removes them.
func TestRefusedRestoreRemovesKilledStaging(t *testing.T) {
	dataDir, _ := generate(t, 5, 3, false)
	a, _ := backupFile(t, dataDir, Options{})
	target := filepath.Join(t.TempDir(), "store")
	if _, err := restoreFile(t, a, RestoreOptions{Target: target}); err != nil {
		t.Fatal(err)
	}
	left := filepath.Join(filepath.Dir(target), "."+filepath.Base(target)+".restore-00000000002a.tmp")
	lock := strings.TrimSuffix(left, ".tmp") + ".lock.tmp"
	if err := os.Mkdir(left, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(lock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := restoreFile(t, a, RestoreOptions{Target: target}); !errors.Is(err, ErrTargetNotEmpty) {
		t.Fatalf("rerun into the restored target: %v", err)
	}
	for _, p := range []string{left, lock} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was left: %v", filepath.Base(p), err)
		}
	}
}
