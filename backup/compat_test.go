package backup

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
	"regexp"
	"strings"
	"testing"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/store"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*/*.golden.json from what this build reads")

// TestReadsEarlierArchives: the archives in testdata/v1 were written by an
// earlier build (testdata/v1/README.md says how). This build lists their
// entries, reads their manifests, verifies them, restores them whole and
// restores one conversation with its fork ancestors, and what it finds,
// decodes, reports and restores is what the build that wrote them found
// (the .golden.json beside each archive, made by that build).
func TestReadsEarlierArchives(t *testing.T) {
	for _, name := range []string{"backup.tar.zst", "backup-online-strict.tar.zst"} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join("testdata", "v1", name)
			got := map[string]any{}
			got["entries"] = archiveEntries(t, p)

			// The manifest as decoded, with what decoding derives from
			// the entry names.
			m := extractedManifest(t, p)
			logs := map[string][2]string{}
			for _, f := range m.Files {
				if f.Log != nil {
					conv, _ := logOf(f.Name)
					logs[f.Name] = [2]string{conv, f.Log.Session}
				}
			}
			got["manifest"], got["manifestLogs"] = m, logs

			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			vr, err := verifyReader(t, f, VerifyOptions{Archive: name, WorkDir: t.TempDir()})
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			got["verify"] = vr

			root := t.TempDir()
			target := filepath.Join(root, "store")
			rr, err := restoreFile(t, p, RestoreOptions{Target: target})
			if err != nil {
				t.Fatal(err)
			}
			rr.Archive = name
			got["restore"], got["restored"], got["restoredIndex"] = rr, treeSums(t, target), indexRows(t, target)

			one := filepath.Join(root, "one")
			rr, err = restoreFile(t, p, RestoreOptions{Target: one, Conversation: "a089d1ac-7370-4ddd-9637-b305a8fb4d29"})
			if err != nil {
				t.Fatal(err)
			}
			rr.Archive = name
			got["restoreConversation"], got["restoredConversation"] = rr, treeSums(t, one)

			compareGolden(t, strings.TrimSuffix(p, ".tar.zst")+".golden.json", got, map[string]string{root: "ROOT"}, stagingRE)
		})
	}
}

// stagingRE matches the name of a restore's staging directory, and of the
// tree in it, in a path the reindex reported from there: it is random, and
// how staging is laid out is no part of what a restore promises.
var stagingRE = regexp.MustCompile(`\.[^/"]+\.restore-[0-9a-f]{12}\.tmp(/tree)?`)

// compareGolden compares got, as indented JSON with the paths of repl
// replaced and what random matches as STAGING, with the golden file (or
// writes it, with -update).
func compareGolden(t *testing.T, golden string, got any, repl map[string]string, random *regexp.Regexp) {
	t.Helper()
	data, err := json.MarshalIndent(got, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	for from, to := range repl {
		data = bytes.ReplaceAll(data, []byte(from), []byte(to))
	}
	data = random.ReplaceAll(data, []byte("STAGING"))
	data = append(data, '\n')
	if *updateGolden {
		if err := os.WriteFile(golden, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(data, want) {
		gotLines, wantLines := strings.Split(string(data), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gotLines), len(wantLines)); i++ {
			var g, w string
			if i < len(gotLines) {
				g = gotLines[i]
			}
			if i < len(wantLines) {
				w = wantLines[i]
			}
			if g != w {
				t.Fatalf("%s differs from what this build reads, first at line %d:\n\twant %s\n\tgot  %s", golden, i+1, w, g)
			}
		}
	}
}

// entrySum is one archive entry as listed.
type entrySum struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// archiveEntries lists an archive's entries with the archive package's
// reader.
func archiveEntries(t *testing.T, p string) []entrySum {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := archive.NewReader(f, archive.ReaderOptions{Archive: p})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []entrySum
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
		out = append(out, entrySum{Name: h.Name, Size: h.Size, SHA256: hex.EncodeToString(s.Sum(nil))})
	}
	return out
}

// extractedManifest extracts the archive and reads its manifest.
func extractedManifest(t *testing.T, p string) *Manifest {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dir := t.TempDir()
	if _, err := archive.Extract(context.Background(), f, dir, archive.ExtractOptions{}); err != nil {
		t.Fatal(err)
	}
	m, err := ReadManifest(filepath.Join(dir, archive.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// treeSums maps every regular file under root but the lock file and the
// index (SQLite's bytes are its own) to its SHA-256, and every directory
// to its mode.
func treeSums(t *testing.T, root string) map[string]string {
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
		case fi.IsDir():
			out[filepath.ToSlash(rel)+"/"] = fi.Mode().String()
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

// indexRows are the rows of a store's metadata.db, without the logs'
// fingerprints and log identities (their sizes and modification times: the restore's clock).
func indexRows(t *testing.T, dataDir string) map[string]*index.Conversation {
	t.Helper()
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
