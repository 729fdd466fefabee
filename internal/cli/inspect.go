package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/chatread"
	"github.com/convkit/convkit/convlog/upgrade"
	"github.com/convkit/convkit/inspect"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

func newInspectCommand(e *env) *ucli.Command {
	var types ucli.StringSlice
	return &ucli.Command{
		Name:      "inspect",
		Usage:     "read one log of any version, plain or compressed",
		ArgsUsage: "PATH | DIR | - | CONVERSATION [SESSION]",
		Description: `Reads one log and describes it; it never changes a file and never
takes runtime.lock, so it runs beside the runtime.

The log is a file PATH of either layout; a directory DIR: a session
directory of the runtime's sessions root (its highest generation) or a
convkit conversation directory (its conversation log); - for stdin (plain
or zstd, told apart by its first bytes; copied to a private temporary file
under $TMPDIR, whose name is removed as soon as it is made, at most the
free space there less 64 MiB); or found in the data directory: CONVERSATION alone is that
conversation's own log, CONVERSATION SESSION one of its session logs (the
highest generation).

Without a mode flag it renders the header and one line per event.
--json prints each event as stored, one JSON object per line.
--validate lists every problem with its line and byte offset (at most
--max-problems, default 100; the rest are counted); exit 1 if any.
--stats counts events and bytes by type, frames, compression ratio, torn tail.
--history prints the derived history a model reads (an older log is
upgraded in memory first; nothing is written).
--upgrade shows an older log's events as its version 4 successor would
hold them (upgraded in memory, its subagent catalog completed from the
children found beside it, or anywhere under a sessions root in the
runtime's layout); with --json, one JSON object per event.
--transcript prints what clients show: every message in order, those a
compaction summarised included; a fork made after a compaction gets its
older part from the conversation it was forked from (read-only).`,
		Flags: []ucli.Flag{
			&ucli.BoolFlag{Name: "validate", Usage: "list every format problem with its position"},
			&ucli.IntFlag{Name: "max-problems", Value: inspect.DefaultMaxProblems, Usage: "with --validate, list at most `N` problems (the rest are counted)"},
			&ucli.BoolFlag{Name: "stats", Usage: "sizes by event type, frames, compression, torn tail"},
			&ucli.BoolFlag{Name: "history", Usage: "the derived history (the messages a model reads)"},
			&ucli.BoolFlag{Name: "upgrade", Usage: "show the events as the log's version 4 successor would hold them"},
			&ucli.BoolFlag{Name: "transcript", Usage: "what clients show: every message in order, a fork's inherited part joined"},
			&ucli.StringSliceFlag{Name: "type", Usage: "only events whose type matches `PATTERN` (shell pattern, repeatable)", Destination: &types},
		},
		Action: withArgs(1, 2, func(c *ucli.Context) error {
			modes, whole := 0, "" // whole: a mode that reads the whole log
			for _, m := range []string{"validate", "stats", "history", "transcript"} {
				if c.Bool(m) {
					modes++
					if m != "stats" {
						whole = m
					}
				}
			}
			upgrade := c.Bool("upgrade")
			for _, r := range []struct {
				bad bool
				msg string
			}{
				{modes > 1, "--validate, --stats, --history and --transcript exclude each other"},
				{c.Int("max-problems") < 1, "--max-problems must be a positive whole number"},
				{c.IsSet("max-problems") && !c.Bool("validate"), "--max-problems applies to --validate only"},
				{upgrade && c.Bool("transcript"), "--upgrade and --transcript exclude each other (a transcript reads an older log upgraded already)"},
				{upgrade && (c.Bool("validate") || c.Bool("stats")), "--upgrade shows the upgraded events; --validate and --stats read the log as stored (migrate --dry-run checks an upgrade)"},
				// A filter would silently not apply.
				{c.IsSet("type") && whole != "", "--type selects the events shown or measured; it does not apply to --" + whole},
			} {
				if r.bad {
					return usagef(c, "%s", r.msg)
				}
			}
			filter := inspect.Filter(types.Value())
			if err := filter.Validate(); err != nil {
				return usagef(c, "%v", err)
			}
			args := c.Args().Slice()
			if len(args) == 1 && args[0] == "-" { // stdin (a file named - is ./-)
				t, err := inspect.Stdin(c.Context, e.stdin, os.TempDir())
				var big *inspect.TooLargeError
				if errors.As(err, &big) {
					return withHint(err, "write it to a file and inspect the file, or point TMPDIR at a larger file system")
				}
				if err != nil {
					return err
				}
				defer t.Close()
				return runInspect(c, e, t, inspect.StdinName, "-", filter)
			}
			t, err := inspectTarget(c, e, args)
			if err != nil {
				return err
			}
			e.warnings(t.Warnings)
			if err := t.CheckPlace(); err != nil {
				fmt.Fprintf(e.stderr, "%s: warning: %s\n", progName, text(err.Error()))
			}
			return runInspect(c, e, t, t.Path, t.Path, filter)
		}),
	}
}

