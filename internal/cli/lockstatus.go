package cli

import (
	"fmt"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/store"
)

func newLockStatusCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:  "status",
		Usage: "show whether runtime.lock is held, and by whom",
		Description: `Prints "runtime.lock: free", or
"runtime.lock: held by pid N ("COMMAND") on HOST since TIME".
It never takes the lock and never creates anything; a missing data
directory counts as free. A held lock is a result, not an error: the
exit status is 0 either way. --json prints one object (docs/JSON.md).`,
		Action: withArgs(0, 0, func(c *ucli.Context) error {
			dir, err := e.g.dataDir()
			if err != nil {
				return err
			}
			return runLockStatus(e, dir)
		}),
	}
}

// lockStatusResult is the --json output of lock status (docs/JSON.md).
type lockStatusResult struct {
	SchemaVersion int               `json:"schemaVersion"`
	Path          string            `json:"path"`
	Held          bool              `json:"held"`
	Holder        *lockHolderResult `json:"holder"` // null when free or unknown
	// RecordIgnored says why the lock file's record is not the holder's;
	// KernelPIDs are the holders the kernel lists (docs/JSON.md).
	RecordIgnored string `json:"recordIgnored,omitempty"`
	KernelPIDs    []int  `json:"kernelPids,omitempty"`
}

// lockHolderResult is the holder with its start in RFC 3339, UTC ("" if unknown).
type lockHolderResult struct {
	store.Holder
	StartedAt string `json:"startedAt"`
}

func runLockStatus(e *env, dataDir string) error {
	st, err := store.LockStatus(dataDir)
	if err != nil {
		return err
	}
	res := lockStatusResult{SchemaVersion: schemaVersion, Path: st.Path, Held: st.Held}
	h := st.Holder
	switch {
	case !st.Held:
		h = nil // the last holder: not shown
	case h == nil:
		res.RecordIgnored, res.KernelPIDs = st.RecordIgnored, st.KernelPIDs
	default:
		res.Holder = &lockHolderResult{Holder: *h, StartedAt: formatTime(h.StartedAt)}
	}
	return e.result(e.stdout, "", res, func() {
		line := "free"
		switch {
		case st.Held && h == nil:
			line = text(st.NoRecordText()) // the record's host is the file's text
		case st.Held:
			line = fmt.Sprintf("held by pid %d", h.PID) + strings.Join(labels(label{h.Command != "", " (" + quoted(h.Command) + ")"},
				label{h.Host != "", " on " + text(h.Host)}, label{!h.StartedAt.IsZero(), " since " + formatTime(h.StartedAt)}), "")
		}
		fmt.Fprintf(e.stdout, "%s: %s\n", store.LockFileName, line)
	})
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func newLockCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:  "lock",
		Usage: "show who holds runtime.lock",
		Description: `runtime.lock is held exclusively by the running runtime and by every
convkit command that writes the store. Read-only commands never take it.`,
		Subcommands: []*ucli.Command{
			newLockStatusCommand(e),
		},
	}
}
