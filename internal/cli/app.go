package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// progName is the command's name in messages and help, whatever the binary's.
const progName = "convkit"

// commandGroups are the top-level commands, in the groups and the order
// the root help shows them. Main calls each constructor once per run, so
// every run gets fresh commands and fresh flags (urfave/cli v2 flags keep
// state between runs).
var commandGroups = []struct {
	name     string
	commands []func(*env) *ucli.Command
}{
	{"store upkeep", []func(*env) *ucli.Command{newReindexCommand, newRepairCommand,
		newRenameCommand, newArchiveCommand, newUnarchiveCommand, newDeleteCommand, newLockCommand}},
	{"migration", []func(*env) *ucli.Command{newMigrateCommand, newPruneCommand}},
	{"backup and transfer", []func(*env) *ucli.Command{newBackupCommand, newRestoreCommand, newExportCommand, newImportCommand}},
	{"inspection", []func(*env) *ucli.Command{newListCommand, newSearchCommand, newInspectCommand}},
	{"setup", []func(*env) *ucli.Command{newVersionCommand, newHelpCommand, newCompletionCommand, newManCommand,
		newFixturesCommand, newDemoCommand, newCompleteCommand}},
}

// globals holds the root's flags, parsed before any command runs.
type globals struct {
	DataDir     string        // --data-dir, raw; resolve with dataDir
	JSON        bool          // --json
	Quiet       bool          // --quiet, -q
	LockTimeout time.Duration // --lock-timeout; 0 fails fast
	Version     bool          // --version

	getenv func(string) string
}

// dataDir resolves the data directory in the environment injected into Main.
func (g *globals) dataDir() (string, error) {
	return store.ResolveDataDir(g.DataDir, g.getenv, g.getenv("HOME"))
}

// env is what one run of Main shares with its commands.
type env struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	g      *globals
	inv    *invocation // as the grammar took it apart
	// isTerminal, when set, replaces the terminal test (tests set it).
	isTerminal func(any) bool
	line       barLine // the terminal line progress bars are drawn on
}

// Main runs convkit with args (args[0] is the program name) and returns the
// exit code; it never exits the process. ctx is cancelled on an interrupt.
// A nil getenv is an empty environment. Main must not run concurrently with
// itself: urfave/cli v2 keeps its help flag in a package variable.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr, g: &globals{getenv: getenv}}
	// A terminal stream clears the progress bar before it writes.
	for _, s := range []*io.Writer{&e.stdout, &e.stderr} {
		if f, ok := (*s).(*os.File); ok && isTerminal(f) {
			*s = &termWriter{w: f, line: &e.line}
		}
	}
	out := &resultWriter{w: e.stdout}
	e.stdout = out
	app := newApp(e)
	args, e.inv = normalizeArgs(app, args)
	if e.inv.missing != "" {
		// Placed anywhere, urfave would take the next word for its value.
		command := strings.TrimSpace(progName + " " + strings.Join(e.inv.path, " "))
		return report(stderr, &exitError{err: errors.New("flag needs an argument: " + e.inv.missing), code: exitUsage, command: command}, e.inv.json())
	}
	err := app.RunContext(ctx, args)
	if err == nil {
		err = out.err
	}
	return report(stderr, err, e.g.JSON)
}

// resultWriter keeps stdout's first write error: results rendered as text
// ignore it, and a command whose results were lost must not exit 0.
type resultWriter struct {
	w   io.Writer
	err error
}

func (r *resultWriter) Write(p []byte) (int, error) {
	n, err := r.w.Write(p)
	if err != nil && r.err == nil {
		r.err = err
	}
	return n, err
}

