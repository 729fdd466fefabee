package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/internal/dshroot"
	"github.com/convkit/convkit/migrate"
	"github.com/convkit/convkit/store"
)

func newMigrateCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:    "migrate",
		Aliases: []string{"migrate-sessions"},
		Usage:   "bring every log under the sessions root forward to format v4",
		Description: `Converts every log under the sessions root (default: the data directory's
conversations/) to format version 4. Each successor is written beside its
untouched original, verified, and published without overwriting; a log
already at v4 is opened read-only and validated (a torn tail is left as
it is). At most --jobs logs are converted at once. A log that changes
while it is converted is deferred and retried once after the first pass;
a failure never stops the rest. Symbolic links are never followed; a link
or a log outside the layout's shape is a failed input; a directory
holding no log is skipped.

The root is a convkit store's conversations/ (locked by its runtime.lock)
or a sessions root in the runtime's own layout,
<root>/<project-dir>/<session-dir>/session[.vN].jsonl[.zstd] (each older
session converted holding its session.lock; a locked one fails). --layout
auto (the default) tells them apart by shape and refuses a root showing
both, or neither. In a store, the index rows of the conversations
converted are updated after the run (a missing or unusable index is left
for reindex).

One line per log as it starts and ends, then exactly
"Summary: converted=A, already-V4=B, failed=F, skipped=S", each failure
with its path and message, "Full log: PATH" and "JSON summary: PATH"
(a private folder in the temporary directory, or --report-dir; report
folders there older than 7 days are removed). --exclude GLOB (repeatable)
skips the inputs whose path under the root, or a directory they are in,
matches: a cron job acknowledges entries it cannot convert and exits 0
until something new fails. --json prints one JSON object per event and
then the summary. Uses no model and no API key. Exit 1 if any log failed.`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "sessions-dir", Usage: "the sessions root `DIR` (default: <data-dir>/conversations; with --layout dsh, $DSH_HOME/sessions or ~/.dsh/sessions)"},
			newChoiceFlag("layout", "the root's `LAYOUT`: auto, convkit or dsh", "auto", "convkit", "dsh"),
			&ucli.StringFlag{Name: "jobs", Usage: "convert at most `N` logs at once (default: CPUs, at most 16)"},
			&ucli.BoolFlag{Name: "dry-run", Usage: "plan only: what each log would become and the space needed"},
			newChoiceFlag("compress", "successor compression `MODE`: keep, zstd or none (convkit layout only)", "keep", "zstd", "none"),
			&ucli.StringFlag{Name: "report-dir", Usage: "make the report folder (migration.log, summary.json) in `DIR` (default: $TMPDIR); folders there older than 7 days are removed"},
			&ucli.BoolFlag{Name: "prune", Usage: "when no input failed, then remove the older generations the successors hold (as convkit prune)"},
			&ucli.StringSliceFlag{Name: "exclude", Usage: "skip the inputs whose path under the root, or a directory they are in, matches `GLOB` (repeatable): reported as skipped, reason excluded"},
		},
		Action: withArgs(0, 0, func(c *ucli.Context) error {
			jobs, err := jobsFlag(c, migrate.DefaultJobs())
			if err != nil {
				return err
			}
			comp := migrate.Compress(c.String("compress"))
			exclude := c.StringSlice("exclude")
			if err := migrate.CheckExclude(exclude); err != nil {
				return usagef(c, "%v", err)
			}
			// Refused before the store is opened (its lock taken).
			if err := migrate.CheckWriter(writerVersion); err != nil {
				return err
			}
			root, err := migrateRoot(c, e, migrate.Layout(c.String("layout")))
			if err != nil {
				return err
			}
			if root.Layout == migrate.LayoutDSH && comp != migrate.CompressKeep {
				return usagef(c, "--compress %s: a sessions root in the dsh layout (%s) holds one compression, and successors keep their source's", comp, root.Dir)
			}
			bar := e.newProgress("migrate", "logs", 0)
			opts := migrate.Options{Jobs: jobs, DryRun: c.Bool("dry-run"), Compress: comp, WriterVersion: writerVersion,
				ReportDir: c.String("report-dir"), Exclude: exclude,
				Progress: bar, ToolVersion: buildVersion(), Revision: buildRevision(), OnEvent: migrateRenderer(e)}
			defer softMemoryLimit(memoryBudget(migrate.Workers(jobs)))()
			s, r, err := e.openRoot(c, root)
			if err != nil {
				return err
			}
			var sum *migrate.Summary
			if s != nil {
				defer s.Close()
				if opts.Machine, err = e.loadMachineLenient(c, s.DataDir(), " in the index"); err != nil {
					return err
				}
				sum, err = migrate.Run(c.Context, s, opts)
			} else {
				sum, err = migrate.RunSessions(c.Context, r, opts)
			}
			bar.Finish()
			if err != nil {
				return err
			}
			if e.g.JSON {
				if err := writeJSONWith(e.stdout, `"message_type":"summary"`, sum); err != nil {
					return err
				}
			}
			if c.Bool("prune") {
				if sum.Totals.Failed > 0 {
					e.warnings([]string{fmt.Sprintf("--prune: nothing pruned: %d input(s) failed to migrate", sum.Totals.Failed)})
				} else if err := e.prune(c, s, r, "prune_summary"); err != nil {
					return err
				}
			}
			if sum.Totals.Failed > 0 {
				// stderr alone must say what failed, and where.
				var first *migrate.FailureItem
				for _, g := range sum.FailureGroups {
					for i := range g.Items {
						if it := &g.Items[i]; first == nil || it.InputPath < first.InputPath {
							first = it
						}
					}
				}
				if first != nil {
					return fmt.Errorf("%d input(s) failed to migrate; the first: \"%s\": %s; see %s", sum.Totals.Failed,
						first.InputPath, first.Message, sum.TextLogPath)
				}
				return fmt.Errorf("%d input(s) failed to migrate; see %s", sum.Totals.Failed, sum.TextLogPath)
			}
			return nil
		}),
	}
}

