package cli

import (
	"errors"
	"fmt"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/internal/manage"
	"github.com/convkit/convkit/store"
)

func newRenameCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:      "rename",
		Usage:     "set a conversation's title",
		ArgsUsage: "ID TITLE",
		Description: `Records the title in the conversation's log (conversation/renamed): from then
on the automatic title (the first line of the first message) never replaces
it. A title is one line of text without control characters. metadata.db is
updated when present. Takes runtime.lock.`,
		Flags: []ucli.Flag{configFlag()},
		Action: withArgs(2, 2, func(c *ucli.Context) error {
			if _, err := store.CheckTitle(c.Args().Get(1)); err != nil {
				return usagef(c, "%v", err)
			}
			return e.runManage(c, "rename", c.Args().Slice()[:1], func(s *store.Store, ids []string, opts manage.Options) (*manage.Result, error) {
				return manage.Rename(c.Context, s, ids[0], c.Args().Get(1), opts)
			})
		}),
	}
}

func newArchiveCommand(e *env) *ucli.Command {
	return newArchivingCommand(e, "archive", "hide conversations from the main list", `Records conversation/archived in each conversation's log: it is hidden from
the main list (convkit list --archived shows it), nothing else changes, and a
running turn goes on. A conversation already archived is left as it is.
Every ID must exist before anything is recorded. metadata.db is updated when
present. Takes runtime.lock.`, true)
}

func newUnarchiveCommand(e *env) *ucli.Command {
	return newArchivingCommand(e, "unarchive", "bring archived conversations back to the main list", `Records conversation/unarchived in each conversation's log. A conversation
that is not archived is left as it is. Every ID must exist before anything
is recorded. metadata.db is updated when present. Takes runtime.lock.`, false)
}

func newArchivingCommand(e *env, name, usage, desc string, archived bool) *ucli.Command {
	return &ucli.Command{
		Name:        name,
		Usage:       usage,
		ArgsUsage:   "ID...",
		Description: desc,
		Flags:       []ucli.Flag{configFlag()},
		Action: withArgs(1, -1, func(c *ucli.Context) error {
			return e.runManage(c, name, c.Args().Slice(), func(s *store.Store, ids []string, opts manage.Options) (*manage.Result, error) {
				return manage.SetArchived(c.Context, s, ids, archived, opts)
			})
		}),
	}
}

func newDeleteCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:      "delete",
		Usage:     "delete conversations through the tombstone",
		ArgsUsage: "ID...",
		Description: `Records a delete in each conversation's log (the tombstone), then removes its
directory; metadata.db is updated when present. Every ID is checked before
anything is deleted: it must exist, run no turn, and, unless --force, no
fork made after a compaction that stays may read older history from it
(name such forks in the same command). A delete that was interrupted is
finished by running it again (conversations it had removed are reported as
"already deleted"), or by reindex. Takes runtime.lock.

--dry-run makes the same checks and says what would be deleted (each
conversation's title, files and size), taking no lock and changing
nothing. On a terminal (stdin), delete lists what it is about to delete
and asks first, unless --yes; from a script it does not ask.`,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "force", Usage: "delete even a conversation that forks made after a compaction read older history from"},
			&ucli.BoolFlag{Name: "dry-run", Usage: "say what would be deleted; take no lock, change nothing"},
			&ucli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "do not ask on a terminal"},
			configFlag(),
		},
		Action: withArgs(1, -1, func(c *ucli.Context) error {
			if c.Bool("dry-run") && c.Bool("yes") {
				return usagef(c, "--dry-run deletes nothing: --yes does not apply to it")
			}
			ids := c.Args().Slice()
			var err error
			switch {
			case c.Bool("dry-run"):
				err = runDeletePlan(c, e)
			case !c.Bool("yes") && e.terminal(e.stdin):
				if ids, err = confirmDelete(c, e); err == nil && ids != nil {
					err = e.runDelete(c, ids)
				}
			default:
				err = e.runDelete(c, ids)
			}
			switch {
			case errors.Is(err, store.ErrHasDependents):
				return withHint(err, "delete those too (name them in the same command), or pass --force")
			case errors.Is(err, store.ErrTurnRunning):
				return withHint(err, "no runtime holds runtime.lock, so a crash left that turn open: convkit repair closes it (as interrupted), then delete it")
			}
			return err
		}),
	}
}

func (e *env) runDelete(c *ucli.Context, refs []string) error {
	return e.runManage(c, "delete", refs, func(s *store.Store, ids []string, opts manage.Options) (*manage.Result, error) {
		return manage.Delete(c.Context, s, ids, c.Bool("force"), opts)
	})
}

// runManage runs an edit of the conversations refs name in the locked store,
// printing each conversation's line as it is done (--json: the result).
func (e *env) runManage(c *ucli.Context, command string, refs []string, do func(*store.Store, []string, manage.Options) (*manage.Result, error)) error {
	dataDir, err := e.g.dataDir()
	if err != nil {
		return err
	}
	s, err := e.openStore(c.Context, command, store.LockExclusive)
	if err != nil {
		return err
	}
	defer s.Close()
	m, err := e.loadMachineLenient(c, dataDir, " for metadata.db")
	if err != nil {
		return err
	}
	ids, err := resolveIDs(c, s, refs)
	if err != nil {
		return err
	}
	opts := manage.Options{Machine: m}
	if !e.g.JSON && !e.g.Quiet {
		opts.OnDone = func(o manage.Outcome) { fmt.Fprintln(e.stdout, manageLine(o)) }
	}
	res, err := do(s, ids, opts)
	if res != nil {
		e.warnings(res.Warnings)
		if e.g.JSON {
			if jerr := writeJSON(e.stdout, res); jerr != nil && err == nil {
				err = jerr
			}
		}
	}
	return err
}

// manageLine is the stdout line of one conversation's outcome.
func manageLine(o manage.Outcome) string {
	id := text(o.ID)
	switch o.Action {
	case manage.ActionRenamed:
		return fmt.Sprintf("renamed %s: %s", id, quoted(o.Title))
	case manage.ActionUnchanged:
		return fmt.Sprintf("unchanged %s: already titled %s", id, quoted(o.Title))
	}
	return strings.ReplaceAll(o.Action, "-", " ") + " " + id
}
