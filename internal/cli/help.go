package cli

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"
)

func newHelpCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:      "help",
		Usage:     "show the help of convkit or of a command",
		ArgsUsage: "[COMMAND [SUBCOMMAND]]",
		Description: `Prints the help of the command named, as COMMAND --help does (convkit help
backup verify is convkit backup verify --help), or without one the help
of convkit: its commands by group, the global options and examples. An
unknown command is a usage error, with the closest names as a hint.`,
		Action: func(c *ucli.Context) error {
			args := c.Args().Slice()
			cmds := c.App.Commands
			var path []string
			for _, name := range args {
				next := findCommand(cmds, name)
				if next == nil || next.Hidden {
					parent := strings.Join(path, " ")
					msg := "no help for unknown command " + quotedPath(append(path, name))
					if len(path) > 0 && len(cmds) == 0 {
						msg = "no help for " + quotedPath(append(path, name)) + ": " + parent + " has no subcommands"
					}
					if hint := suggestCommand(parent, name, cmds); hint != "" {
						return usageWithHint(c, hint, "%s", msg)
					}
					return usagef(c, "%s", msg)
				}
				path = append(path, next.Name)
				cmds = next.Subcommands
			}
			// One run of the real command line, so help and --help agree;
			// what went wrong was printed already.
			argv := append(append([]string{progName}, path...), "--help")
			if code := runMain(c.Context, argv, e.stdin, e.stdout, e.stderr, e.g.getenv); code != exitOK {
				return &exitError{err: fmt.Errorf("exit status %d", code), code: code, silent: true}
			}
			return nil
		},
	}
}

func quotedPath(path []string) string { return quoted(strings.Join(path, " ")) }

// appHelpTemplate is urfave's program help with the commands in
// commandGroups' order (urfave sorts categories by name), as one table.
var appHelpTemplate = func() string {
	const theirs = `{{template "visibleCommandCategoryTemplate" .}}`
	if !strings.Contains(ucli.AppHelpTemplate, theirs) {
		panic("urfave/cli's AppHelpTemplate no longer lists commands by category")
	}
	return strings.Replace(ucli.AppHelpTemplate, theirs, `{{range commandGroups .}}
   {{.Name}}:{{"\t"}}{{range .Commands}}
     {{join .Names ", "}}{{"\t"}}{{.Usage}}{{end}}{{end}}`, 1)
}()

type commandGroup struct {
	Name     string
	Commands []*ucli.Command
}

func groupsOf(app *ucli.App) []commandGroup {
	var out []commandGroup
	for _, g := range commandGroups {
		cg := commandGroup{Name: g.name}
		for _, c := range app.Commands {
			if c.Category == g.name && !c.Hidden {
				cg.Commands = append(cg.Commands, c)
			}
		}
		if len(cg.Commands) > 0 {
			out = append(out, cg)
		}
	}
	return out
}

// Every help ends with its EXAMPLES, then its EXIT STATUS table, after the
// options urfave renders last.
func init() {
	render := ucli.HelpPrinterCustom
	ucli.HelpPrinterCustom = func(w io.Writer, templ string, data interface{}, funcs map[string]interface{}) {
		all := map[string]interface{}{"commandGroups": groupsOf}
		maps.Copy(all, funcs)
		var b bytes.Buffer
		render(&b, templ, data, all)
		path, ok := "", true
		switch d := data.(type) {
		case *ucli.App:
		case *ucli.Command:
			path = strings.TrimSpace(strings.TrimPrefix(d.HelpName, progName))
		default:
			ok = false
		}
		help := strings.TrimRight(b.String(), "\n") + "\n"
		if ok {
			help += examplesText(path) + "\n" + exitStatusText
		}
		// The group lines of the program's help end in tabwriter's padding.
		io.WriteString(w, trailingSpaces.ReplaceAllString(help, ""))
	}
}

var trailingSpaces = regexp.MustCompile(`(?m) +$`)

func newManCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:  "man",
		Usage: "print the convkit(1) man page",
		Description: `Prints the man page in roff, generated from the same command definitions as
the help and the completion: every command with its options, the exit
status and the environment. docs/convkit.1 in the source is this output.

  convkit man | man -l -
  convkit man > /usr/local/share/man/man1/convkit.1`,
		Action: withArgs(0, 0, func(c *ucli.Context) error {
			return writeMan(e.stdout, c.App)
		}),
	}
}

