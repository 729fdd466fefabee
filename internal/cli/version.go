package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"time"

	ucli "github.com/urfave/cli/v2"
)

// version is set at link time for releases (-ldflags "-X
// github.com/convkit/convkit/internal/cli.version=v1.2.3").
var version string

// readBuildInfo is debug.ReadBuildInfo; tests replace it.
var readBuildInfo = debug.ReadBuildInfo

// buildVersion is the version set at link time, else the module version
// the go command recorded, else a pseudo-version of the recorded VCS
// revision (+dirty), else "devel".
func buildVersion() string {
	if version != "" {
		return version
	}
	info, ok := readBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	vcs := vcsOf(info)
	if len(vcs.Revision) < 12 {
		return "devel"
	}
	stamp := "00000000000000"
	if t, err := time.Parse(time.RFC3339, vcs.Time); err == nil {
		stamp = t.UTC().Format("20060102150405")
	}
	v := "v0.0.0-" + stamp + "-" + vcs.Revision[:12]
	if vcs.Modified {
		v += "+dirty"
	}
	return v
}

func newVersionCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:  "version",
		Usage: "print the version of convkit",
		Description: `Prints "convkit <version>" (as convkit --version does). With --json, one
object: the version, the Go version and platform, the main module, the
version control revision the binary was built from (when Go recorded it)
and every module compiled in (docs/JSON.md).`,
		Action: withArgs(0, 0, func(c *ucli.Context) error {
			return runVersion(e)
		}),
	}
}

// versionResult is the --json output of version (docs/JSON.md).
type versionResult struct {
	SchemaVersion int             `json:"schemaVersion"`
	Version       string          `json:"version"`
	Go            string          `json:"go"`
	Platform      string          `json:"platform"`
	Module        *moduleVersion  `json:"module"`
	VCS           *vcsInfo        `json:"vcs"`
	Dependencies  []moduleVersion `json:"dependencies"`
}

type moduleVersion struct {
	Path    string         `json:"path"`
	Version string         `json:"version"`
	Sum     string         `json:"sum,omitempty"`
	Replace *moduleVersion `json:"replace,omitempty"`
}

type vcsInfo struct {
	System   string `json:"system"`
	Revision string `json:"revision"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified"`
}

func moduleOf(m *debug.Module) *moduleVersion {
	if m == nil {
		return nil
	}
	return &moduleVersion{Path: m.Path, Version: m.Version, Sum: m.Sum, Replace: moduleOf(m.Replace)}
}

func versionInfo() versionResult {
	res := versionResult{SchemaVersion: schemaVersion, Version: buildVersion(), Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, Dependencies: []moduleVersion{}}
	info, ok := readBuildInfo()
	if !ok {
		return res
	}
	if info.GoVersion != "" {
		res.Go = info.GoVersion
	}
	res.Module = moduleOf(&info.Main)
	for _, d := range info.Deps {
		res.Dependencies = append(res.Dependencies, *moduleOf(d))
	}
	if vcs := vcsOf(info); vcs.Revision != "" {
		res.VCS = &vcs
	}
	return res
}

func vcsOf(info *debug.BuildInfo) vcsInfo {
	set := map[string]string{}
	for _, s := range info.Settings {
		set[s.Key] = s.Value
	}
	return vcsInfo{System: set["vcs"], Revision: set["vcs.revision"], Time: set["vcs.time"], Modified: set["vcs.modified"] == "true"}
}

func runVersion(e *env) error {
	return e.result(e.stdout, "", versionInfo(), func() { fmt.Fprintf(e.stdout, "%s %s\n", progName, buildVersion()) })
}

func buildRevision() string {
	if v := versionInfo().VCS; v != nil {
		return v.Revision
	}
	return ""
}
