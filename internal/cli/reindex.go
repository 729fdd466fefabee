package cli

import (
	"fmt"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

func newReindexCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:  "reindex",
		Usage: "rebuild metadata.db from the logs",
		Description: `Replays every conversation's logs into a new database beside metadata.db and
swaps it in atomically: a crash leaves the old index in place. It takes
runtime.lock (stop the runtime first). Each conversation it has to skip is
reported with the reason; interrupted deletions (a tombstone whose
directory remained) are finished. Output ends with
"Summary: indexed=N, skipped=S, deletions-finished=D"; exit 3 if anything
was skipped.

--check compares the logs with the index and writes nothing; it takes no
lock and runs beside the runtime. Every missing, stale and extra row is
listed; exit 1 on any drift.`,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "check", Usage: "compare logs and index without writing"},
			&ucli.StringFlag{Name: "jobs", Usage: "read at most `N` conversations at once (default: CPUs, at most 16)"},
			&ucli.BoolFlag{Name: "no-search", Usage: "leave message text out of the index (smaller, faster; search finds nothing)"},
		},
		Action: func(c *ucli.Context) error {
			if err := checkArgs(c, 0, 0); err != nil {
				return err
			}
			jobs := 0
			if c.IsSet("jobs") {
				n, err := parseJobs(c.String("jobs"))
				if err != nil {
					return usagef(c, "%v", err)
				}
				jobs = n
			}
			if c.Bool("check") {
				return runReindexCheck(c, e, jobs)
			}
			return runReindex(c, e, jobs)
		},
	}
}

func runReindex(c *ucli.Context, e *env, jobs int) error {
	s, err := e.openStore(c.Context, "reindex", store.LockExclusive)
	if err != nil {
		return err
	}
	defer s.Close()
	bar := e.newProgress("reindex", "conversations", 0)
	opts := reindex.Options{Jobs: jobs, Progress: bar, NoText: c.Bool("no-search")}
	if !e.g.JSON {
		lines := e.libraryLines(e.stdout, problemLine)
		opts.OnEvent = func(ev reindex.Event) { fmt.Fprintln(lines, reindexLine(ev)) }
	}
	res, err := reindex.Run(c.Context, s, opts)
	bar.Finish()
	if err != nil {
		return err
	}
	if e.g.JSON {
		if err := writeJSON(e.stdout, res); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(e.stdout, "Summary: indexed=%d, skipped=%d, deletions-finished=%d\n",
			res.Indexed, len(res.Skipped), len(res.DeletionsFinished))
	}
	if len(res.Skipped) > 0 {
		// The error names the first item (path and reason, which carries the
		// position): stderr alone must say what went wrong where.
		return partialf("reindex skipped %d item(s), each reported with its reason; the first: %s", len(res.Skipped), skipText(res.Skipped))
	}
	return nil
}

// skipText is the first skipped item, "PATH: REASON" (the path once).
func skipText(s []reindex.Skip) string {
	return withPath(s[0].Path, s[0].Reason)
}

func runReindexCheck(c *ucli.Context, e *env, jobs int) error {
	s, err := e.openStore(c.Context, "reindex --check", store.LockNone)
	if err != nil {
		return err
	}
	bar := e.newProgress("reindex --check", "conversations", 0)
	res, err := reindex.Check(c.Context, s, reindex.Options{Jobs: jobs, Progress: bar})
	bar.Finish()
	if err != nil {
		return err
	}
	if e.g.JSON {
		if err := writeJSON(e.stdout, res); err != nil {
			return err
		}
	} else {
		if res.IndexProblem != "" {
			fmt.Fprintf(e.stdout, "INDEX %s\n", text(res.IndexProblem))
		}
		for _, d := range res.Differences {
			fmt.Fprintf(e.stdout, "%s %s: %s\n", upper(d.Kind), quoted(d.ID), text(d.Detail))
		}
		for _, s := range res.Skipped {
			fmt.Fprintf(e.stdout, "SKIPPED %s\n", text(withPath(s.Path, s.Reason)))
		}
		fmt.Fprintf(e.stdout, "Check: conversations=%d, differences=%d, skipped=%d\n",
			res.Conversations, len(res.Differences), len(res.Skipped))
	}
	if res.Drift() {
		// Name the first finding, as the stdout line spells it: an unusable
		// index otherwise showed on stderr as a count of MISSING rows only.
		var first string
		if res.IndexProblem != "" {
			first = "INDEX " + res.IndexProblem
		} else {
			d := res.Differences[0]
			first = fmt.Sprintf("%s %q: %s", upper(d.Kind), d.ID, d.Detail)
		}
		return fmt.Errorf("the index disagrees with the logs (%d difference(s)); the first: %s; run convkit reindex", len(res.Differences), first)
	}
	if len(res.Skipped) > 0 {
		return partialf("the index agrees with the logs, but %d item(s) could not be read; the first: %s", len(res.Skipped), skipText(res.Skipped))
	}
	return nil
}

func upper(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 32
		}
	}
	return string(b)
}

// reindexLine is a reindex event as reindex prints it (docs/CLI.md).
func reindexLine(ev reindex.Event) string {
	switch ev.Kind {
	case reindex.EventIgnored:
		return "IGNORED " + ev.Path + ": " + ev.Reason
	case reindex.EventSkipped:
		return "SKIPPED " + ev.Path + ": " + ev.Reason
	case reindex.EventRemovedTemp:
		return "REMOVED " + ev.Path + ": left by an interrupted write"
	case reindex.EventRemovedIndex:
		return "REMOVED " + ev.Path + ": left by an interrupted reindex"
	case reindex.EventDeletionFinished:
		return "DELETED " + ev.Path + ": finished an interrupted deletion"
	case reindex.EventEmptyRemoved:
		return "DELETED " + ev.Path + ": removed the empty directory an interrupted deletion left"
	}
	return strings.ToUpper(string(ev.Kind)) + " " + ev.Path + ": " + ev.Reason
}
