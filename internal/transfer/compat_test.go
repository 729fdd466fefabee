package transfer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/store"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*/*.golden.json from what this build reads")

// TestImportsEarlierExports: testdata/v1/export.tar.zst was written by an
// earlier build (testdata/v1/README.md says how), online. This build lists
// its entries, plans a dry run, imports it into a new store and again into
// the same store, and what it finds, plans, imports and indexes is what
// the build that wrote it found (export.golden.json, made by that build).
func TestImportsEarlierExports(t *testing.T) {
	// The plan says the conversations' working directories do not exist
	// here, which is true on a machine without the fixtures' source tree.
	if _, err := os.Lstat("/home/dev/src"); err == nil {
		t.Skip("/home/dev/src exists: the plan would differ from the golden one")
	}
	p := filepath.Join("testdata", "v1", "export.tar.zst")
	root := t.TempDir()
	cfg := writeConfig(t, allAgents, allModels)
	data := filepath.Join(root, "store")
	got := map[string]any{"entries": exportEntries(t, p)}
	opts := ImportOptions{Archive: "export.tar.zst", ConfigPath: cfg}

	dry := opts
	dry.DryRun = true
	res, err := importFile(t, p, data, dry)
	if err != nil {
		t.Fatal(err)
	}
	got["dryRun"] = res
	res, err = importFile(t, p, data, opts)
	if err != nil {
		t.Fatal(err)
	}
	got["import"], got["imported"], got["importedIndex"] = res, storeSums(t, data), storeRows(t, data)
	res, err = importFile(t, p, data, opts)
	if err != nil {
		t.Fatal(err)
	}
	got["importAgain"] = res

	out, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	out = bytes.ReplaceAll(out, []byte(root), []byte("ROOT"))
	out = bytes.ReplaceAll(out, []byte(cfg), []byte("CONFIG"))
	out = append(out, '\n')
	golden := filepath.Join("testdata", "v1", "export.golden.json")
	if *updateGolden {
		if err := os.WriteFile(golden, out, 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, want) {
		g, w := strings.Split(string(out), "\n"), strings.Split(string(want), "\n")
		for i := range max(len(g), len(w)) {
			gl, wl := "", ""
			if i < len(g) {
				gl = g[i]
			}
			if i < len(w) {
				wl = w[i]
			}
			if gl != wl {
				t.Fatalf("%s differs from what this build reads, first at line %d:\n\twant %s\n\tgot  %s", golden, i+1, wl, gl)
			}
		}
	}
}

// exportEntries lists an archive's entries (name, size, SHA-256) with the
// archive package's reader, as an export is read.
func exportEntries(t *testing.T, p string) []string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := archive.NewReader(f, archive.ReaderOptions{Archive: p, CheckName: checkExportName})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		s := sha256.New()
		if _, err := io.Copy(s, r); err != nil {
			t.Fatal(err)
		}
		out = append(out, h.Name+" "+hex.EncodeToString(s.Sum(nil)))
	}
	return out
}

// storeSums maps every file and directory of a store but runtime.lock and
// metadata.db (SQLite's bytes are its own) to its mode and SHA-256.
func storeSums(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case rel == store.LockFileName || rel == store.IndexFileName:
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(data)
			out[filepath.ToSlash(rel)] = fi.Mode().String() + " " + hex.EncodeToString(s[:])
		default:
			out[filepath.ToSlash(rel)] = fi.Mode().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// storeRows are the rows of a store's metadata.db, without the logs'
// fingerprints and log identities (their sizes and modification times: the import's clock);
// nil when it has none.
func storeRows(t *testing.T, dataDir string) map[string]*index.Conversation {
	t.Helper()
	if _, err := os.Lstat(filepath.Join(dataDir, store.IndexFileName)); err != nil {
		return nil
	}
	db, err := index.Open(filepath.Join(dataDir, store.IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		r.Fingerprint, r.LogIdentity = "", ""
	}
	return rows
}
