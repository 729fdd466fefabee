package cli

import (
	"fmt"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

func newRepairCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:  "repair",
		Usage: "bring a store a crash left to a consistent state, by appending only",
		Description: `Closes every compaction and turn a crash left open, as an interrupt closes
a turn: the compaction ends with an error, the output the log holds is
kept, every tool call without a result gets an interrupted error result,
the open step and the turn end (reason interrupted), and the conversation
log records the turn's end. It finishes interrupted deletions and removes
the temporary files of interrupted writes. Nothing recorded is rewritten:
logs only grow (a session log of an older format with a turn to close gets
its v4 successor first, beside the original). metadata.db rows of the
conversations it changed are updated when the index is usable. It takes
runtime.lock (stop the runtime first). Each change is printed as it is
made; --dry-run prints what would change and changes nothing. Output ends with
"Summary: turns-closed=N, deletions-finished=D, temps-removed=T, skipped=S";
exit 3 if anything was skipped.`,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "dry-run", Usage: "report what would change, change nothing"},
			configFlag(),
		},
		Action: withArgs(0, 0, func(c *ucli.Context) error {
			return runRepair(c, e, c.Bool("dry-run"))
		}),
	}
}

func runRepair(c *ucli.Context, e *env, dry bool) error {
	s, err := e.openStore(c, "", store.LockExclusive, store.CreateNever)
	if err != nil {
		return err
	}
	defer s.Close()
	opts := store.RepairOptions{DryRun: dry}
	if !e.g.JSON {
		// Under --quiet a repair's changes are its summary's counts; a dry
		// run's lines are its result.
		var keep func(string) bool
		if !dry {
			keep = func(string) bool { return false }
		}
		lines := e.libraryLines(e.stdout, keep)
		opts.OnEvent = func(ch store.RepairChange) { fmt.Fprintln(lines, repairLine(ch, dry)) }
	}
	res, err := s.Repair(c.Context, opts)
	if err != nil {
		return err
	}
	if !dry {
		if err := e.updateRepaired(c, s, res); err != nil {
			return err
		}
	}
	if err := e.result(e.stdout, versionHead, res, func() {
		for _, sk := range res.Skipped {
			fmt.Fprintf(e.stdout, "SKIPPED %s: %s\n", text(sk.Path), text(sk.Reason))
		}
		if dry {
			fmt.Fprintln(e.stdout, "Dry run: nothing was changed.")
		}
		fmt.Fprintf(e.stdout, "Summary: turns-closed=%d, deletions-finished=%d, temps-removed=%d, skipped=%d\n",
			res.TurnsClosed, res.DeletionsFinished, res.TempsRemoved, len(res.Skipped))
	}); err != nil {
		return err
	}
	if len(res.Skipped) > 0 {
		return partialf("repair skipped %d item(s), each reported with its reason; the first: %s", len(res.Skipped),
			res.Skipped[0].Path+": "+res.Skipped[0].Reason)
	}
	return nil
}

// updateRepaired updates the rows of the conversations repair changed.
func (e *env) updateRepaired(c *ucli.Context, s *store.Store, res *store.RepairResult) error {
	var ids []string
	seen := map[string]bool{}
	for _, ch := range res.Changes {
		if ch.ID != "" && !seen[ch.ID] {
			seen[ch.ID] = true
			ids = append(ids, ch.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	db, err := index.Open(s.IndexPath())
	if err != nil {
		return nil // no usable index: reindex builds one from the logs
	}
	defer db.Close()
	m, err := e.loadMachineLenient(c, s.DataDir(), " for metadata.db")
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := reindex.Update(c.Context, db, s, id, reindex.UpdateOptions{Machine: m}); err != nil {
			return err
		}
	}
	return nil
}

// repairLine is one change as repair prints it (docs/CLI.md).
func repairLine(ch store.RepairChange, dry bool) string {
	verb := func(done, would string) string {
		if dry {
			return would
		}
		return done
	}
	switch ch.Kind {
	case store.ItemTurnClosed:
		t := ch.Turn
		what := fmt.Sprintf("turn %d", t.Turn)
		if t.Turn == 0 {
			what = "compaction " + quoted(t.Compaction)
		}
		return fmt.Sprintf("%s %s session %s %s: %s", verb("CLOSED", "WOULD CLOSE"), quoted(ch.ID), quoted(t.Session), what,
			text(verb("appended ", "would append ")+t.Describe()))
	case store.ItemDeletionFinished:
		return verb("DELETED ", "WOULD DELETE ") + text(ch.Path) + ": " + verb("finished", "would finish") + " an interrupted deletion"
	case store.ItemEmptyRemoved:
		return verb("DELETED ", "WOULD DELETE ") + text(ch.Path) + ": the empty directory an interrupted deletion left"
	case store.ItemTempRemoved:
		return verb("REMOVED ", "WOULD REMOVE ") + text(ch.Path) + ": left by an interrupted write"
	}
	return string(ch.Kind) + " " + text(ch.Path)
}
