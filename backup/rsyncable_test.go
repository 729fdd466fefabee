package backup

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/store"
)

// TestRsyncableBackup: two rsyncable backups of an unchanged store, taken at
// different times, are the same bytes; the archive verifies and restores;
// every log's entry carries the log's own modification time, the manifest's
// createdAt is the newest of them, and the conversations come oldest first,
// so that one that changes moves to the end. Without the index, the
// manifest says it was left out and a restore builds one.
func TestRsyncableBackup(t *testing.T) {
	dataDir, _ := generate(t, 21, 12, false)
	withIndex(t, dataDir)
	// Conversation directories' logs, aged one hour apart in reverse name
	// order: the age order is not the name order.
	convs, err := os.ReadDir(filepath.Join(dataDir, store.ConversationsDirName))
	if err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	var names []string
	for i, c := range convs {
		names = append(names, c.Name())
		dir := filepath.Join(dataDir, store.ConversationsDirName, c.Name())
		logs, _ := os.ReadDir(dir)
		for _, l := range logs {
			mt := base.Add(time.Duration(len(convs)-i) * time.Hour)
			if err := os.Chtimes(filepath.Join(dir, l.Name()), mt, mt); err != nil {
				t.Fatal(err)
			}
		}
	}
	index := base.Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(dataDir, store.IndexFileName), index, index); err != nil {
		t.Fatal(err)
	}
	at := func(h int) Options {
		return Options{Now: fixedClock(time.Date(2026, 9, 2, h, 0, 0, 0, time.UTC)), ToolVersion: "test", Rsyncable: true}
	}
	a1, r1 := backupFile(t, dataDir, at(3))
	a2, _ := backupFile(t, dataDir, at(4))
	b1, b2 := readFile(t, a1), readFile(t, a2)
	if !bytes.Equal(b1, b2) {
		t.Fatal("two rsyncable backups of an unchanged store differ")
	}
	newest := base.Add(time.Duration(len(convs)) * time.Hour)
	if m := r1.Manifest; !m.CreatedAt.Equal(newest) || m.Index != IndexSnapshot {
		t.Fatalf("createdAt %v (want the newest log's %v), index %s", m.CreatedAt, newest, m.Index)
	}
	if v := verifyFile(t, a1); !v.OK {
		t.Fatalf("verify: %+v", v.Mismatches)
	}
	if _, err := restoreFile(t, a1, RestoreOptions{Target: filepath.Join(t.TempDir(), "r")}); err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command("sh", "-c", `zstd -dcq "$1" | TZ=UTC tar -tvf - --full-time`, "sh", a1).Output()
	if err != nil {
		t.Skip("zstd and tar are needed to list the archive:", err)
	}
	var order []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		name := f[len(f)-1]
		conv, _, ok := strings.Cut(strings.TrimPrefix(name, store.ConversationsDirName+"/"), "/")
		mt, perr := time.Parse("2006-01-02 15:04:05", f[3]+" "+f[4])
		switch {
		case perr != nil:
			t.Fatalf("%s: %v", line, perr)
		case name == archive.IndexName && !mt.Equal(index):
			t.Errorf("%s: time %v, want the index's own %v", name, mt, index)
		case name == archive.ManifestName && !mt.Equal(newest):
			t.Errorf("%s: time %v, want %v", name, mt, newest)
		case ok:
			i := slices.Index(names, conv)
			if want := base.Add(time.Duration(len(convs)-i) * time.Hour); !mt.Equal(want) {
				t.Errorf("%s: time %v, want the log's own %v", name, mt, want)
			}
			if len(order) == 0 || order[len(order)-1] != conv {
				order = append(order, conv)
			}
		}
	}
	if len(order) != len(names) {
		t.Fatalf("%d conversations in the archive, %d in the store", len(order), len(names))
	}
	for i := range order {
		if order[i] != names[len(names)-1-i] {
			t.Fatalf("conversations in the archive: %v, want the oldest first: the reverse of %v", order, names)
		}
	}

	// Without the index.
	a3, r3 := backupFile(t, dataDir, Options{Rsyncable: true, NoIndex: true})
	if r3.Manifest.Index != IndexLeftOut || r3.Manifest.Counts.Files != r1.Manifest.Counts.Files-1 {
		t.Fatalf("without the index: index %s, %d files", r3.Manifest.Index, r3.Manifest.Counts.Files)
	}
	if v := verifyFile(t, a3); !v.OK || v.Index != IndexLeftOut {
		t.Fatalf("verify without the index: %+v, index %s", v.Mismatches, v.Index)
	}
	target := filepath.Join(t.TempDir(), "r3")
	if _, err := restoreFile(t, a3, RestoreOptions{Target: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(target, store.IndexFileName)); err != nil {
		t.Errorf("the restore built no index: %v", err)
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
