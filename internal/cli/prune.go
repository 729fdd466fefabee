package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/internal/dshroot"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/migrate"
	"github.com/convkit/convkit/migrate/prune"
	"github.com/convkit/convkit/store"
)

func newPruneCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:  "prune",
		Usage: "remove the older generations of logs whose v4 successor holds their events",
		Description: `After a migration every v0-v3 log stays beside its v4 successor. prune
removes an older generation when, checked now, the log's current
generation is at format v4, reads to its end as a strict reader reads it,
names the same log, and holds every event the upgrade chain derives from
the older generation (the same seqs, equal); a log whose current
generation is older is never touched. Each file removed is printed with
its size, then "Summary: files=N, reclaimed=SIZE, logs=L, kept=K"; a
generation the check refuses is kept ("KEPT <path>: <why>", exit 3).
Each removal is one unlink: a crash leaves each file whole or gone.

The root is the data directory's store (runtime.lock taken), or with
--sessions-dir a sessions root as migrate takes it (in the runtime's
layout, each session pruned holding its session.lock). --dry-run checks
and removes nothing, taking no lock.`,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "dry-run", Usage: "check and say what would be removed, remove nothing"},
			&ucli.StringFlag{Name: "sessions-dir", Usage: "the sessions root `DIR` (default: <data-dir>/conversations)"},
			newChoiceFlag("layout", "the root's `LAYOUT`: auto, convkit or dsh", "auto", "convkit", "dsh"),
		},
		Action: withArgs(0, 0, func(c *ucli.Context) error {
			root, err := migrateRoot(c, e, migrate.Layout(c.String("layout")))
			if err != nil {
				return err
			}
			s, r, err := e.openRoot(c, root)
			if err != nil {
				return err
			}
			if s != nil {
				defer s.Close()
			}
			return e.prune(c, s, r, "summary")
		}),
	}
}

// prune prunes the store s, or the sessions root r, printing each file and
// the summary (--json: of message_type summaryType).
func (e *env) prune(c *ucli.Context, s *store.Store, r *dshroot.Root, summaryType string) error {
	dry := c.Bool("dry-run")
	opts := prune.Options{DryRun: dry}
	if e.g.JSON {
		opts.OnEvent = func(g prune.Generation) { writeJSONWith(e.stdout, `"message_type":"status"`, g) }
	} else {
		lines := e.libraryLines(e.stdout, nil)
		verb := map[string]string{prune.ActionRemoved: "REMOVED", prune.ActionRemovable: "WOULD REMOVE"}
		opts.OnEvent = func(g prune.Generation) {
			if g.Action == prune.ActionKept {
				fmt.Fprintf(lines, "KEPT %s: %s\n", quoted(g.Path), text(g.Reason))
			} else {
				fmt.Fprintf(lines, "%s %s (v%d, %s)\n", verb[g.Action], quoted(g.Path), g.Version, termtext.Size(g.Bytes))
			}
		}
	}
	var res *prune.Result
	var err error
	if r != nil {
		res, err = prune.Sessions(c.Context, r, opts)
	} else {
		res, err = prune.Store(c.Context, s, opts)
	}
	if err != nil {
		return err
	}
	if err := e.result(e.stdout, `"message_type":"`+summaryType+`",`+versionHead, res, func() {
		fmt.Fprintf(e.stdout, "Summary: files=%d, reclaimed=%s, logs=%d, kept=%d\n", res.Files, termtext.Size(res.Bytes), res.Logs, res.Kept)
		if dry {
			fmt.Fprintln(e.stdout, "Dry run: nothing was removed.")
		}
	}); err != nil {
		return err
	}
	if res.Kept > 0 {
		return partialf("%d older generation(s) kept: their successor does not hold them, or their session is locked (see KEPT above)", res.Kept)
	}
	return nil
}
