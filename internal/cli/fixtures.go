package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/backup"
	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
)

func newFixturesCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:  "fixtures",
		Usage: "write a generated store for trying commands, benchmarks and tests",
		Description: `Writes a deterministic store into --to DIR (a new or empty directory) and
runs nothing else: the same --seed gives the same store. It holds logs of
every format version, plain and compressed, subagents, forks (one after a
compaction), a torn tail, a corrupt log and an interrupted deletion; --large
adds multi-megabyte logs. Point any command at it with --data-dir DIR.

--layout dsh writes a sessions root in the runtime's own layout instead
(<root>/<project-dir>/<session-dir>/session[.vN].jsonl[.zstd]): sessions of
every version, one compression (--compress), subagents in session
directories of their own, a seeded fork, torn tails, a flat file and a
symbolically linked project; --conversations N is then the number of
top-level sessions. Point migrate at it with --sessions-dir DIR.`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "to", Usage: "write the store into `DIR`"},
			&ucli.Int64Flag{Name: "seed", Value: 1, Usage: "the generator's `SEED`"},
			&ucli.IntFlag{Name: "conversations", Value: 20, Usage: "write `N` conversations in all (the special cases included)"},
			&ucli.BoolFlag{Name: "large", Usage: "add conversations with multi-megabyte logs"},
			newChoiceFlag("compress", "compression of ordinary logs (with --layout dsh, of every log): `MODE`, zstd or none", "zstd", "none"),
			newChoiceFlag("layout", "write a convkit store (convkit) or a sessions root in the runtime's layout (dsh): `LAYOUT`", "convkit", "dsh"),
			&ucli.StringFlag{Name: "work-root", Usage: "make the conversations' working directories in `DIR` (new or empty), so that they open on this machine (default: under /home/dev/src, not made)"},
		},
		Action: withArgs(0, 0, func(c *ucli.Context) error {
			to := c.String("to")
			if to == "" {
				return usagef(c, "--to DIR is required")
			}
			if c.Int("conversations") < 0 {
				return usagef(c, "--conversations must not be negative")
			}
			comp := convlog.Zstd
			if c.String("compress") == "none" {
				comp = convlog.Plain
			}
			dsh := c.String("layout") == "dsh"
			if err := requireEmpty(to); err != nil {
				return err
			}
			work := c.String("work-root")
			if work != "" {
				if dsh {
					return usagef(c, "--work-root applies to --layout convkit only")
				}
				var err error
				if work, err = filepath.Abs(work); err != nil {
					return err
				}
				if err := requireEmpty(work); err != nil {
					return err
				}
			}
			seed, n, large := c.Int64("seed"), c.Int("conversations"), c.Bool("large")
			if dsh {
				rep, err := fixtures.GenerateSessions(c.Context, to, fixtures.SessionsOptions{Seed: seed, Sessions: n, Large: large, Compression: comp})
				if err != nil {
					return err
				}
				return e.result(e.stdout, versionHead+`,"layout":"dsh"`, rep, func() {
					fmt.Fprintf(e.stdout, "wrote %d session directories and %d invalid layout entries into %s (layout dsh, %s, seed %d)\n",
						len(rep.Sessions), len(rep.Invalid), rep.Root, comp, rep.Seed)
				})
			}
			rep, err := fixtures.GenerateContext(c.Context, to, fixtures.Options{Seed: seed, Conversations: n, Large: large, Compression: comp, WorkRoot: work})
			if err != nil {
				return err
			}
			return e.result(e.stdout, versionHead, rep, func() {
				logs := 0
				for _, cv := range rep.Conversations {
					logs += len(cv.Logs)
				}
				fmt.Fprintf(e.stdout, "wrote %d conversations (%d logs) into %s (seed %d)\n", len(rep.Conversations), logs, rep.DataDir, rep.Seed)
			})
		}),
	}
}