// runInspect inspects the log of t; shown is its name in text output,
// jsonPath its name in JSON output (they differ for a copy of stdin).
func runInspect(c *ucli.Context, e *env, t *inspect.Target, shown, jsonPath string, filter inspect.Filter) error {
	ctx := c.Context
	switch {
	case c.Bool("validate"):
		v, err := inspect.Validate(ctx, t, inspect.ValidateOptions{MaxProblems: c.Int("max-problems")})
		if err != nil {
			return err
		}
		v.Path = jsonPath
		if err := e.result(e.stdout, "", v, func() { printValidation(e, v, shown) }); err != nil {
			return err
		}
		switch {
		case v.StoppedAt != nil:
			return fmt.Errorf("%s: more than %d problems found; reading stopped at %s", shown, int64(len(v.Problems))+v.MoreProblems, stopPosition(*v.StoppedAt))
		case !v.Valid:
			return fmt.Errorf("%s: %d problem(s) found", shown, int64(len(v.Problems))+v.MoreProblems)
		}
		return nil
	case c.Bool("stats"):
		s, err := inspect.Measure(ctx, t, filter)
		if err != nil {
			return err
		}
		s.Path = jsonPath
		if e.g.JSON {
			return writeJSON(e.stdout, s)
		}
		return inspect.RenderStats(s, e.stdout)
	case c.Bool("transcript"):
		return runTranscript(c, e, t, jsonPath == "-")
	case c.Bool("history"):
		h, err := inspect.History(ctx, t)
		if err != nil {
			return err
		}
		for _, m := range h {
			var err error
			if e.g.JSON {
				err = writeJSON(e.stdout, m)
			} else {
				err = inspect.WriteMessage(e.stdout, m.Seq, m.Role, m.ID, "", m.Source, m.Message)
			}
			if err != nil {
				return err
			}
		}
		return nil
	default:
		return inspect.Show(ctx, t, e.stdout, inspect.ShowOptions{Filter: filter, JSON: e.g.JSON, Upgrade: c.Bool("upgrade"), Warn: e.warnings})
	}
}

// printValidation lists a validation's problems, shown the log's name.
func printValidation(e *env, v *inspect.Validation, shown string) {
	for _, w := range v.Warnings {
		fmt.Fprintf(e.stderr, "convkit: warning: %s: frame %d at file byte %d: %s\n", text(shown), w.Frame, w.Position().FrameOffset, text(w.Message))
	}
	for _, p := range v.Problems {
		rule := " (rule " + p.Rule + ")"
		switch p.Rule {
		case "", "header", "envelope", "framing", "file":
			rule = ""
		}
		fmt.Fprintf(e.stdout, "%s: %s\n", text(shown), text(fmt.Sprintf("%s: %s%s: %s", p.Position(), p.Kind, rule, p.Message)))
	}
	switch {
	case v.StoppedAt != nil:
		fmt.Fprintf(e.stdout, "%s: more than %d further problems not listed; reading stopped at %s (--max-problems N lists up to N)\n",
			text(shown), v.MoreProblems, stopPosition(*v.StoppedAt))
	case v.MoreProblems > 0:
		fmt.Fprintf(e.stdout, "%s: %d further problem(s) not listed (--max-problems N lists up to N)\n", text(shown), v.MoreProblems)
	}
	if v.Valid {
		torn := ""
		if v.TornTail {
			torn = " (torn tail left as it is)"
		}
		fmt.Fprintf(e.stdout, "%s: valid, format v%d, %d events%s\n", text(shown), v.Version, v.Events, torn)
	}
}

