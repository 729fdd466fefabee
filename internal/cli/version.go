package cli

import (
	"fmt"
	"runtime/debug"

	ucli "github.com/urfave/cli/v2"
)

// version is set at link time for releases:
//
//	go build -ldflags "-X github.com/convkit/convkit/internal/cli.version=v1.2.3" ./cmd/convkit
//
// Otherwise it comes from the module version go install records, else it is
// "devel".
var version string

func buildVersion() string {
	if version != "" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return "devel"
}

func newVersionCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:  "version",
		Usage: "print the version of convkit",
		Description: `Prints "convkit <version>", or with --json the object
{"schemaVersion":1,"version":"<version>"}.`,
		Action: func(c *ucli.Context) error {
			if err := checkArgs(c, 0, 0); err != nil {
				return err
			}
			return runVersion(e)
		},
	}
}

// versionResult is the --json output of version (docs/JSON.md).
type versionResult struct {
	SchemaVersion int    `json:"schemaVersion"`
	Version       string `json:"version"`
}

func runVersion(e *env) error {
	v := buildVersion()
	if e.g.JSON {
		return writeJSON(e.stdout, versionResult{SchemaVersion: schemaVersion, Version: v})
	}
	_, err := fmt.Fprintf(e.stdout, "%s %s\n", progName, v)
	return err
}
