package cli

import (
	"strings"

	ucli "github.com/urfave/cli/v2"
)

// The command definitions are the one source of the help, the grammar
// (grammar.go), the shell completion (completion.go) and the man page
// (man.go). This file walks them.

// commandNode is one command of the tree with its full path.
type commandNode struct {
	path []string // ["backup", "verify"]
	cmd  *ucli.Command
}

// name is the path as typed: "backup verify".
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

// flagInfo is what the help, the completion and the man page show of a
// flag.
type flagInfo struct {
	names       []string // long names first, as defined
	placeholder string   // the value's name in the usage (`DIR`), "" for a boolean
	usage       string   // the usage without backquotes
	takesValue  bool
}

// infoOf reads a flag's definition.
func infoOf(f ucli.Flag) flagInfo {
	fi := flagInfo{names: f.Names(), takesValue: specOf(f).takesValue}
	if d, ok := f.(ucli.DocGenerationFlag); ok {
		fi.usage = d.GetUsage()
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

// spellings are the flag's names as typed: --data-dir, -q.
func (fi flagInfo) spellings() []string {
	out := make([]string, len(fi.names))
	for i, n := range fi.names {
		out[i] = dashed(n)
	}
	return out
}

// withoutExitStatus is a command's Description without the EXIT STATUS
// table that complete appends to every one (the man page has its own
// section).
func withoutExitStatus(desc string) string {
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(desc), exitStatusText))
}

// ownFlags are the flags a definition declares: urfave adds -h/--help to
// every command and to the root when it runs, and the help, completion and
// man page show that one once, by itself.
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
