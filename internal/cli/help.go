package cli

import (
	"bytes"
	"io"
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
			// The help of a command is what --help prints: one run of the
			// real command line, so that the two never differ.
			argv := append(append([]string{progName}, path...), "--help")
			if code := runMain(c.Context, argv, e.stdin, e.stdout, e.stderr, e.g.getenv); code != exitOK {
				return silentExit(code)
			}
			return nil
		},
	}
}

// quotedPath quotes a command path as typed: "backup verify".
func quotedPath(path []string) string { return quoted(strings.Join(path, " ")) }

// appHelpTemplate is urfave's help of the program with its commands in
// commandGroups' groups and order (urfave sorts its categories by name),
// aligned as one table.
var appHelpTemplate = func() string {
	const theirs = `{{template "visibleCommandCategoryTemplate" .}}`
	if !strings.Contains(ucli.AppHelpTemplate, theirs) {
		panic("urfave/cli's AppHelpTemplate no longer lists commands by category")
	}
	return strings.Replace(ucli.AppHelpTemplate, theirs, `{{range commandGroups .}}
   {{.Name}}:{{"\t"}}{{range .Commands}}
     {{join .Names ", "}}{{"\t"}}{{.Usage}}{{end}}{{end}}`, 1)
}()

// commandGroup is one group of the root help.
type commandGroup struct {
	Name     string
	Commands []*ucli.Command
}

// groupsOf lists the visible commands of app by group (their Category), in
// commandGroups' order.
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

// Every command's help ends with its EXAMPLES, then its EXIT STATUS table
// (docs/CLI.md): urfave renders the Description, which carries the table,
// before the options, so the printer moves the table after them and puts
// the examples (examples.go) before it. The program's help lists the
// commands by group (appHelpTemplate).
func init() {
	render := ucli.HelpPrinterCustom
	ucli.HelpPrinterCustom = func(w io.Writer, templ string, data interface{}, funcs map[string]interface{}) {
		all := map[string]interface{}{"commandGroups": groupsOf}
		for k, v := range funcs {
			all[k] = v
		}
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
		var ex bytes.Buffer
		if ok {
			writeExamples(&ex, path)
		}
		help := exitStatusLast(b.String(), ex.String())
		// The group lines of the program's help end in tabwriter's padding.
		lines := strings.Split(help, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimRight(l, " ")
		}
		io.WriteString(w, strings.Join(lines, "\n"))
	}
}

// exitStatusLast moves the EXIT STATUS table out of a rendered help's
// DESCRIPTION section to the end, as a section of its own, with the
// sections before (EXAMPLES) ahead of it.
func exitStatusLast(help, before string) string {
	lines := strings.Split(strings.TrimRight(help, "\n"), "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == "EXIT STATUS:" && strings.HasPrefix(l, " ") {
			start = i
			break
		}
	}
	if start < 0 {
		return strings.TrimRight(help, "\n") + "\n" + before
	}
	end := start + 1
	for end < len(lines) && strings.TrimSpace(lines[end]) != "" && strings.HasPrefix(lines[end], " ") {
		end++
	}
	table := []string{"", "EXIT STATUS:"}
	for _, l := range lines[start+1 : end] {
		table = append(table, "   "+strings.TrimSpace(l))
	}
	// The table's lines are "CODE  meaning": keep the columns.
	for i := 2; i < len(table); i++ {
		if code, rest, ok := strings.Cut(strings.TrimSpace(table[i]), " "); ok {
			table[i] = "   " + code + strings.Repeat(" ", max(1, 5-len(code))) + strings.TrimSpace(rest)
		}
	}
	rest := append([]string{}, lines[:start]...)
	// The blank line before the table goes with it.
	if n := len(rest); n > 0 && strings.TrimSpace(rest[n-1]) == "" {
		rest = rest[:n-1]
	}
	rest = append(rest, lines[end:]...)
	return strings.Join(rest, "\n") + "\n" + before + strings.Join(table, "\n") + "\n"
}
