package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/termtext"
)

// Machine checks conversations against this machine's file system and
// runtime configuration, each working directory once; it is safe for
// concurrent use (make a new one when the machine may have changed).
type Machine struct {
	// Config is the runtime configuration; nil when there is none, and
	// then agents and models are not checked.
	Config *RuntimeConfig
	// ConfigPath is where the configuration was looked for.
	ConfigPath string

	mu   sync.Mutex
	dirs map[string]string // working directory -> reason it will not do ("": it will)
}

// LoadMachine reads the runtime configuration at path into a Machine. A
// missing file is an error when required, else a Machine that checks no
// agents or models, with a warning saying so; an invalid file is an error.
func LoadMachine(path string, required bool) (m *Machine, warning string, err error) {
	cfg, err := LoadRuntimeConfig(path)
	switch {
	case err == nil:
		return &Machine{Config: cfg, ConfigPath: path}, "", nil
	case errors.Is(err, os.ErrNotExist) && !required:
		return &Machine{ConfigPath: path}, ConfigNotCheckedWarning(path), nil
	default:
		return nil, "", fmt.Errorf("runtime configuration: %w", err)
	}
}

// ConfigNotCheckedWarning is the warning given, once per run, when there is no
// runtime configuration at path.
func ConfigNotCheckedWarning(path string) string {
	return fmt.Sprintf("no runtime configuration at %s: agents and models were not checked", path)
}

// Checked reports whether agents and models are checked (a configuration
// was found).
func (m *Machine) Checked() bool { return m != nil && m.Config != nil }

// Needs is what a conversation needs of a machine to open.
type Needs struct {
	// Cwd is its working directory, an absolute path.
	Cwd string
	// Agents and Models are those it used.
	Agents, Models []string
	// Sources are the conversations it reads older history from
	// (Dependencies).
	Sources []string
}

// NeedsOf is what the conversation info needs.
func NeedsOf(info *ConversationInfo) Needs {
	return Needs{Cwd: info.Cwd, Agents: info.Agents, Models: info.Models, Sources: Dependencies(info)}
}

// Check lists why a conversation that needs n will not open here (empty: it
// will). A nil Machine checks the working directory and fork sources only.
func (m *Machine) Check(n Needs, present func(id string) bool) []string {
	reasons := []string{}
	if why := m.dir(n.Cwd); why != "" {
		reasons = append(reasons, why)
	}
	if m.Checked() {
		for _, a := range n.Agents {
			if a != "" && !m.Config.HasAgent(a) {
				reasons = append(reasons, fmt.Sprintf("agent %s is not configured in %s", termtext.Quote(a), m.Config.Path))
			}
		}
		for _, md := range n.Models {
			if md != "" && !m.Config.HasModel(md) {
				reasons = append(reasons, fmt.Sprintf("model %s is not configured in %s", termtext.Quote(md), m.Config.Path))
			}
		}
	}
	for _, d := range n.Sources {
		if present == nil || !present(d) {
			reasons = append(reasons, ForkSourceMissing(d))
		}
	}
	return reasons
}

// ForkSourceMissing is the reason given for a fork source that is not in
// the store.
func ForkSourceMissing(id string) string {
	return fmt.Sprintf("fork source %s is missing: this conversation reads older history from it", termtext.Quote(id))
}

// dir says why cwd will not do as a working directory here ("": it will).
func (m *Machine) dir(cwd string) string {
	if cwd == "" {
		return "it records no working directory"
	}
	if m == nil {
		return dirReason(cwd)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	why, ok := m.dirs[cwd]
	if !ok {
		if m.dirs == nil {
			m.dirs = map[string]string{}
		}
		why = dirReason(cwd)
		m.dirs[cwd] = why
	}
	return why
}

// dirReason looks at the working directory cwd. A link to a directory is
// a directory: the runtime follows it.
func dirReason(cwd string) string {
	fi, err := os.Stat(cwd)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Sprintf("working directory %s does not exist here", cwd)
	case err != nil:
		return fmt.Sprintf("working directory %s cannot be used here: %v", cwd, pathless(err))
	case !fi.IsDir():
		return fmt.Sprintf("working directory %s is not a directory", cwd)
	}
	return ""
}

// pathless is err without the path a *os.PathError repeats.
func pathless(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

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

// LoadRuntimeConfig reads the runtime configuration at path (missing: an
// error wrapping os.ErrNotExist). Only [agents.<name>] and [models.<name>]
// are read; an agent's model must be a string.
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