// migrateRoot is the sessions root migrate works on: --sessions-dir, else
// the data directory's store, else with --layout dsh the runtime's default
// root. An explicit --data-dir must name the store the root belongs to,
// since the lock taken is the store's.
func migrateRoot(c *ucli.Context, e *env, layout migrate.Layout) (migrate.Root, error) {
	dir := c.String("sessions-dir")
	if dir == "" {
		if layout != migrate.LayoutDSH {
			dataDir, err := e.g.dataDir()
			if err != nil {
				return migrate.Root{}, err
			}
			return migrate.Root{Dir: store.ConversationsDir(dataDir), Layout: migrate.LayoutConvkit, DataDir: dataDir}, nil
		}
		var err error
		if dir, err = dshSessionsDir(e.g.getenv); err != nil {
			return migrate.Root{}, usagef(c, "%v", err)
		}
	}
	root, err := migrate.FindRoot(dir, layout)
	if err != nil {
		return migrate.Root{}, withHint(err, "--sessions-dir names DATA/"+store.ConversationsDirName+" of the store at DATA, or a sessions root in the dsh layout (<root>/<project>/<session>/session[.vN].jsonl[.zstd]); --layout says which")
	}
	if strings.TrimSpace(e.g.DataDir) == "" {
		return root, nil
	}
	given, err := e.g.dataDir()
	if err != nil {
		return migrate.Root{}, err
	}
	if root.Layout == migrate.LayoutDSH {
		return migrate.Root{}, usagef(c, "--sessions-dir %s is a sessions root in the dsh layout, which belongs to no convkit store: leave out --data-dir %s", root.Dir, given)
	}
	if !sameDir(given, root.DataDir) {
		return migrate.Root{}, usagef(c, "--sessions-dir %s belongs to the store %s, not to --data-dir %s: a migration takes the lock of the store it changes; give one of them", root.Dir, root.DataDir, given)
	}
	return root, nil
}

// openRoot opens what migrate and prune work on: a sessions root in the dsh
// layout, or the store root belongs to, locked unless --dry-run.
func (e *env) openRoot(c *ucli.Context, root migrate.Root) (*store.Store, *dshroot.Root, error) {
	if root.Layout == migrate.LayoutDSH {
		r, err := dshroot.Open(root.Dir)
		return nil, r, err
	}
	mode := store.LockExclusive
	if c.Bool("dry-run") {
		mode = store.LockNone
	}
	s, err := e.openStore(c, root.DataDir, mode, store.CreateNever)
	return s, nil, err
}

// dshSessionsDir is $DSH_HOME/sessions, else ~/.dsh/sessions.
func dshSessionsDir(getenv func(string) string) (string, error) {
	if h := strings.TrimSpace(getenv("DSH_HOME")); h != "" {
		return filepath.Join(getenv("DSH_HOME"), "sessions"), nil
	}
	home := getenv("HOME")
	if strings.TrimSpace(home) == "" {
		return "", errors.New("--layout dsh without --sessions-dir: neither $DSH_HOME nor $HOME is set; name the root with --sessions-dir DIR")
	}
	return filepath.Join(home, ".dsh", "sessions"), nil
}

func sameDir(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}

// migrateRenderer prints migrate's events as lines, or steps as JSON Lines.
func migrateRenderer(e *env) func(migrate.Event) {
	if !e.g.JSON {
		lines := e.libraryLines(e.stdout, migrateQuiet())
		return func(ev migrate.Event) { fmt.Fprintln(lines, ev.Line()) }
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	return func(ev migrate.Event) {
		if ev.MessageType != "" {
			enc.Encode(ev)
		}
	}
}

// writerVersion is the format version the writer is taken to write (0: the
// real one), so tests show that a writer not at V4 refuses to migrate.
var writerVersion int

func SetWriterVersion(v int) { writerVersion = v }
