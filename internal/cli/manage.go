package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/internal/manage"
	"github.com/convkit/convkit/internal/termtext"
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
			return e.runManage(c, c.Args().Slice()[:1], func(s *store.Store, ids []string, opts manage.Options) (*manage.Result, error) {
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
			return e.runManage(c, c.Args().Slice(), func(s *store.Store, ids []string, opts manage.Options) (*manage.Result, error) {
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
			if c.Bool("dry-run") {
				err = runDeletePlan(c, e)
			} else if !c.Bool("yes") && e.terminal(e.stdin) {
				ids, err = confirmDelete(c, e)
			}
			if err == nil && !c.Bool("dry-run") {
				err = e.runManage(c, ids, func(s *store.Store, ids []string, opts manage.Options) (*manage.Result, error) {
					return manage.Delete(c.Context, s, ids, c.Bool("force"), opts)
				})
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

// runManage runs an edit of the conversations refs name in the locked store,
// printing each conversation's line as it is done (--json: the result).
func (e *env) runManage(c *ucli.Context, refs []string, do func(*store.Store, []string, manage.Options) (*manage.Result, error)) error {
	s, err := e.openStore(c, "", store.LockExclusive, store.CreateNever)
	if err != nil {
		return err
	}
	defer s.Close()
	m, err := e.loadMachineLenient(c, s.DataDir(), " for metadata.db")
	if err != nil {
		return err
	}
	ids, err := resolveIDs(c, s, refs)
	if err != nil {
		return err
	}
	opts := manage.Options{Machine: m}
	if !e.g.JSON && !e.g.Quiet {
		opts.OnEvent = func(o store.Outcome) {
			id := text(o.ID)
			switch o.Action {
			case manage.ActionRenamed:
				fmt.Fprintf(e.stdout, "renamed %s: %s\n", id, quoted(o.Title))
			case manage.ActionUnchanged:
				fmt.Fprintf(e.stdout, "unchanged %s: already titled %s\n", id, quoted(o.Title))
			default:
				fmt.Fprintln(e.stdout, strings.ReplaceAll(o.Action, "-", " ")+" "+id)
			}
		}
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

// deletePlan is the --json output of delete --dry-run (docs/JSON.md).
type deletePlan struct {
	SchemaVersion int             `json:"schemaVersion"`
	DryRun        bool            `json:"dryRun"`
	Conversations []store.Outcome `json:"conversations"`
	Files         int             `json:"files"`
	Bytes         int64           `json:"bytes"`
}

// planDelete checks the command's ids as delete would, taking no lock.
func planDelete(c *ucli.Context, e *env) (*deletePlan, error) {
	s, err := e.openStore(c, "", store.LockNone, store.CreateNever)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ids, err := resolveIDs(c, s, c.Args().Slice())
	if err != nil {
		return nil, err
	}
	items, err := s.PlanDelete(ids, c.Bool("force"))
	if err != nil {
		return nil, err
	}
	p := &deletePlan{SchemaVersion: schemaVersion, DryRun: true, Conversations: items}
	for _, it := range items {
		p.Files += it.Files
		p.Bytes += it.Bytes
	}
	return p, nil
}

// planLine is one conversation of a plan; verb is "would delete" or "delete".
func planLine(it store.Outcome, verb string) string {
	id := text(it.ID)
	switch it.Action {
	case store.DeleteActionDelete:
		return fmt.Sprintf("%s %s %s: %s", verb, id, titleOf(it.Title), filesAndSize(it.Files, it.Bytes))
	case store.DeleteActionFinish:
		return fmt.Sprintf("%s %s: %s (its deletion was recorded; finishing it)", verb, id, filesAndSize(it.Files, it.Bytes))
	case store.DeleteActionRemoveEmpty:
		return fmt.Sprintf("%s %s: its empty directory (an interrupted delete left it)", verb, id)
	}
	return "already deleted " + id
}

func filesAndSize(files int, bytes int64) string {
	noun := "files"
	if files == 1 {
		noun = "file"
	}
	return fmt.Sprintf("%d %s, %s", files, noun, termtext.Size(bytes))
}

func runDeletePlan(c *ucli.Context, e *env) error {
	p, err := planDelete(c, e)
	if err != nil {
		return err
	}
	return e.result(e.stdout, "", p, func() {
		if !e.g.Quiet {
			for _, it := range p.Conversations {
				fmt.Fprintln(e.stdout, planLine(it, "would delete"))
			}
		}
		fmt.Fprintf(e.stdout, "Dry run: %d conversation(s), %s would be deleted; nothing was changed\n",
			len(p.Conversations), filesAndSize(p.Files, p.Bytes))
	})
}

// errNotConfirmed is a delete the user did not confirm: exit 1.
var errNotConfirmed = errors.New("nothing was deleted: the answer was not yes")

// confirmDelete shows what delete is about to delete and asks on stdin, no
// lock held while it waits; it returns the ids to delete.
func confirmDelete(c *ucli.Context, e *env) ([]string, error) {
	p, err := planDelete(c, e)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(p.Conversations))
	live := 0
	for i, it := range p.Conversations {
		ids[i] = it.ID
		if it.Action == store.DeleteActionDelete {
			live++
		}
	}
	if live == 0 {
		// Only what an earlier, confirmed delete left to finish.
		return ids, nil
	}
	for _, it := range p.Conversations {
		fmt.Fprintln(e.stderr, planLine(it, "delete"))
	}
	fmt.Fprintf(e.stderr, "%s: delete %d conversation(s), %s? [y/N] ", progName, len(p.Conversations), filesAndSize(p.Files, p.Bytes))
	answer, err := readAnswer(c.Context, e.stdin)
	if err != nil {
		fmt.Fprintln(e.stderr)
		return nil, err
	}
	switch strings.ToLower(strings.TrimSpace(answer)) {
	case "y", "yes":
		return ids, nil
	}
	return nil, errNotConfirmed
}

func readAnswer(ctx context.Context, r io.Reader) (string, error) {
	type line struct {
		s   string
		err error
	}
	ch := make(chan line, 1)
	go func() {
		s, err := bufio.NewReader(r).ReadString('\n')
		if errors.Is(err, io.EOF) {
			err = nil
		}
		ch <- line{s, err}
	}()
	select {
	case l := <-ch:
		return l.s, l.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
