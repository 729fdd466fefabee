package index

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// bindReadOnly makes dir a read-only bind mount of itself for the rest of
// the test, or skips the test when mount(2) is not permitted.
func bindReadOnly(t *testing.T, dir string) {
	t.Helper()
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("a read-only mount needs mount(2): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(dir, syscall.MNT_DETACH) })
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", dir, err)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// liveCopy copies an index while a writer holds it open with a committed
// transaction still in its write-ahead log (no checkpoint): what a
// snapshot of a running store's disk holds. withShm keeps the WAL index.
func liveCopy(t *testing.T, withShm bool) string {
	t.Helper()
	src := goodIndex(t)
	w, err := Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	w.db.SetMaxOpenConns(1)
	if _, err := w.db.Exec("PRAGMA wal_autocheckpoint=0"); err != nil {
		t.Fatal(err)
	}
	if err := w.Upsert(context.Background(), conv("b", 200, false), []Message{{SessionID: "root", Seq: 1, Role: "user", Text: "about badgers"}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := []string{"metadata.db", "metadata.db-wal"}
	if withShm {
		files = append(files, "metadata.db-shm")
	}
	for _, n := range files {
		data, err := os.ReadFile(filepath.Join(filepath.Dir(src), n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, n), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "metadata.db")
}

// TestOpenReadOnReadOnlyMount reads an index on a read-only bind mount in
// the three states a read-only medium can hold it in, and on a writable
// directory: every committed conversation is seen, search works, nothing
// is written beside it, and a private snapshot is removed on Close.
func TestOpenReadOnReadOnlyMount(t *testing.T) {
	cases := []struct {
		name     string
		path     func(t *testing.T) string
		readOnly bool
		mode     string
		ids      []string
	}{
		{"writable directory", goodIndex, false, modeInPlace, []string{"a"}},
		{"clean index", goodIndex, true, modeImmutable, []string{"a"}},
		{"write-ahead log and WAL index", func(t *testing.T) string { return liveCopy(t, true) }, true, modeInPlace, []string{"b", "a"}},
		{"write-ahead log without WAL index", func(t *testing.T) string { return liveCopy(t, false) }, true, modeSnapshot, []string{"b", "a"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.path(t)
			dir := filepath.Dir(p)
			if c.readOnly {
				bindReadOnly(t, dir)
			}
			before := names(t, dir)
			tmp := t.TempDir()
			ctx := context.Background()
			db, err := OpenRead(ctx, p, ReadOptions{TempDir: tmp})
			if err != nil {
				t.Fatal(err)
			}
			if db.mode != c.mode {
				t.Errorf("mode %s, want %s", db.mode, c.mode)
			}
			rows, err := db.List(ctx, ListOptions{All: true})
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range rows {
				ids = append(ids, r.ID)
			}
			if !slices.Equal(ids, c.ids) {
				t.Errorf("list %v, want %v", ids, c.ids)
			}
			if hits, err := db.Search(ctx, "otters", 5); err != nil || len(hits) != 1 {
				t.Errorf("search: %v %v", hits, err)
			}
			// A snapshot into a file, as backup takes it.
			dst := filepath.Join(tmp, "copy.db")
			if err := os.WriteFile(dst, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := VacuumInto(ctx, p, dst, ReadOptions{TempDir: tmp}); err != nil {
				t.Fatal(err)
			}
			cp, err := OpenRead(ctx, dst, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			all, err := cp.All(ctx)
			cp.Close()
			if err != nil || len(all) != len(c.ids) {
				t.Errorf("the VACUUM INTO copy holds %d conversations (%v), want %d", len(all), err, len(c.ids))
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
			if got := names(t, dir); !slices.Equal(got, before) {
				t.Errorf("the directory held %v, now %v", before, got)
			}
			if got := names(t, tmp); fmt.Sprint(got) != "[copy.db]" {
				t.Errorf("the temporary directory holds %v after Close", got)
			}
		})
	}
}