func newApp(e *env) *ucli.App {
	g := e.g
	var commands []*ucli.Command
	for _, group := range commandGroups {
		for _, newCommand := range group.commands {
			c := newCommand(e)
			c.Category = group.name
			commands = append(commands, c)
		}
	}
	for _, c := range commands {
		complete(e, c)
	}
	return &ucli.App{
		Name:      progName,
		Usage:     "maintain and migrate an AI-agent conversation store",
		UsageText: progName + " [global options] <command> [command options] [arguments...]",
		Description: "Every command reads or writes the data directory (see --data-dir). " +
			"Results go to stdout; logs, warnings, progress and errors go to stderr. " +
			"Global options go before or after the command, options before or after the arguments; -- ends the options.",
		Commands:              commands,
		CustomAppHelpTemplate: appHelpTemplate,
		Flags: []ucli.Flag{
			&ucli.StringFlag{
				Name:        "data-dir",
				Usage:       "use the data directory `DIR` (default: $CONVKIT_DATA_DIR, else $XDG_DATA_HOME/convkit, else ~/.local/share/convkit)",
				Destination: &g.DataDir,
			},
			&ucli.BoolFlag{
				Name:        "json",
				Usage:       "print results as JSON (see docs/JSON.md)",
				Destination: &g.JSON,
			},
			&ucli.BoolFlag{
				Name:        "quiet",
				Aliases:     []string{"q"},
				Usage:       "print only problems and the final summary, no progress (for cron; --json is unchanged)",
				Destination: &g.Quiet,
			},
			&ucli.DurationFlag{
				Name:        "lock-timeout",
				Usage:       "wait up to `DURATION` for runtime.lock (0: fail at once if it is held)",
				Destination: &g.LockTimeout,
			},
			&ucli.BoolFlag{
				Name:        "version",
				Usage:       "print the version and exit (as the version command does)",
				Destination: &g.Version,
			},
			// urfave adds its -h/--help to the program only when no
			// command is called help: ours is.
			ucli.HelpFlag,
		},
		Before: func(c *ucli.Context) error {
			if g.LockTimeout < 0 {
				return usagef(c, "--lock-timeout must not be negative")
			}
			if g.Version {
				// Whatever else was asked: convkit --version, like git's.
				if err := runVersion(e); err != nil {
					return err
				}
				return errDone
			}
			return nil
		},
		Action:          rootAction,
		OnUsageError:    e.onUsageError,
		HideVersion:     true, // --version is ours: urfave's would claim -v
		HideHelpCommand: true,
		Reader:          e.stdin,
		Writer:          e.stdout,
		ErrWriter:       e.stderr,
		// Errors reach Main through RunContext; urfave must never exit.
		ExitErrHandler: func(*ucli.Context, error) {},
	}
}

// complete finishes a command and its subcommands after construction.
func complete(e *env, c *ucli.Command) {
	c.Description = strings.TrimSpace(c.Description)
	if c.OnUsageError == nil {
		c.OnUsageError = e.onUsageError
	}
	c.HideHelpCommand = true
	if len(c.Subcommands) > 0 && c.Action == nil {
		c.Action = groupAction
	}
	for _, sub := range c.Subcommands {
		complete(e, sub)
	}
}

func rootAction(c *ucli.Context) error {
	if !c.Args().Present() {
		return usagef(c, "no command given")
	}
	return unknownCommand(c, c.Args().First())
}

func groupAction(c *ucli.Context) error {
	if !c.Args().Present() {
		return usagef(c, "%s needs a subcommand (%s)", c.Command.HelpName, strings.Join(commandNames(c.Command.Subcommands), ", "))
	}
	return unknownCommand(c, c.Args().First())
}

// onUsageError turns a flag parse error into a usage error. A flag that
// another command defines gets a hint naming that command, with the value
// as it was given.
func (e *env) onUsageError(c *ucli.Context, err error, isSubcommand bool) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		if m, ok := e.inv.misplaced[name]; ok {
			return usageWithHint(c, fmt.Sprintf("%s is an option of %s, not of %s: %s %s ...",
				dashed(name), strings.Join(m.owners, ", "), helpName(c), m.owners[0], m.spelled),
				"unknown flag %s for %s", dashed(name), helpName(c))
		}
		if hint := suggestFlag(c, name); hint != "" {
			return usageWithHint(c, hint, "unknown flag %s", dashed(name))
		}
		return usagef(c, "unknown flag %s", dashed(name))
	}
	// The flag package names flags with one dash: "invalid value "x" for flag -lock-timeout".
	msg = flagInMessage.ReplaceAllStringFunc(msg, func(m string) string {
		before, name, _ := strings.Cut(m, "-")
		return before + dashed(name)
	})
	return usagef(c, "%s", msg)
}

var flagInMessage = regexp.MustCompile(`( for (flag )?|needs an argument: )-[A-Za-z0-9][A-Za-z0-9-]*`)