// requireEmpty refuses a directory that is not new or empty, as restore
// refuses its target (a symbolic link is never followed).
func requireEmpty(dir string) error {
	free, err := backup.CheckTarget(dir)
	var nd *backup.NotDirError
	switch {
	case errors.As(err, &nd):
		return fmt.Errorf("%s exists and is not a directory: choose a new or empty directory", dir)
	case err == nil && !free:
		return fmt.Errorf("%s is not empty: choose a new or empty directory", dir)
	}
	return err
}

func newDemoCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:  "demo",
		Usage: "build the sample store and run the main jobs on it",
		Description: `The quickstart. Builds the sample store (generated deterministically by the
binary: every format version, plain and compressed, a fork after a
compaction, subagents, a torn tail, an interrupted delete and a corrupt
log) in a fresh temporary directory, or in --to DIR, then runs the main
jobs on it, showing each command and what it printed. The conversations'
working directories are made in DIR-work and its backups go to
DIR-backups, beside the store; all three must be new or empty, and the
demo touches nothing it did not create. The store is left for you to
explore.
Exit 0 when every job behaved as the sample expects.`,
		Flags: []ucli.Flag{
			&ucli.StringFlag{Name: "to", Usage: "build the sample store in `DIR` (new or empty)"},
		},
		Action: withArgs(0, 0, func(c *ucli.Context) error {
			dir := c.String("to")
			if dir == "" {
				d, err := os.MkdirTemp("", "convkit-demo-")
				if err != nil {
					return err
				}
				dir = filepath.Join(d, "data")
			} else if err := requireEmpty(dir); err != nil {
				return err
			}
			dir, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			// Checked before anything is written: the demo changes no file
			// it did not make.
			for _, d := range [][2]string{{"-backups", "writes its backups into DIR-backups"}, {"-work", "makes the conversations' working directories in DIR-work"}} {
				if err := requireEmpty(dir + d[0]); err != nil {
					return fmt.Errorf("%w (the demo %s beside the store in DIR)", err, d[1])
				}
			}
			opts := fixtures.SampleOptions()
			opts.WorkRoot = dir + "-work" // so the conversations meant to open here do
			rep, err := fixtures.GenerateContext(c.Context, dir, opts)
			if err != nil {
				return err
			}
			return runDemo(c, e, dir, rep)
		}),
	}
}

// runMain is Main, reached through a variable: Main's command table holds
// demo, so naming Main here directly would be an initialization cycle.
var runMain func(context.Context, []string, io.Reader, io.Writer, io.Writer, func(string) string) int

func init() { runMain = Main }

type demoStep struct {
	note string
	args []string
	want int
}

