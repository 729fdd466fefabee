package backup

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/gofrs/flock"

	"github.com/convkit/convkit/archive"
	"github.com/convkit/convkit/fixtures"
)

// TestRestoreRemovesKilledStaging: what a killed restore left beside its
// target (a staging directory and its free lock file, or a lock file
// alone) is removed by the next restore into that target; a live
// restore's staging directory, and one whose lock file is missing and that
// is not yet old, are left alone. A killed single-conversation restore's
// staging directory inside the store is removed under runtime.lock.
func TestRestoreRemovesKilledStaging(t *testing.T) {
	dataDir, rep := generate(t, 17, 20, false)
	a, _ := backupFile(t, dataDir, Options{})
	target := filepath.Join(t.TempDir(), "store")
	stage := func() string {
		p, err := archive.NewStagingDir(target, stagingTag)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "MANIFEST.json"), []byte("{}"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	killed := stage()
	if err := os.WriteFile(killed+stagingLockExt, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(filepath.Dir(target), "."+filepath.Base(target)+".restore-0123456789ab.tmp"+stagingLockExt)
	if err := os.WriteFile(orphan, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	live := stage()
	held := flock.New(live + stagingLockExt)
	if ok, err := held.TryLock(); err != nil || !ok {
		t.Fatalf("lock: %v", err)
	}
	defer held.Close()
	young := stage() // its restore has not locked it yet

	if _, err := restoreFile(t, a, RestoreOptions{Target: target}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{killed, killed + stagingLockExt, orphan} {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s was left: %v", filepath.Base(p), err)
		}
	}
	for _, p := range []string{live, live + stagingLockExt, young} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(p), err)
		}
	}
	ents, _ := os.ReadDir(filepath.Dir(target))
	if len(ents) != 4 { // the store, live and its lock, young
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
	fork := rep.Find(fixtures.CaseForkAfterCompaction)
	if _, err := restoreFile(t, a, RestoreOptions{Target: target, Conversation: fork.ID, Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(inside); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s was left: %v", inside, err)
	}
}
