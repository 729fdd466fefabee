package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestEntriesSpill: past the entries held in memory the list goes to an
// unlinked file beside the tree, and reads back whole, in order, as often
// as asked; nothing is left beside the tree.
func TestEntriesSpill(t *testing.T) {
	const n = memEntries + 3000
	parent := t.TempDir()
	dir := filepath.Join(parent, "tree")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	ents, err := Extract(context.Background(), bytes.NewReader(emptyEntries(t, n)), dir, ExtractOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ents.Close()
	if ents.spill == nil {
		t.Fatal("no spill file past the entries held in memory")
	}
	if left, _ := os.ReadDir(parent); len(left) != 1 {
		t.Fatalf("beside the tree: %v", left)
	}
	for range 2 {
		all := slices.Collect(ents.All(n))
		if len(all) != n || ents.Err() != nil {
			t.Fatalf("%d of %d entries read back: %v", len(all), n, ents.Err())
		}
		for i, e := range all {
			if want := fmt.Sprintf("conversations/c/s%07d.v4.jsonl", i); e.Name != want || e.Size != 0 || e.Offset != int64(i)*512 ||
				e.Hex() != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
				t.Fatalf("entry %d: %+v", i, e)
			}
		}
	}
	if got := len(slices.Collect(ents.All(memEntries + 1))); got != memEntries+1 {
		t.Fatalf("the first %d entries: %d", memEntries+1, got)
	}
	if last := ents.Last(); last.Name != fmt.Sprintf("conversations/c/s%07d.v4.jsonl", n-1) {
		t.Fatalf("last: %+v", last)
	}
	// The manifest's absence is said once, and a listing of nothing
	// names at most maxMismatches entries and counts the rest.
	mm, err := CheckListing(ents, nil)
	if err != nil || len(mm) != maxMismatches+1 || mm[0].Reason != "in the archive but not in the manifest" ||
		mm[maxMismatches].Reason != fmt.Sprintf("%d more disagreements with the manifest, not listed", n-1-maxMismatches) {
		t.Fatalf("%d mismatches, %v; last %+v", len(mm), err, mm[len(mm)-1])
	}
	if _, err := testFormat.Verify("a", dir, ents, &testManifest{}); err == nil || !strings.Contains(err.Error(), "no MANIFEST.json as the last entry") {
		t.Fatalf("verify: %v", err)
	}
}

// TestExtractDuplicateOrder: a name found twice is refused at its second
// entry, whichever writer creates the first copy, and whether or not it is
// created yet.
func TestExtractDuplicateOrder(t *testing.T) {
	var tarBuf bytes.Buffer
	tw := tar.NewWriter(&tarBuf)
	name := func(i int) string { return fmt.Sprintf("conversations/c/s%d.v4.jsonl", i) }
	for _, i := range []int{0, 1, 2, 3, 4, 5, 6, 7, 3} {
		if err := tw.WriteHeader(&tar.Header{Name: name(i), Mode: 0o600, Size: 1, Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte{'x'})
	}
	tw.Close()
	data := zstdOf(t, tarBuf.Bytes())
	for range 50 {
		_, err := Extract(context.Background(), bytes.NewReader(data), t.TempDir(), ExtractOptions{ReaderOptions: ReaderOptions{Archive: "d"}})
		var ae *Error
		if !errors.As(err, &ae) || ae.Entry != 9 || ae.Name != name(3) || ae.Offset != 8*1024 || !ae.Refused ||
			!strings.HasSuffix(err.Error(), "refused: duplicate name") {
			t.Fatalf("%v (%+v)", err, ae)
		}
	}
}
