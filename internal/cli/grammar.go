package cli

import (
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"
)

// urfave/cli v2 stops at the first argument and knows global flags only
// before the command, so Main reorders every invocation into
// "convkit [global flags] command [command flags] -- [arguments]", reading
// each command's flags from its definition (docs/CLI.md, "Invocation rules").

// helpInfo is urfave's -h/--help, which it adds to every command.
var helpInfo = flagInfo{names: []string{"help", "h"}}

// flagEntry is a flag name as the grammar reads it: whether it takes a
// value (TestCommandTree: everywhere or nowhere), and the commands that
// define it, by path ("" for a global option).
type flagEntry struct {
	takesValue bool
	owners     []string
}

// definedIn reports whether a command at path defines the flag, or one
// below it when below.
func (f *flagEntry) definedIn(path string, below bool) bool {
	return f != nil && slices.ContainsFunc(f.owners, func(o string) bool {
		return o == path || below && strings.HasPrefix(o, path+" ")
	})
}

// flagIndex is every flag of app by name: the global ones (with -h/--help)
// and those of every visible command.
func flagIndex(app *ucli.App) map[string]*flagEntry {
	idx := map[string]*flagEntry{}
	add := func(owner string, flags []ucli.Flag) {
		for _, f := range flags {
			fi := infoOf(f)
			for _, n := range fi.names {
				if idx[n] == nil {
					idx[n] = &flagEntry{takesValue: fi.takesValue}
				}
				idx[n].owners = append(idx[n].owners, owner)
			}
		}
	}
	add("", app.Flags)
	for _, n := range commandNodes(app) {
		add(n.name(), n.cmd.Flags)
	}
	return idx
}

// flagName splits a flag token ("--to=DIR" is "to", true); ok is false else.
func flagName(tok string) (name string, hasValue, ok bool) {
	if len(tok) < 2 || tok[0] != '-' || tok == "--" {
		return "", false, false
	}
	name = strings.TrimPrefix(tok[1:], "-")
	if name == "" || name[0] == '-' || name[0] == '=' {
		return "", false, false // "---x", "-=x": not flags; urfave refuses them as it always did
	}
	name, _, hasValue = strings.Cut(name, "=")
	return name, hasValue, true
}

// invocation is an argument list taken apart by the grammar.
type invocation struct {
	globals []string // global flags, each with its value
	path    []string // command and subcommand names, as given
	flags   []string // the leaf command's flags (and unknown ones), with values
	args    []string // positional arguments
	// help: -h or --help was given; the arguments are left out, since
	// urfave would read them as a help topic.
	help    bool
	missing string // a flag given last without its value
	// misplaced: flags of another command, by name, for the hint.
	misplaced map[string]misplacedFlag
}

type misplacedFlag struct {
	spelled string // as given, with its value: "--keep 3"
	owners  []string
}

func (in *invocation) argv(prog string) []string {
	out := slices.Concat([]string{prog}, in.globals, in.path, in.flags)
	if len(in.args) > 0 && !in.help {
		out = append(append(out, "--"), in.args...)
	}
	return out
}

func findCommand(cmds []*ucli.Command, name string) *ucli.Command {
	for _, c := range cmds {
		for _, n := range c.Names() {
			if n == name {
				return c
			}
		}
	}
	return nil
}

// parseInvocation takes args (without the program name) apart. What it
// cannot place is left where urfave refuses it.
func parseInvocation(app *ucli.App, args []string) *invocation {
	idx := flagIndex(app)
	in := &invocation{misplaced: map[string]misplacedFlag{}}

	// First pass: the command path. Flags are skipped with their values: a
	// global's, or one of the command named so far or one below it.
	var cmd *ucli.Command
	var path []string // the commands' own names
	cmds := app.Commands
	pathDone := false
	for i := 0; i < len(args); i++ {
		tok := args[i]
		if tok == "--" {
			break
		}
		if name, hasValue, ok := flagName(tok); ok {
			f := idx[name]
			if (f.definedIn("", false) || cmd != nil && f.definedIn(strings.Join(path, " "), true)) && f.takesValue && !hasValue {
				i++
			}
			continue
		}
		if pathDone {
			continue
		}
		if next := findCommand(cmds, tok); next != nil {
			in.path, path = append(in.path, tok), append(path, next.Name)
			cmd, cmds = next, next.Subcommands
			pathDone = len(cmds) == 0
			continue
		}
		pathDone = true // the first argument: no more subcommands
	}

	// Second pass: globals, the leaf's flags and the arguments.
	leaf := strings.Join(path, " ")
	pathLeft := len(in.path)
	for i := 0; i < len(args); i++ {
		tok := args[i]
		if tok == "--" {
			in.args = append(in.args, args[i+1:]...)
			break
		}
		name, hasValue, ok := flagName(tok)
		if !ok {
			if pathLeft > 0 {
				pathLeft-- // a command name, already placed
				continue
			}
			in.args = append(in.args, tok)
			continue
		}
		help := name == "help" || name == "h"
		in.help = in.help || help
		f, global := idx[name], idx[name].definedIn("", false)
		toks := []string{tok}
		if f != nil && f.takesValue && !hasValue && (global || cmd != nil) {
			if i+1 < len(args) {
				i++
				toks = append(toks, args[i])
			} else {
				in.missing = tok
			}
		}
		switch {
		case cmd != nil && (help || f.definedIn(leaf, false)):
			in.flags = append(in.flags, toks...)
		case global || cmd == nil:
			// A global, or with no command one the root refuses.
			in.globals = append(in.globals, toks...)
		default:
			if f != nil {
				var owners []string
				for _, o := range f.owners {
					owners = append(owners, progName+" "+o)
				}
				in.misplaced[name] = misplacedFlag{spelled: strings.Join(toks, " "), owners: owners}
			}
			in.flags = append(in.flags, toks...)
		}
	}
	return in
}

func normalizeArgs(app *ucli.App, args []string) ([]string, *invocation) {
	if len(args) == 0 {
		return args, &invocation{misplaced: map[string]misplacedFlag{}}
	}
	in := parseInvocation(app, args[1:])
	return in.argv(args[0]), in
}

// json reports whether --json was given, for errors found before parsing.
func (in *invocation) json() bool {
	for _, g := range in.globals {
		if g == "--json" || g == "-json" || g == "--json=true" || g == "-json=true" {
			return true
		}
	}
	return false
}
