package cli

import ucli "github.com/urfave/cli/v2"

// newLockCommand is the lock command group.
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
