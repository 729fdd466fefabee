package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"github.com/convkit/convkit/internal/termtext"
)

// Machine checks conversations against this machine's file system and runtime
// configuration, looking at each working directory once; it is safe for
// concurrent use, and a long-lived caller makes a new one when the machine may
// have changed.
type Machine struct {
	// Config is the runtime configuration; nil when there is none, and
	// then agents and models are not checked.
	Config *RuntimeConfig
	// ConfigPath is where the configuration was looked for.
	ConfigPath string

	mu   sync.Mutex
	dirs map[string]string // working directory -> reason it will not do ("": it will)
}

// Load reads the runtime configuration at path (see ConfigPath) into a
// Machine. A missing file is an error when required (the user named it),
// else a Machine that checks no agents or models, and the returned warning
// says so; an invalid file is always an error.
func LoadMachine(path string, required bool) (m *Machine, warning string, err error) {
	cfg, err := LoadRuntimeConfig(path)
	switch {
	case err == nil:
		return &Machine{Config: cfg, ConfigPath: path}, "", nil
	case errors.Is(err, fs.ErrNotExist) && !required:
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

// Check lists why a conversation that needs n will not open here (working
// directory, unknown agents and models, fork sources present says are
// missing); empty means it will open. A nil Machine checks the directory and
// fork sources only.
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
// Conversations share working directories, so each is looked at once per
// Machine.
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
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("working directory %s does not exist here", cwd)
	case err != nil:
		return fmt.Sprintf("working directory %s cannot be used here: %v", cwd, pathless(err))
	case !fi.IsDir():
		return fmt.Sprintf("working directory %s is not a directory", cwd)
	}
	return ""
}

// pathless is err without the path a *fs.PathError repeats.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
