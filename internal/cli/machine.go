package cli

import (
	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/machine"
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
func (e *env) loadMachine(c *ucli.Context, dataDir string) (*machine.Machine, string, error) {
	path, explicit := machine.ConfigPath(c.String("config"), e.g.getenv, dataDir)
	return machine.Load(path, explicit)
}