// dashed spells a flag name as users type it: -q, --json.
func dashed(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

func withArgs(min, max int, action ucli.ActionFunc) ucli.ActionFunc {
	return func(c *ucli.Context) error {
		if err := checkArgs(c, min, max); err != nil {
			return err
		}
		return action(c)
	}
}

// checkArgs wants min to max positional arguments (max < 0: no limit).
func checkArgs(c *ucli.Context, min, max int) error {
	args := c.Args().Slice()
	switch {
	case len(args) < min:
		if u := c.Command.ArgsUsage; u != "" {
			return usagef(c, "missing arguments: want %s", u)
		}
		return usagef(c, "missing arguments: want at least %d", min)
	case max >= 0 && len(args) > max:
		if max == 0 {
			// A mistyped subcommand of a command that runs by itself
			// (backup verfy) arrives as an argument.
			if hint := suggestCommand(commandPath(c), args[0], c.Command.Subcommands); hint != "" {
				return usageWithHint(c, hint, "%s takes no arguments, got %s", helpName(c), termtext.Quote(args[0]))
			}
			return usagef(c, "%s takes no arguments, got %s", helpName(c), termtext.Quote(args[0]))
		}
		return usagef(c, "too many arguments: want at most %d, got %d", max, len(args))
	}
	return nil
}

// helpName is the full name of the running command, "convkit lock status".
func helpName(c *ucli.Context) string {
	if c.Command == nil || c.Command.HelpName == "" {
		return progName
	}
	return c.Command.HelpName
}

// openStore opens the store at dir ("": the data directory), locked as mode
// says; the lock records the command running in c.
func (e *env) openStore(c *ucli.Context, dir string, mode store.LockMode, create store.Create) (*store.Store, error) {
	if dir == "" {
		var err error
		if dir, err = e.g.dataDir(); err != nil {
			return nil, err
		}
	}
	command := helpName(c)
	if c.Bool("dry-run") {
		command += " --dry-run"
	}
	return store.Open(c.Context, dir, store.OpenOptions{Create: create, Lock: store.LockOptions{Mode: mode, Timeout: e.g.LockTimeout, Command: command}})
}

// resolveIDs is store.ResolveIDs, an ambiguous prefix a usage error.
func resolveIDs(c *ucli.Context, s *store.Store, refs []string) ([]string, error) {
	ids, err := s.ResolveIDs(refs)
	return ids, ambiguous(c, err, "conversation", " ('convkit list --all' lists them)")
}

// ambiguous makes an ambiguous id prefix (what: conversation or session)
// in err a usage error; more ends its hint.
func ambiguous(c *ucli.Context, err error, what, more string) error {
	var amb *store.AmbiguousIDError
	if errors.As(err, &amb) {
		return usageWithHint(c, "give more of the id"+more, "%s id %s", what, amb.Error())
	}
	return err
}

// choiceFlag is an option taking one of choices, the first by default;
// completion offers them.
type choiceFlag struct {
	*ucli.StringFlag
	choices []string
}

func newChoiceFlag(name, usage string, choices ...string) *choiceFlag {
	f := &choiceFlag{StringFlag: &ucli.StringFlag{Name: name, Value: choices[0], Usage: usage}, choices: choices}
	f.Action = func(c *ucli.Context, v string) error {
		if !slices.Contains(choices, v) {
			last := len(choices) - 1
			return usagef(c, "--%s must be %s or %s, not %s", name, strings.Join(choices[:last], ", "), choices[last], termtext.Quote(v))
		}
		return nil
	}
	return f
}

// configFlag is --config of the commands that check what opens here.
func configFlag() ucli.Flag {
	return &ucli.StringFlag{Name: "config", Usage: "check agents and models against the runtime configuration `FILE` (default: $CONVKIT_CONFIG, else <data-dir>/config.toml)"}
}

// loadMachineLenient reads the runtime configuration for a command it only
// informs (list, the edits): a broken default file is a warning.
func (e *env) loadMachineLenient(c *ucli.Context, dataDir, what string) (*store.Machine, error) {
	path, explicit := store.RuntimeConfigPath(c.String("config"), e.g.getenv, dataDir)
	m, _, err := store.LoadMachine(path, explicit)
	if err == nil || explicit {
		return m, err
	}
	fmt.Fprintf(e.stderr, "%s: warning: %s: agents and models were not checked%s\n", progName, text(err.Error()), what)
	return &store.Machine{ConfigPath: path}, nil
}

// jobsPattern accepts what a person means by a whole number: digits with
// an optional sign, fraction of zeros or exponent ("32", "+1", "01", "1e2").
var jobsPattern = regexp.MustCompile(`^\+?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// jobsFlag is --jobs (def when unset): a positive safe integer; the
// library bounds how many workers actually run.
func jobsFlag(c *ucli.Context, def int) (int, error) {
	if !c.IsSet("jobs") {
		return def, nil
	}
	n, err := parseJobs(c.String("jobs"))
	if err != nil {
		return 0, usagef(c, "%v", err)
	}
	return n, nil
}

func parseJobs(s string) (int, error) {
	bad := errors.New("--jobs must be a positive safe integer")
	t := strings.TrimSpace(s)
	if !jobsPattern.MatchString(t) {
		return 0, bad
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 1 || f > 1<<53-1 || f != float64(int64(f)) {
		return 0, bad
	}
	return int(f), nil
}

// memoryBudget is the resident set a migration of jobs workers stays within.
func memoryBudget(jobs int) int64 { return 64<<20 + int64(jobs)*(32<<20) }

// unaccountedMemory is what the resident set holds beside what the Go
// runtime counts against its limit (code and data pages, ~8 MiB), with room.
const unaccountedMemory = 12 << 20

// softMemoryLimit holds the Go runtime to budget (GOGC's doubling of live
// data alone could pass it), unless a limit is set already; restore undoes it.
func softMemoryLimit(budget int64) (restore func()) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return func() {}
	}
	prev := debug.SetMemoryLimit(-1)
	if prev != math.MaxInt64 {
		return func() {}
	}
	debug.SetMemoryLimit(budget - unaccountedMemory)
	return func() { debug.SetMemoryLimit(prev) }
}
