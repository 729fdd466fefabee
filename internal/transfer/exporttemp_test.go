package transfer

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/gofrs/flock"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/store"
)

// TestExportRemovesKilledTemps: the temporary file a killed export to the
// same file left (its lock is free) is removed by the next export, which
// says so; one being written (locked) is left alone; so is everything
// else. An export refused because the file exists removes them too.
func TestExportRemovesKilledTemps(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	id := rep.Find(fixtures.CaseBasic).ID
	dir := t.TempDir()
	out := filepath.Join(dir, "out.tar.zst")
	write := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("half an archive"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	killed := write(".out.tar.zst.0123456789abcdef.tmp")
	live := write(".out.tar.zst.fedcba9876543210.tmp")
	l := flock.New(live)
	if ok, err := l.TryLock(); err != nil || !ok {
		t.Fatal("lock", err)
	}
	defer l.Close()
	other := write(".other.tar.zst.0123456789abcdef.tmp")

	var events []store.Item
	_, err := ExportToFile(context.Background(), reader(t, a), out, ExportOptions{IDs: []string{id}, Now: fixedNow,
		OnEvent: func(ev store.Item) { events = append(events, ev) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 1 || events[0] != (store.Item{Kind: store.ItemTempRemoved, Path: killed, Reason: "left by an interrupted export"}) {
		t.Fatalf("events: %+v", events)
	}
	for p, want := range map[string]bool{killed: false, live: true, other: true, out: true} {
		if _, err := os.Lstat(p); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(p), err == nil, want)
		}
	}

	killed = write(".out.tar.zst.00000000000000ff.tmp")
	_, err = ExportToFile(context.Background(), reader(t, a), out, ExportOptions{IDs: []string{id}, Now: fixedNow})
	if !errors.Is(err, fs.ErrExist) {
		t.Fatalf("over an existing file: %v", err)
	}
	if _, err := os.Lstat(killed); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a killed export's temporary file was left beside an existing archive: %v", err)
	}
}
