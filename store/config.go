package store

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/convkit/convkit/internal/durable"
)

// The runtime's configuration file names the agents and models that exist
// on a machine (docs/TRANSFER.md, "The runtime configuration").
const (
	// RuntimeConfigEnv names the configuration file when --config does not.
	RuntimeConfigEnv = "CONVKIT_CONFIG"
)

// RuntimeConfig is what convkit needs of the runtime's configuration: the names
// of the agents and models configured on this machine.
type RuntimeConfig struct {
	// Path is the file read.
	Path   string
	Agents map[string]AgentConfig
	Models map[string]ModelConfig
}

// AgentConfig is one [agents.<name>] table.
type AgentConfig struct {
	// Model is the agent's default model ("" when not set).
	Model string
}

// ModelConfig is one [models.<name>] table. Its keys (provider, limits,
// ...) belong to the runtime; import only needs the name.
type ModelConfig struct{}

// HasAgent reports whether agent name is configured.
func (c *RuntimeConfig) HasAgent(name string) bool {
	_, ok := c.Agents[name]
	return ok
}

// HasModel reports whether model name is configured.
func (c *RuntimeConfig) HasModel(name string) bool {
	_, ok := c.Models[name]
	return ok
}

// AgentNames lists the configured agents, sorted.
func (c *RuntimeConfig) AgentNames() []string { return sortedKeys(c.Agents) }

// ModelNames lists the configured models, sorted.
func (c *RuntimeConfig) ModelNames() []string { return sortedKeys(c.Models) }

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// RuntimeConfigPath says which configuration file to read: flag, else
// $CONVKIT_CONFIG, else <dataDir>/config.toml; explicit (the user named it)
// makes a missing file an error. getenv nil means os.Getenv.
func RuntimeConfigPath(flag string, getenv func(string) string, dataDir string) (path string, explicit bool) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if strings.TrimSpace(flag) != "" {
		return flag, true
	}
	if v := getenv(RuntimeConfigEnv); strings.TrimSpace(v) != "" {
		return v, true
	}
	return filepath.Join(dataDir, ConfigFileName), false
}

// LoadRuntimeConfig reads the runtime configuration at path. A missing file gives
// an error wrapping fs.ErrNotExist. Keys and tables other than
// [agents.<name>] and [models.<name>] are the runtime's and are ignored;
// an agent's model must be a string.
func LoadRuntimeConfig(path string) (*RuntimeConfig, error) {
	// A FIFO or a device in its place must not block the open; a link to
	// the runtime's own file is fine (it is only read).
	if fi, err := os.Stat(path); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	f, err := durable.OpenInput(path) // a FIFO put there since never blocks
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	var raw map[string]any
	if err := DecodeRuntimeConfig(path, f, &raw); err != nil {
		return nil, err
	}
	c := &RuntimeConfig{Path: path, Agents: map[string]AgentConfig{}, Models: map[string]ModelConfig{}}
	tables := func(key string) (map[string]map[string]any, error) {
		v, ok := raw[key]
		if !ok {
			return nil, nil
		}
		top, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: %s must be tables ([%s.NAME]), not %T", path, key, key, v)
		}
		out := map[string]map[string]any{}
		for name, t := range top {
			tt, ok := t.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: %s.%s must be a table ([%s.%s]), not %T", path, key, name, key, name, t)
			}
			out[name] = tt
		}
		return out, nil
	}
	agents, err := tables("agents")
	if err != nil {
		return nil, err
	}
	models, err := tables("models")
	if err != nil {
		return nil, err
	}
	for name, t := range agents {
		var a AgentConfig
		if v, ok := t["model"]; ok {
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("%s: agents.%s.model must be a string", path, name)
			}
			a.Model = s
		}
		c.Agents[name] = a
	}
	for name := range models {
		c.Models[name] = ModelConfig{}
	}
	return c, nil
}
