package store

import (
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
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
	c, err := loadRuntimeConfig(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(c.Agents)); !reflect.DeepEqual(got, []string{"coder", "explorer", "team/reviewer"}) {
		t.Fatalf("agents %q", got)
	}
	if got := slices.Sorted(maps.Keys(c.Models)); !reflect.DeepEqual(got, []string{"deepseek-pro", "local"}) {
		t.Fatalf("models %q", got)
	}
	if !c.Agents["coder"] || c.Agents["writer"] || !c.Models["local"] || c.Models["deepseek-flash"] {
		t.Fatalf("%+v", c)
	}

	for _, bad := range []struct{ text, want string }{
		{"[agents.coder]\nmodel = 3\n", "agents.coder.model must be a string"},
		{"[agents.coder\n", "line "},
		{"agents = 3\n", "agents must be tables ([agents.NAME])"},
		{"[models]\nx = 1\n", "models.x must be a table ([models.x])"},
		// Shapes first, agents before models, whatever the map order.
		{"agents = 1\nmodels = 2\n", "agents must be tables ([agents.NAME])"},
		{"models = 2\n[agents.coder]\nmodel = 3\n", "models must be tables ([models.NAME])"},
	} {
		if err := os.WriteFile(p, []byte(bad.text), 0o600); err != nil {
			t.Fatal(err)
		}
		var err error
		for range 20 { // map order varies between runs
			if _, err = loadRuntimeConfig(p); err == nil || !strings.Contains(err.Error(), bad.want) {
				break
			}
		}
		if err == nil || !strings.Contains(err.Error(), bad.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%q: got %v, want %q naming the file", bad.text, err, bad.want)
		}
	}
	if _, err := loadRuntimeConfig(filepath.Join(t.TempDir(), "none.toml")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
}

func TestConfigPath(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if p, explicit := RuntimeConfigPath("", getenv, "/data"); p != "/data/config.toml" || explicit {
		t.Fatal(p, explicit)
	}
	env[runtimeConfigEnv] = "/etc/runtime.toml"
	if p, explicit := RuntimeConfigPath("", getenv, "/data"); p != "/etc/runtime.toml" || !explicit {
		t.Fatal(p, explicit)
	}
	if p, explicit := RuntimeConfigPath("my.toml", getenv, "/data"); p != "my.toml" || !explicit {
		t.Fatal(p, explicit)
	}
}