// inspectTarget resolves the arguments to a path, or to ids in the store.
func inspectTarget(c *ucli.Context, e *env, args []string) (*inspect.Target, error) {
	if len(args) == 1 {
		if _, err := os.Lstat(args[0]); err == nil {
			return inspect.Resolve(args[0])
		}
	}
	dir, err := e.g.dataDir()
	if err != nil {
		return nil, err
	}
	session := ""
	if len(args) == 2 {
		session = args[1]
	}
	s, err := e.openStore(c, dir, store.LockNone, store.CreateNever)
	var l store.Log
	if err == nil {
		defer s.Close() // a LockNone store holds no lock; the log is read by path
		var ids []string
		if ids, err = resolveIDs(c, s, args[:1]); err != nil {
			return nil, err
		}
		if session != "" {
			if session, err = s.ResolveSessionID(ids[0], session); err != nil {
				return nil, ambiguous(c, err, "session", "")
			}
		}
		l, err = s.FindLog(ids[0], session)
	}
	if err != nil {
		if len(args) == 1 {
			return nil, fmt.Errorf("%s is neither a file nor a conversation in %s: %w", termtext.Quote(args[0]), dir, err)
		}
		return nil, err
	}
	return inspect.StoreTarget(l)
}

// stopPosition names the line where a read stopped.
func stopPosition(p inspect.Problem) string {
	pos := p.Position()
	pos.Column = 0
	return pos.String()
}

// runTranscript prints the transcript of t's session log; the store it
// sits in, opened read-only, holds a fork's inherited history.
func runTranscript(c *ucli.Context, e *env, t *inspect.Target, stdin bool) error {
	path := t.Path
	var s *store.Store
	if abs, err := filepath.Abs(path); err == nil && !stdin {
		convs := filepath.Dir(filepath.Dir(abs))
		if filepath.Base(convs) == "conversations" {
			if st, err := e.openStore(c, filepath.Dir(convs), store.LockNone, store.CreateNever); err == nil {
				s = st
			}
		}
	}
	var from string
	render := func(it *chatread.TranscriptItem) error {
		if e.g.JSON {
			return writeJSON(e.stdout, it)
		}
		if it.Inherited && it.Conversation != from {
			from = it.Conversation
			fmt.Fprintf(e.stdout, "-- from conversation %s, session %s (inherited, read-only)\n", quoted(it.Conversation), quoted(it.Session))
		} else if !it.Inherited && from != "" {
			from = ""
			fmt.Fprintf(e.stdout, "-- this session\n")
		}
		if it.Ended != "" {
			detail := ""
			if it.Detail != "" {
				detail = ": " + it.Detail
			}
			_, err := fmt.Fprintf(e.stdout, "[%d] turn %d ended: %s%s\n", it.Seq, it.Turn, text(it.Ended), text(detail))
			return err
		}
		flag := ""
		if flags := labels(label{it.Summary, "summary"}, label{it.Empty, "empty answer"}, label{it.Interrupted, "interrupted"}); len(flags) > 0 {
			flag = " [" + strings.Join(flags, ", ") + "]"
		}
		return inspect.WriteMessage(e.stdout, it.Seq, it.Role, it.ID, flag, it.Source, it.Message)
	}
	if stdin {
		return chatread.ReadTranscriptHeld(c.Context, path, func() (*upgrade.Reader, error) { return t.OpenV4(upgrade.Options{}) }, render)
	}
	return chatread.ReadTranscriptLog(c.Context, s, path, render)
}