func runDemo(c *ucli.Context, e *env, dir string, rep *fixtures.Report) error {
	fmt.Fprintf(e.stdout, "Sample store: %s (%d conversations)\n", dir, len(rep.Conversations))
	var steps []demoStep
	steps = append(steps, demoStep{"the conversations, read from their logs (no index yet)", []string{"list", "--all"}, 0})
	// Each case's step inspects its first session log (named by its ids
	// for a transcript), or its first log of the expectation given.
	for _, d := range []struct {
		c      fixtures.Case
		expect fixtures.Expect // "": a session log
		mode   string
		step   demoStep
	}{
		{fixtures.CaseBasic, "", "--stats", demoStep{"one session log: sizes by event type", nil, 0}},
		{fixtures.CaseTornZstd, fixtures.ExpectTorn, "--validate", demoStep{"a log whose last frame was torn by a crash: read, reported, left as it is", nil, 0}},
		{fixtures.CaseForkAfterCompaction, "", "--transcript", demoStep{"what clients show of a fork made after a compaction: its source's older part joined (a cut-off answer, a failed and an interrupted turn, the summary), then its own", nil, 0}},
		{fixtures.CaseCorrupt, fixtures.ExpectCorrupt, "--validate", demoStep{"a corrupt log: every problem with its line and byte offset (exit 1)", nil, 1}},
	} {
		cv := rep.Find(d.c)
		if cv == nil {
			continue
		}
		for _, l := range cv.Logs {
			if (d.expect == "" && l.SessionID != "") || (d.expect != "" && l.Expect == d.expect) {
				d.step.args = []string{"inspect", d.mode, l.Path}
				if d.mode == "--transcript" {
					d.step.args = []string{"inspect", d.mode, cv.ID, l.SessionID}
				}
				steps = append(steps, d.step)
				break
			}
		}
	}
	steps = append(steps,
		demoStep{"bring every older log forward to v4 beside its original; the corrupt log fails without stopping the rest (exit 1)", []string{"migrate"}, 1},
		demoStep{"rebuild metadata.db: the corrupt conversation is skipped, the interrupted delete finished (exit 3)", []string{"reindex"}, 3},
		demoStep{"the index now agrees with the logs; the corrupt conversation is still unreadable (exit 3)", []string{"reindex", "--check"}, 3},
		demoStep{"what repair would change: the turns the crashes left running are closed as interrupted, by appending", []string{"repair", "--dry-run"}, 0},
		demoStep{"repair: the turns closed by appending (a torn tail cut first where it appends), the index rows updated", []string{"repair"}, 0},
		demoStep{"the conversations, now from the index: none is running", []string{"list", "--all"}, 0},
		demoStep{"nobody holds runtime.lock", []string{"lock", "status"}, 0},
		// DIR-backups was checked new or empty before the store was made.
		demoStep{"back up the store into one archive, in a directory of the demo's own: every log, a metadata.db snapshot, a manifest with checksums",
			[]string{"backup", "--to", dir + "-backups"}, exitOK},
	)
	failed := 0
	for _, s := range steps {
		if !runDemoStep(c, e, dir, s) {
			failed++
		}
	}
	if list, err := backup.ListArchives(dir + "-backups"); err != nil || len(list) == 0 {
		fmt.Fprintf(e.stdout, "(no archive in %s)\n", text(dir+"-backups"))
		failed++
	} else if !runDemoStep(c, e, dir, demoStep{"the restore drill: checksums, a strict read of every log (the corrupt one is listed), an index rebuilt and compared",
		[]string{"backup", "verify", list[len(list)-1].Path}, exitPartial}) {
		failed++
	}
	fmt.Fprintf(e.stdout, "\nThe sample store is in %s. Try next:\n  convkit --data-dir %s inspect --history %s\n",
		dir, shellQuote(dir), demoHistoryArgs(rep))
	if failed > 0 {
		return fmt.Errorf("%d demo step(s) did not behave as the sample store expects", failed)
	}
	return nil
}

// runDemoStep runs and shows one step; false if it did not exit as expected.
func runDemoStep(c *ucli.Context, e *env, dir string, s demoStep) bool {
	args := append([]string{progName, "--data-dir", dir}, s.args...)
	var quoted []string
	for _, a := range args[1:] {
		quoted = append(quoted, shellQuote(a))
	}
	fmt.Fprintf(e.stdout, "\n# %s\n$ convkit %s\n", s.note, strings.Join(quoted, " "))
	code := runMain(c.Context, args, e.stdin, e.stdout, e.stdout, e.g.getenv)
	if code != s.want {
		fmt.Fprintf(e.stdout, "(exit %d, expected %d)\n", code, s.want)
		return false
	}
	if code != 0 {
		fmt.Fprintf(e.stdout, "(exit %d, as expected)\n", code)
	}
	return true
}

func demoHistoryArgs(rep *fixtures.Report) string {
	if cv := rep.Find(fixtures.CaseBasic); cv != nil {
		for _, l := range cv.Logs {
			if l.SessionID != "" {
				return shellQuote(cv.ID) + " " + shellQuote(l.SessionID)
			}
		}
	}
	return "CONVERSATION SESSION"
}

// shellQuote quotes a word for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:") == "" {
		return s
	}
	return shQuote(s)
}
