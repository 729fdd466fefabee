package cli

import (
	"fmt"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/internal/termtext"
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
directory remained) are finished. Every conversation that will not open on
this machine (its working directory missing, an agent or model not in the
runtime configuration, a fork source missing) is indexed and reported as
"WILL NOT OPEN ID: reason; reason". Output ends with
"Summary: indexed=N, skipped=S, deletions-finished=D, will-not-open=W";
exit 3 if anything was skipped (or, with --strict, will not open).

--incremental updates metadata.db in place: the rows of conversations whose
logs have not changed since they were indexed (their fingerprint: each
log's name, size, modification and change times, device and inode) are
kept, the others replayed, those of conversations gone removed, in one
transaction; the index is then what a rebuild writes. Without a usable
index it rebuilds it in full, and says why. The summary adds
"kept=K, replayed=R, removed=X".

--check compares the logs with the index and writes nothing; it takes no
lock and runs beside the runtime. Every missing, stale and extra row is
listed; exit 1 on any drift.`,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "check", Usage: "compare logs and index without writing"},
			&ucli.BoolFlag{Name: "incremental", Usage: "update metadata.db in place: replay only the conversations changed since they were indexed"},
			&ucli.StringFlag{Name: "jobs", Usage: "read at most `N` conversations at once (default: CPUs, at most 16)"},
			&ucli.BoolFlag{Name: "no-search", Usage: "leave message text out of the index (smaller, faster; search finds nothing)"},
			&ucli.BoolFlag{Name: "strict", Usage: "exit 3 when a conversation will not open on this machine"},
			configFlag(),
		},
		Action: withArgs(0, 0, func(c *ucli.Context) error {
			jobs, err := jobsFlag(c, 0)
			if err != nil {
				return err
			}
			check := c.Bool("check")
			if check && c.Bool("incremental") {
				return usagef(c, "--check writes nothing: --incremental does not apply to it")
			}
			command, mode := "reindex", store.LockExclusive
			if check {
				command, mode = "reindex --check", store.LockNone
			}
			s, err := e.openStore(c, "", mode, store.CreateNever)
			if err != nil {
				return err
			}
			defer s.Close()
			m, _, err := store.LoadMachine(store.RuntimeConfigPath(c.String("config"), e.g.getenv, s.DataDir()))
			if err != nil {
				return err
			}
			bar := e.newProgress(command, "conversations", 0)
			opts := reindex.Options{Jobs: jobs, Progress: bar, NoText: c.Bool("no-search"), Machine: m, Incremental: c.Bool("incremental")}
			if check {
				return runReindexCheck(c, e, s, opts, bar)
			}
			return runReindex(c, e, s, opts, bar)
		}),
	}
}

func runReindex(c *ucli.Context, e *env, s *store.Store, opts reindex.Options, bar *barReporter) error {
	if !e.g.JSON {
		keep := problemLine
		if c.Bool("strict") {
			keep = func(l string) bool { return strings.HasPrefix(l, willNotOpenPrefix) || problemLine(l) }
		}
		lines := e.libraryLines(e.stdout, keep)
		opts.OnEvent = itemPrinter(lines, "")
	}
	res, err := reindex.Run(c.Context, s, opts)
	bar.Finish()
	if err != nil {
		return err
	}
	e.warnings(res.Warnings)
	if res.FullReason != "" && !e.g.Quiet {
		fmt.Fprintf(e.stderr, "%s: reindex --incremental: %s: rebuilding it in full\n", progName, text(res.FullReason))
	}
	if err := e.result(e.stdout, "", res, func() {
		fmt.Fprintf(e.stdout, "Summary: indexed=%d, skipped=%d, deletions-finished=%d, will-not-open=%d",
			res.Indexed, len(res.Skipped), len(res.DeletionsFinished), len(res.WillNotOpen))
		if res.Incremental && res.FullReason == "" {
			fmt.Fprintf(e.stdout, ", kept=%d, replayed=%d, removed=%d", res.Kept, res.Replayed, res.Removed)
		}
		fmt.Fprintln(e.stdout)
	}); err != nil {
		return err
	}
	if len(res.Skipped) > 0 {
		// stderr alone must say what went wrong where.
		return partialf("reindex skipped %d item(s), each reported with its reason; the first: %s", len(res.Skipped), skipText(res.Skipped))
	}
	return strictError(c, res.WillNotOpen)
}

func (e *env) warnings(ws []string) {
	for _, w := range ws {
		fmt.Fprintf(e.stderr, "%s: warning: %s\n", progName, text(w))
	}
}

// strictError is exit 3 under --strict when conversations will not open.
func strictError(c *ucli.Context, w []reindex.WillNotOpen) error {
	if !c.Bool("strict") || len(w) == 0 {
		return nil
	}
	return partialf("%d conversation(s) will not open on this machine (--strict); the first: %s", len(w), willNotOpenText(w[0]))
}

// willNotOpenText is "ID: reason; reason", as a WILL NOT OPEN line has it.
func willNotOpenText(w reindex.WillNotOpen) string {
	return w.ID + ": " + strings.Join(w.Reasons, "; ")
}

// printFindings prints the items a rebuild or a check skipped and, with
// wno, the conversations that will not open here.
func (e *env) printFindings(skipped []store.Item, willNotOpen []reindex.WillNotOpen, wno bool) {
	for _, s := range skipped {
		fmt.Fprintln(e.stdout, text(itemLine(s, "")))
	}
	for _, w := range willNotOpen {
		if wno {
			fmt.Fprintln(e.stdout, text(willNotOpenPrefix+willNotOpenText(w)))
		}
	}
}

// skipText is the first skipped item, "PATH: REASON".
func skipText(s []store.Item) string {
	return s[0].Path + ": " + s[0].Reason
}

func runReindexCheck(c *ucli.Context, e *env, s *store.Store, opts reindex.Options, bar *barReporter) error {
	res, err := reindex.Check(c.Context, s, opts)
	bar.Finish()
	if err != nil {
		return err
	}
	e.warnings(res.Warnings)
	if err := e.result(e.stdout, "", res, func() {
		if res.IndexProblem != "" {
			fmt.Fprintf(e.stdout, "INDEX %s\n", text(res.IndexProblem))
		}
		for _, d := range res.Differences {
			fmt.Fprintf(e.stdout, "%s %s: %s\n", strings.ToUpper(d.Kind), quoted(d.ID), text(d.Detail))
		}
		e.printFindings(res.Skipped, res.WillNotOpen, !e.g.Quiet || c.Bool("strict"))
		for _, f := range res.InFlight {
			fmt.Fprintf(e.stdout, "IN FLIGHT %s: %s\n", quoted(f.ID), text(f.Detail))
		}
		fmt.Fprintf(e.stdout, "Check: conversations=%d, differences=%d, skipped=%d, will-not-open=%d\n",
			res.Conversations, len(res.Differences), len(res.Skipped), len(res.WillNotOpen))
	}); err != nil {
		return err
	}
	if res.Drift() {
		// Name the first finding, as the stdout line spells it.
		var first string
		if res.IndexProblem != "" {
			first = "INDEX " + res.IndexProblem
		} else {
			d := res.Differences[0]
			first = fmt.Sprintf("%s %s: %s", strings.ToUpper(d.Kind), termtext.Quote(d.ID), d.Detail)
		}
		return fmt.Errorf("the index disagrees with the logs (%d difference(s)); the first: %s; %s", len(res.Differences), first, reindex.ReindexHint(s))
	}
	if len(res.Skipped) > 0 {
		return partialf("the index agrees with the logs, but %d item(s) could not be read; the first: %s", len(res.Skipped), skipText(res.Skipped))
	}
	return strictError(c, res.WillNotOpen)
}
