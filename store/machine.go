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
// runtime configuration (config nil: agents and models are not checked),
// each working directory once; it is safe for concurrent use.
type Machine struct {
	config     *runtimeConfig
	ConfigPath string // where the configuration was looked for

	mu   sync.Mutex
	dirs map[string]string // working directory -> reason it will not do ("": it will)
}

// LoadMachine reads the runtime configuration at path into a Machine; a
// missing file not required gives a Machine that checks no agents or
// models, and a warning.
func LoadMachine(path string, required bool) (m *Machine, warning string, err error) {
	cfg, err := loadRuntimeConfig(path)
	switch {
	case err == nil:
		return &Machine{config: cfg, ConfigPath: path}, "", nil
	case errors.Is(err, os.ErrNotExist) && !required:
		return &Machine{ConfigPath: path}, ConfigNotCheckedWarning(path), nil
	default:
		return nil, "", fmt.Errorf("runtime configuration: %w", err)
	}
}

// ConfigNotCheckedWarning is the warning, once per run, of a missing
// runtime configuration.
func ConfigNotCheckedWarning(path string) string {
	return fmt.Sprintf("no runtime configuration at %s: agents and models were not checked", path)
}

// Checked reports whether agents and models are checked.
func (m *Machine) Checked() bool { return m != nil && m.config != nil }

// Needs is what a conversation needs of a machine to open: its working
// directory, agents, models and the Sources it reads older history from.
type Needs struct {
	Cwd                     string
	Agents, Models, Sources []string
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
			if a != "" && !m.config.Agents[a] {
				reasons = append(reasons, fmt.Sprintf("agent %s is not configured in %s", termtext.Quote(a), m.config.Path))
			}
		}
		for _, md := range n.Models {
			if md != "" && !m.config.Models[md] {
				reasons = append(reasons, fmt.Sprintf("model %s is not configured in %s", termtext.Quote(md), m.config.Path))
			}
		}
	}
	for _, d := range n.Sources {
		if present == nil || !present(d) {
			reasons = append(reasons, forkSourceMissing(d))
		}
	}
	return reasons
}

// forkSourceMissing is the reason given for a fork source not in the store.
func forkSourceMissing(id string) string {
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

// dirReason looks at the working directory cwd, following a link as the
// runtime does.
func dirReason(cwd string) string {
	fi, err := os.Stat(cwd)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Sprintf("working directory %s does not exist here", cwd)
	case err != nil:
		return fmt.Sprintf("working directory %s cannot be used here: %v", cwd, termtext.Bare(err))
	case !fi.IsDir():
		return fmt.Sprintf("working directory %s is not a directory", cwd)
	}
	return ""
}

// runtimeConfigEnv names the runtime configuration file (docs/TRANSFER.md)
// when --config does not.
const runtimeConfigEnv = "CONVKIT_CONFIG"

// runtimeConfig is what convkit needs of the runtime's configuration file
// at Path: the names of the agents and models configured on this machine.
type runtimeConfig struct {
	Path           string
	Agents, Models map[string]bool
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
	if v := getenv(runtimeConfigEnv); strings.TrimSpace(v) != "" {
		return v, true
	}
	return filepath.Join(dataDir, ConfigFileName), false
}

// loadRuntimeConfig reads the runtime configuration at path (missing: an
// error wrapping os.ErrNotExist): its [agents.<name>] tables, whose model
// must be a string, and [models.<name>] tables.
func loadRuntimeConfig(path string) (*runtimeConfig, error) {
	// A FIFO must not block the open; a link is fine (it is only read).
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
	c := &runtimeConfig{Path: path, Agents: map[string]bool{}, Models: map[string]bool{}}
	// Both tables' shapes are checked before an agent's model, in this order.
	var badModel error
	for _, tab := range []struct {
		key   string
		names map[string]bool
	}{{"agents", c.Agents}, {"models", c.Models}} {
		key, names := tab.key, tab.names
		v, ok := raw[key]
		if !ok {
			continue
		}
		top, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: %s must be tables ([%s.NAME]), not %T", path, key, key, v)
		}
		for name, t := range top {
			tt, ok := t.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: %s.%s must be a table ([%s.%s]), not %T", path, key, name, key, name, t)
			}
			if m, ok := tt["model"]; ok && key == "agents" && badModel == nil {
				if _, ok := m.(string); !ok {
					badModel = fmt.Errorf("%s: agents.%s.model must be a string", path, name)
				}
			}
			names[name] = true
		}
	}
	if badModel != nil {
		return nil, badModel
	}
	return c, nil
}
