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

type flagSet map[string]flagInfo

func (s flagSet) add(specs ...flagInfo) {
	for _, sp := range specs {
		for _, n := range sp.names {
			s[n] = sp
		}
	}
}

func flagsOf(flags []ucli.Flag) flagSet {
	s := flagSet{}
	for _, f := range flags {
		s.add(infoOf(f))
	}
	return s
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
	leaf    *ucli.Command
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

// commandFlags collects the flags of c and of every command below it:
// before a subcommand is named, a flag may belong to any of them.
func commandFlags(c *ucli.Command, into flagSet) {
	into.add(helpInfo)
	for _, f := range c.Flags {
		into.add(infoOf(f))
	}
	for _, sub := range c.Subcommands {
		commandFlags(sub, into)
	}
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
	globals := flagsOf(app.Flags)
	globals.add(helpInfo)
	in := &invocation{misplaced: map[string]misplacedFlag{}}

	// First pass: the command path. Flags are skipped with their values
	// (TestCommandTree checks a flag name takes a value everywhere or
	// nowhere, so both passes agree).
	var cmd *ucli.Command
	cmds := app.Commands
	pathDone := false
	for i := 0; i < len(args); i++ {
		tok := args[i]
		if tok == "--" {
			break
		}
		if name, hasValue, ok := flagName(tok); ok {
			sp, found := globals[name]
			if !found && cmd != nil {
				below := flagSet{}
				commandFlags(cmd, below)
				sp, found = below[name]
			}
			if found && sp.takesValue && !hasValue {
				i++
			}
			continue
		}
		if pathDone {
			continue
		}
		if next := findCommand(cmds, tok); next != nil {
			in.path = append(in.path, tok)
			cmd, cmds = next, next.Subcommands
			pathDone = len(cmds) == 0
			continue
		}
		pathDone = true // the first argument: no more subcommands
	}
	in.leaf = cmd

	// Second pass: globals, the leaf's flags and the arguments.
	var leafFlags flagSet // read only with a command
	// all: every command's flags, with the commands that define each.
	all, owners := flagSet{}, map[string][]string{}
	if cmd != nil {
		leafFlags = flagsOf(cmd.Flags)
		leafFlags.add(helpInfo)
		for _, n := range commandNodes(app) {
			for name, fi := range flagsOf(n.cmd.Flags) {
				all[name], owners[name] = fi, append(owners[name], progName+" "+n.name())
			}
		}
	}
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
		if name == "help" || name == "h" {
			in.help = true
		}
		take := func(sp flagInfo, found bool) []string {
			if found && sp.takesValue && !hasValue {
				if i+1 < len(args) {
					i++
					return []string{tok, args[i]}
				}
				in.missing = tok
			}
			return []string{tok}
		}
		if sp, found := leafFlags[name]; found && cmd != nil {
			in.flags = append(in.flags, take(sp, found)...)
			continue
		}
		if sp, found := globals[name]; found {
			in.globals = append(in.globals, take(sp, found)...)
			continue
		}
		if cmd == nil {
			in.globals = append(in.globals, tok) // unknown, and no command: the root refuses it
			continue
		}
		sp, found := all[name]
		toks := take(sp, found)
		if found {
			in.misplaced[name] = misplacedFlag{spelled: strings.Join(toks, " "), owners: owners[name]}
		}
		in.flags = append(in.flags, toks...)
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