// exitStatuses are the EXIT STATUS of the helps (short) and the man page.
var exitStatuses = []struct {
	code        int
	short, text string
}{
	{exitOK, "success", "success"},
	{exitFailure, "failure, including any item that failed", "failure, including any single item that failed (a log migrate could not convert)"},
	{exitUsage, "usage error (bad flags or arguments); nothing was touched", "usage error (bad command, option or arguments), found before any data is touched"},
	{exitPartial, "finished, but some items were skipped or unreadable", "finished, but some items were skipped or unreadable (reindex skipped a conversation, backup met an unreadable file)"},
	{exitLocked, "runtime.lock is held by another process", "runtime.lock is held by another process, and --lock-timeout ran out"},
	{exitInterrupted, "interrupted", "interrupted (SIGINT or SIGTERM)"},
}

var exitStatusText = func() string {
	s := "EXIT STATUS:\n"
	for _, st := range exitStatuses {
		s += fmt.Sprintf("   %-5d%s\n", st.code, st.short)
	}
	return s
}()

// environment is every variable convkit reads.
var environment = []struct{ name, text string }{
	{"CONVKIT_DATA_DIR", "The data directory when --data-dir is not given. A blank value counts as unset."},
	{"XDG_DATA_HOME", "Without --data-dir and CONVKIT_DATA_DIR, the data directory is $XDG_DATA_HOME/convkit (an absolute XDG_DATA_HOME only)."},
	{"HOME", "Otherwise the data directory is $HOME/.local/share/convkit."},
	{"CONVKIT_CONFIG", "The runtime configuration import checks agents and models against, when --config is not given (default: <data-dir>/config.toml)."},
	{"TMPDIR", "Where migrate writes its private report folder, backup verify extracts an archive (unless --work-dir) and inspect - keeps what it reads from stdin."},
	{"GOMEMLIMIT", "When set, migrate leaves the Go runtime's memory limit as it is instead of setting its own (64 MiB + 32 MiB per job)."},
}

// roff escapes text for a man page line (a leading dot would be a request).
func roff(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

// roffParagraphs writes text as paragraphs, indented ones as they are.
func roffParagraphs(w io.Writer, text string) {
	for _, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		lines := strings.Split(para, "\n")
		indented := slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, " ") })
		fmt.Fprintln(w, ".PP")
		if indented {
			fmt.Fprintln(w, ".nf")
		}
		for _, l := range lines {
			if !indented {
				l = strings.TrimSpace(l)
			}
			fmt.Fprintln(w, roff(l))
		}
		if indented {
			fmt.Fprintln(w, ".fi")
		}
	}
}

func roffExamples(w io.Writer, ex []example) {
	fmt.Fprintln(w, ".RS\n.nf")
	for i, x := range ex {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s\n%s\n", roff("# "+x.note), roff(x.line))
	}
	fmt.Fprintln(w, ".fi\n.RE")
}

func roffFlag(w io.Writer, fi flagInfo) {
	head := mapJoin(fi.spellings(), func(s string) string { return `\fB` + roff(s) + `\fR` }, ", ")
	if fi.takesValue {
		head += ` \fI` + roff(fi.placeholder) + `\fR`
	}
	fmt.Fprintf(w, ".TP\n%s\n%s\n", head, roff(fi.usage))
}

