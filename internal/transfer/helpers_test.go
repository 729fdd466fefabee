package transfer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/store"
)

var fixedNow = func() time.Time { return time.Date(2026, 10, 1, 12, 0, 0, 0, time.UTC) }

// generated caches one fixtures store per seed; tests copy it.
var (
	genMu    sync.Mutex
	genCache = map[int64]string{}
	genRep   = map[int64]*fixtures.Report{}
	genRoot  string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "transfer-test-")
	if err != nil {
		panic(err)
	}
	genRoot = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// fixtureStore returns a fresh copy of the generated store of seed (20
// conversations) and its report (paths are the cached store's).
func fixtureStore(t *testing.T, seed int64) (string, *fixtures.Report) {
	t.Helper()
	genMu.Lock()
	src, ok := genCache[seed]
	if !ok {
		src = filepath.Join(genRoot, fmt.Sprintf("seed-%d", seed))
		rep, err := fixtures.Generate(src, fixtures.Options{Seed: seed, Conversations: 20})
		if err != nil {
			genMu.Unlock()
			t.Fatal(err)
		}
		genCache[seed], genRep[seed] = src, rep
	}
	rep := genRep[seed]
	genMu.Unlock()
	dst := filepath.Join(t.TempDir(), "A")
	copyTree(t, src, dst)
	return dst, rep
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o700)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, data, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// treeHash hashes everything under dir: names (hidden ones too), types,
// modes and contents. runtime.lock's content (the last holder) is left out.
func treeHash(t *testing.T, dir string) string {
	t.Helper()
	h := sha256.New()
	if _, err := os.Lstat(dir); err != nil {
		fmt.Fprintf(h, "absent")
		return hex.EncodeToString(h.Sum(nil))
	}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%v\x00", rel, fi.Mode())
		if fi.Mode().IsRegular() && rel != store.LockFileName {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(data)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			fmt.Fprintf(h, "->%s", target)
		}
		h.Write([]byte{0})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// listTree names every entry under dir, for failure messages.
func listTree(dir string) string {
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func exportTo(t *testing.T, dataDir string, ids ...string) (string, *ExportResult) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "export.tar.zst")
	res, err := ExportToFile(context.Background(), reader(t, dataDir), p, ExportOptions{IDs: ids, Now: fixedNow, ToolVersion: "test"})
	if err != nil {
		t.Fatalf("export: %v", err)
	}
	return p, res
}

func importFile(t *testing.T, archivePath, dataDir string, opts ImportOptions) (*ImportResult, error) {
	t.Helper()
	f, err := os.Open(archivePath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if opts.Archive == "" {
		opts.Archive = archivePath
	}
	return importInto(context.Background(), f, dataDir, opts)
}

// importInto imports into the store in dataDir as the import command
// does: the store opened read-only (a new store made of a missing or
// empty directory) for Stage, then exclusively for Import.
func importInto(ctx context.Context, r io.Reader, dataDir string, opts ImportOptions) (*ImportResult, error) {
	s, err := store.Open(ctx, dataDir, store.OpenOptions{Create: store.CreateIfEmpty})
	if err != nil {
		return nil, err
	}
	sg, err := Stage(ctx, r, s, opts)
	if err != nil {
		return nil, err
	}
	defer sg.Close()
	var st *store.Store
	if !opts.DryRun {
		st, err = store.Open(ctx, dataDir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "convkit import"},
			Create: store.CreateIfEmpty, Now: fixedNow})
		if err != nil {
			return nil, err
		}
		defer st.Close()
	}
	return sg.Import(ctx, st)
}

func importBytes(t *testing.T, data []byte, dataDir string, opts ImportOptions) (*ImportResult, error) {
	t.Helper()
	if opts.Archive == "" {
		opts.Archive = "test.tar.zst"
	}
	return importInto(context.Background(), bytes.NewReader(data), dataDir, opts)
}

// writeConfig writes a runtime configuration naming agents and models.
func writeConfig(t *testing.T, agents, models []string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("# the runtime's configuration\nlisten = \"127.0.0.1:7777\"\n\n")
	for _, a := range agents {
		fmt.Fprintf(&b, "[agents.%q]\nmodel = \"deepseek-pro\"\ntools = [\"shell\"]\n\n", a)
	}
	for _, m := range models {
		fmt.Fprintf(&b, "[models.%q]\nprovider = \"deepseek-official\"\n\n", m)
	}
	p := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

var allAgents = []string{"coder", "explorer", "reviewer"}
var allModels = []string{"deepseek-flash", "deepseek-pro"}

func planOf(t *testing.T, res *ImportResult, id string) ConversationPlan {
	t.Helper()
	for _, p := range res.Conversations {
		if p.ID == id {
			return p
		}
	}
	t.Fatalf("no plan for %q in %+v", id, res.Conversations)
	return ConversationPlan{}
}

// rename renames a conversation in a store (a change appended to its log).
func rename(t *testing.T, dataDir, id, title string) {
	t.Helper()
	s, err := store.Open(context.Background(), dataDir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Rename(id, title); err != nil {
		t.Fatal(err)
	}
}

// decodeManifest reads a manifest and checks its header.
func decodeManifest(r io.Reader, name string) (*Manifest, error) {
	var m Manifest
	if err := json.NewDecoder(r).Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &m, nil
}
