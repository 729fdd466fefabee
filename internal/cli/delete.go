package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// deletePlan is the --json output of delete --dry-run (docs/JSON.md).
type deletePlan struct {
	SchemaVersion int                    `json:"schemaVersion"`
	DryRun        bool                   `json:"dryRun"`
	Conversations []store.DeletePlanItem `json:"conversations"`
	Files         int                    `json:"files"`
	Bytes         int64                  `json:"bytes"`
}

// planDelete checks the command's ids as delete would, taking no lock.
func planDelete(c *ucli.Context, e *env) (*deletePlan, error) {
	s, err := e.openStore(c.Context, "delete", store.LockNone)
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
func planLine(it store.DeletePlanItem, verb string) string {
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