// writeMan writes convkit(1) from the command definitions, with no date so
// that docs/convkit.1 can be checked against it.
func writeMan(w io.Writer, app *ucli.App) error {
	fmt.Fprintf(w, `.\" convkit(1), generated by "convkit man" from the command definitions.
.TH CONVKIT 1 "" "convkit" "User Commands"
.SH NAME
convkit \- %s
.SH SYNOPSIS
.B convkit
[\fIglobal options\fR] \fIcommand\fR [\fIcommand options\fR] [\fIarguments\fR...]
.SH DESCRIPTION
`, roff(app.Usage))
	roffParagraphs(w, app.Description)
	roffParagraphs(w, `Global options are accepted before or after the command, and a command's
options before or after its arguments; "--" ends the options, so an argument
that starts with "-" follows it. A lone "-" is an argument: stdin or stdout
where a command says so. --help or -h anywhere prints the help of the command
it follows. Results go to stdout; logs, warnings, progress and errors go to
stderr. Text from logs and archives is printed with its control characters
escaped (\x1b, \r, \u202e, ...); --json prints it exactly.`)
	fmt.Fprintln(w, ".SH GLOBAL OPTIONS")
	for _, fi := range ownFlags(app.Flags) {
		roffFlag(w, fi)
	}
	roffFlag(w, flagInfo{names: helpInfo.names, usage: "show the help of the command it follows"})
	fmt.Fprintln(w, ".SH COMMANDS")
	for _, n := range commandNodes(app) {
		c := n.cmd
		synopsis := "convkit " + n.name()
		flags := ownFlags(c.Flags)
		if len(flags) > 0 {
			synopsis += " [options]"
		}
		if u := strings.TrimSpace(c.ArgsUsage); u != "" {
			synopsis += " " + u
		}
		fmt.Fprintf(w, ".SS \"%s\"\n", strings.ReplaceAll(roff(synopsis), `"`, `\(dq`))
		usage := roff(c.Usage)
		if len(c.Aliases) > 0 {
			usage += " (alias: " + roff(strings.Join(c.Aliases, ", ")) + ")"
		}
		fmt.Fprintf(w, ".PP\n%s\n", usage)
		if c.Description != "" {
			roffParagraphs(w, c.Description)
		}
		if len(flags) > 0 {
			fmt.Fprintln(w, ".PP\nOptions:\n.RS")
			for _, fi := range flags {
				roffFlag(w, fi)
			}
			fmt.Fprintln(w, ".RE")
		}
		if ex := commandExamples[n.name()]; len(ex) > 0 {
			fmt.Fprintln(w, ".PP\nExamples:")
			roffExamples(w, ex)
		}
	}
	fmt.Fprintln(w, ".SH EXAMPLES")
	roffExamples(w, commandExamples[""])
	fmt.Fprintln(w, ".PP\nEvery command's help (convkit help COMMAND) and its section above end with examples of its own.")
	fmt.Fprintln(w, ".SH EXIT STATUS")
	fmt.Fprintln(w, ".PP\nThe codes are the same for every command. If more than one applies, the first in this order decides: 130, 2, 11, 3, 1.")
	for _, s := range exitStatuses {
		fmt.Fprintf(w, ".TP\n.B %d\n%s\n", s.code, roff(s.text))
	}
	fmt.Fprintln(w, ".SH ENVIRONMENT")
	for _, v := range environment {
		fmt.Fprintf(w, ".TP\n.B %s\n%s\n", v.name, roff(v.text))
	}
	fmt.Fprintln(w, `.SH FILES
.TP
.I <data\-dir>/runtime.lock
The store lock, held by the runtime and by every writing command, with its holder's record.
.TP
.I <data\-dir>/metadata.db
The SQLite index, derived from the logs; reindex rebuilds it.
.TP
.I <data\-dir>/conversations/<conversation>/
One directory per conversation: metadata[.vN].jsonl[.zst] and one log per session.
.SH SEE ALSO
.BR restic (1),
.BR zstd (1),
.BR tar (1).
The documentation in the source: README.md, docs/CLI.md, docs/JSON.md, docs/FORMAT.md, docs/BACKUP.md, docs/TRANSFER.md.`)
	return nil
}

// commandNode is one command of the tree with its full path.
type commandNode struct {
	path []string // ["backup", "verify"]
	cmd  *ucli.Command
}

func (n commandNode) name() string { return strings.Join(n.path, " ") }

// commandNodes lists every visible command depth first, in help order.
func commandNodes(app *ucli.App) []commandNode {
	var out []commandNode
	var walk func(prefix []string, cmds []*ucli.Command)
	walk = func(prefix []string, cmds []*ucli.Command) {
		for _, c := range cmds {
			if c.Hidden {
				continue
			}
			p := append(append([]string{}, prefix...), c.Name)
			out = append(out, commandNode{path: p, cmd: c})
			walk(p, c.Subcommands)
		}
	}
	walk(nil, app.Commands)
	return out
}

// flagInfo is what the help, the completion and the man page show of a flag.
type flagInfo struct {
	names       []string // long names first, as defined
	placeholder string   // the value's name in the usage (`DIR`), "" for a boolean
	usage       string   // the usage without backquotes
	takesValue  bool
	choices     []string // of a choiceFlag
}

// infoOf describes an urfave flag: every kind but a boolean takes a value.
func infoOf(f ucli.Flag) flagInfo {
	fi := flagInfo{names: f.Names(), takesValue: true}
	if cf, ok := f.(*choiceFlag); ok {
		fi.choices = cf.choices
	}
	if d, ok := f.(ucli.DocGenerationFlag); ok {
		fi.usage, fi.takesValue = d.GetUsage(), d.TakesValue()
	}
	if i := strings.IndexByte(fi.usage, '`'); i >= 0 {
		if j := strings.IndexByte(fi.usage[i+1:], '`'); j >= 0 {
			fi.placeholder = fi.usage[i+1 : i+1+j]
			fi.usage = fi.usage[:i] + fi.placeholder + fi.usage[i+1+j+1:]
		}
	}
	if fi.takesValue && fi.placeholder == "" {
		fi.placeholder = "VALUE"
	}
	return fi
}

func (fi flagInfo) spellings() []string {
	out := make([]string, len(fi.names))
	for i, n := range fi.names {
		out[i] = dashed(n)
	}
	return out
}

// ownFlags are the flags a definition declares, without urfave's --help.
func ownFlags(flags []ucli.Flag) []flagInfo {
	var out []flagInfo
	for _, f := range flags {
		if f == ucli.HelpFlag {
			continue
		}
		out = append(out, infoOf(f))
	}
	return out
}
