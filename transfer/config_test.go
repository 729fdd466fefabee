package transfer

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/convkit/convkit/fixtures"
)

func TestLoadConfig(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.toml")
	text := `# the runtime's own keys are ignored
listen = "127.0.0.1:7777"

[agents.coder]
model = "deepseek-pro"
tools = ["shell", "edit"]

[agents.explorer]

[agents."team/reviewer"]
model = "local"

[models.deepseek-pro]
provider = "deepseek-official"
context = 128000

[models.local]
`
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.AgentNames(); !reflect.DeepEqual(got, []string{"coder", "explorer", "team/reviewer"}) {
		t.Fatalf("agents %q", got)
	}
	if got := c.ModelNames(); !reflect.DeepEqual(got, []string{"deepseek-pro", "local"}) {
		t.Fatalf("models %q", got)
	}
	if c.Agents["coder"].Model != "deepseek-pro" || c.Agents["explorer"].Model != "" {
		t.Fatalf("%+v", c.Agents)
	}
	if !c.HasAgent("coder") || c.HasAgent("writer") || !c.HasModel("local") || c.HasModel("deepseek-flash") {
		t.Fatal("Has*")
	}

	for _, bad := range []struct{ text, want string }{
		{"[agents.coder]\nmodel = 3\n", "agents.coder.model must be a string"},
		{"[agents.coder\n", "line "},
		{"agents = 3\n", "agents must be tables ([agents.NAME])"},
		{"[models]\nx = 1\n", "models.x must be a table ([models.x])"},
	} {
		if err := os.WriteFile(p, []byte(bad.text), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := LoadConfig(p)
		if err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%q: got %v, want %q naming the file", bad.text, err, bad.want)
		}
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "none.toml")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestConfigPath(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if p, explicit := ConfigPath("", getenv, "/data"); p != "/data/config.toml" || explicit {
		t.Fatal(p, explicit)
	}
	env[ConfigEnv] = "/etc/runtime.toml"
	if p, explicit := ConfigPath("", getenv, "/data"); p != "/etc/runtime.toml" || !explicit {
		t.Fatal(p, explicit)
	}
	if p, explicit := ConfigPath("my.toml", getenv, "/data"); p != "my.toml" || !explicit {
		t.Fatal(p, explicit)
	}
}

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
	os.WriteFile(filepath.Join(b, ConfigFileName), data, 0o600)
	ir, err = importFile(t, arch, b, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !ir.ConfigFound || len(ir.Warnings) != 0 {
		t.Fatalf("%+v", ir)
	}
	p := ir.Conversations[0]
	if !strings.Contains(strings.Join(p.Problems, "; "), `agent "coder" is not configured in `+filepath.Join(b, ConfigFileName)) {
		t.Fatalf("%q", p.Problems)
	}
}
