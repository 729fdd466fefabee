package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/store"
)

// configFlag is the --config option of the commands that check whether
// conversations will open here.
func configFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "config", Usage: "check agents and models against the runtime configuration `FILE` (default: $CONVKIT_CONFIG, else <data-dir>/config.toml)"}
}

// loadMachine reads the runtime configuration for dataDir as import does:
// --config, else $CONVKIT_CONFIG, else <dataDir>/config.toml. A file the
// user named must exist; a missing default file gives a Machine that does
// not check agents and models, and a warning saying so.
func (e *env) loadMachine(c *ucli.Context, dataDir string) (*store.Machine, string, error) {
	path, explicit := store.RuntimeConfigPath(c.String("config"), e.g.getenv, dataDir)
	return store.LoadMachine(path, explicit)
}

// loadMachineLenient is loadMachine for a command the configuration only
// informs (list, the edits): a default file that is broken is said on
// stderr, and agents and models are then not checked; a file the user
// named must be there and valid.
func (e *env) loadMachineLenient(c *ucli.Context, dataDir, what string) (*store.Machine, error) {
	path, explicit := store.RuntimeConfigPath(c.String("config"), e.g.getenv, dataDir)
	m, _, err := store.LoadMachine(path, explicit)
	if err == nil {
		return m, nil
	}
	if explicit {
		return nil, err
	}
	fmt.Fprintf(e.stderr, "%s: warning: %s: agents and models were not checked%s\n", progName, text(err.Error()), what)
	return &store.Machine{ConfigPath: path}, nil
}
