package transfer

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/store"
)

// TestImportConfig: a missing default configuration is a warning; a named
// one that is missing or broken stops the import before anything is read.
func TestImportConfig(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	arch, _ := exportTo(t, a, rep.Find(fixtures.CaseBasic).ID)
	b := filepath.Join(t.TempDir(), "B")
	ir, err := importFile(t, arch, b, ImportOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if ir.ConfigFound || len(ir.Warnings) != 1 || !strings.Contains(ir.Warnings[0], "agents and models were not checked") {
		t.Fatalf("%+v", ir)
	}
	if _, err := importFile(t, arch, b, ImportOptions{ConfigPath: filepath.Join(t.TempDir(), "none.toml"), ConfigRequired: true}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("got %v", err)
	}
	broken := filepath.Join(t.TempDir(), "broken.toml")
	os.WriteFile(broken, []byte("[agents\n"), 0o600)
	if _, err := importFile(t, arch, b, ImportOptions{ConfigPath: broken}); err == nil || !strings.Contains(err.Error(), "broken.toml: line ") {
		t.Fatalf("got %v", err)
	}
	if _, err := os.Lstat(b); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("created the data directory")
	}
	// Agents and models found in the configuration in the data directory.
	if err := os.MkdirAll(b, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, []string{"explorer"}, allModels)
	data, _ := os.ReadFile(cfg)
	os.WriteFile(filepath.Join(b, store.ConfigFileName), data, 0o600)
	ir, err = importFile(t, arch, b, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !ir.ConfigFound || len(ir.Warnings) != 0 {
		t.Fatalf("%+v", ir)
	}
	p := ir.Conversations[0]
	if !strings.Contains(strings.Join(p.Problems, "; "), `agent "coder" is not configured in `+filepath.Join(b, store.ConfigFileName)) {
		t.Fatalf("%q", p.Problems)
	}
}
