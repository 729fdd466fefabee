package cli

import (
	"bufio"
	_ "embed"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

func newCompletionCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script for bash, zsh or fish",
		ArgsUsage: "bash|zsh|fish",
		Description: `Prints a completion script, generated from the same command definitions as
the help and the man page: commands, subcommands, every option (global
options anywhere), option values (directories, files, the choices of
--on-conflict, --compress and --layout) and arguments, conversation ids
among them (with their titles in zsh and fish). Install it with:

  bash: convkit completion bash > /etc/bash_completion.d/convkit
        (or: source <(convkit completion bash) in ~/.bashrc)
  zsh:  convkit completion zsh > "${fpath[1]}/_convkit"
        (or: source <(convkit completion zsh) in ~/.zshrc, after compinit)
  fish: convkit completion fish > ~/.config/fish/completions/convkit.fish`,
		Action: withArgs(1, 1, func(c *ucli.Context) error {
			shell := c.Args().First()
			if shell == "fish" {
				return writeFishCompletion(e.stdout, c.App)
			}
			head, ok := shellHeads[shell]
			if !ok {
				return usagef(c, "no completion for %s: want bash, zsh or fish", termtext.Quote(shell))
			}
			// The head, the shared functions, then the shell's own.
			io.WriteString(e.stdout, head[0])
			writeShellCandidates(e.stdout, newCompletionModel(c.App))
			_, err := io.WriteString(e.stdout, head[1])
			return err
		}),
	}
}

// newCompleteCommand is what the completion scripts run for the store's ids:
// "ID<tab>TITLE" a line, an id with a control character left out (a shell
// could not offer it whole); nothing, exit 0, without a store.
func newCompleteCommand(e *env) *ucli.Command {
	return &ucli.Command{
		Name:      "__complete",
		Hidden:    true,
		Usage:     "print what the completion scripts offer",
		ArgsUsage: "ids",
		Action: withArgs(1, 1, func(c *ucli.Context) error {
			if c.Args().First() != "ids" {
				return usagef(c, "no completion of %s: want ids", termtext.Quote(c.Args().First()))
			}
			s, err := e.openStore(c, "", store.LockNone, store.CreateNever)
			if err != nil {
				return nil // nothing to offer
			}
			defer s.Close()
			names, err := reindex.Names(c.Context, s)
			if err != nil {
				return nil
			}
			w := bufio.NewWriter(e.stdout)
			for _, n := range names {
				if termtext.Escape(n.ID) != n.ID {
					continue
				}
				fmt.Fprintf(w, "%s\t%s\n", n.ID, termtext.Escape(n.Title))
			}
			return w.Flush()
		}),
	}
}

// The fixed shell code of the scripts, in files of their own so that shell
// tools can read and check it; the Go code writes what the command
// definitions give around it.
var (
	//go:embed completion/shared.sh
	sharedScript string // the POSIX functions after the generated ones, for bash and zsh
	//go:embed completion/bash.bash
	bashScript string
	//go:embed completion/zsh.zsh
	zshScript string
	//go:embed completion/fish.fish
	fishScript string // __convkit_at and __convkit_ids, before the generated complete lines
)

// What the completion offers: a word list, or one of these.
const (
	completeFiles = "@files"
	completeDirs  = "@dirs"
	completeIDs   = "@ids" // the store's conversation ids (convkit __complete ids)
)

var (
	fileWords   = regexp.MustCompile(`\b(FILE|PATH|ARCHIVE)\b`)
	idWords     = regexp.MustCompile(`^(ID|CONVERSATION)\b`)
	optionWords = regexp.MustCompile(`\s--?[a-z][a-z-]*( [^ ]+)?`)
	dirWords    = regexp.MustCompile(`\bDIR\b`)
	choiceWords = regexp.MustCompile(`^[a-z]+(\|[a-z]+)+$`)
)

func valueCompletion(fi flagInfo) string {
	if fi.choices != nil {
		return strings.Join(fi.choices, " ")
	}
	return kindCompletion(fi.placeholder)
}

// argCompletion is what to offer for any argument of c, and for the first
// when that differs. ID or CONVERSATION completes the store's ids.
func argCompletion(c *ucli.Command) (every, first string) {
	u := strings.TrimSpace(optionWords.ReplaceAllString(" "+c.ArgsUsage, ""))
	if choiceWords.MatchString(u) {
		return strings.ReplaceAll(u, "|", " "), ""
	}
	every = kindCompletion(u)
	for _, alt := range strings.Split(u, " | ") {
		if alt = strings.TrimSpace(alt); !idWords.MatchString(alt) {
			continue
		}
		if strings.HasPrefix(strings.Fields(alt)[0], "ID...") {
			return strings.TrimSpace(completeIDs + " " + every), ""
		}
		return every, strings.TrimSpace(completeIDs + " " + every)
	}
	return every, ""
}

func kindCompletion(words string) string {
	switch {
	case fileWords.MatchString(words):
		return completeFiles
	case dirWords.MatchString(words):
		return completeDirs
	}
	return ""
}

type completionModel struct {
	globals []flagInfo
	nodes   []completionNode
	valued  []string // every spelling of an option that takes a value
}

type completionNode struct {
	path  string // "" for the root, "backup verify"
	subs  []*ucli.Command
	flags []flagInfo
	args  string // what to offer for an argument
	args1 string // for the first argument, when it differs ("" if not)
}

func newCompletionModel(app *ucli.App) completionModel {
	m := completionModel{globals: append(ownFlags(app.Flags), flagInfo{names: helpInfo.names, usage: "show help"})}
	m.nodes = []completionNode{{subs: visible(app.Commands)}}
	for _, n := range commandNodes(app) {
		cn := completionNode{path: n.name(), subs: visible(n.cmd.Subcommands), flags: ownFlags(n.cmd.Flags)}
		cn.args, cn.args1 = argCompletion(n.cmd)
		if n.cmd.Name == "help" && len(n.path) == 1 {
			cn.args1 = strings.Join(commandNames(app.Commands), " ") // help COMMAND
		}
		m.nodes = append(m.nodes, cn)
	}
	for name, f := range flagIndex(app) {
		if f.takesValue {
			m.valued = append(m.valued, dashed(name))
		}
	}
	slices.Sort(m.valued)
	return m
}

func visible(cmds []*ucli.Command) []*ucli.Command {
	var out []*ucli.Command
	for _, c := range cmds {
		if !c.Hidden {
			out = append(out, c)
		}
	}
	return out
}

// shQuote quotes a word for sh, bash, zsh and fish alike.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// writeShellCandidates writes the POSIX shell functions bash and zsh share:
// __convkit_candidates CUR WORDS... prints what to offer for CUR after
// WORDS, following the grammar.
func writeShellCandidates(w io.Writer, m completionModel) {
	var b strings.Builder
	// __convkit_sub PATH WORD prints WORD's command name if it is a
	// subcommand of PATH.
	b.WriteString("__convkit_sub() {\n\tcase \"$1:$2\" in\n")
	for _, n := range m.nodes {
		for _, s := range n.subs {
			for _, name := range s.Names() {
				fmt.Fprintf(&b, "\t%s) echo %s ;;\n", shQuote(n.path+":"+name), shQuote(s.Name))
			}
		}
	}
	b.WriteString("\t*) return 1 ;;\n\tesac\n}\n\n")

	b.WriteString("__convkit_valued() {\n\tcase \"$1\" in\n")
	if len(m.valued) > 0 {
		fmt.Fprintf(&b, "\t%s) return 0 ;;\n", mapJoin(m.valued, shQuote, " | "))
	}
	b.WriteString("\tesac\n\treturn 1\n}\n\n")

	var globals []string
	for _, g := range m.globals {
		globals = append(globals, g.spellings()...)
	}
	b.WriteString("__convkit_words() {\n\tcase \"$1\" in\n")
	for _, n := range m.nodes {
		words := append([]string{}, globals...) // no command redefines a global (TestCommandTree)
		for _, f := range n.flags {
			words = append(words, f.spellings()...)
		}
		fmt.Fprintf(&b, "\t%s) __convkit_flags=%s", shQuote(n.path), shQuote(strings.Join(words, " ")))
		fmt.Fprintf(&b, " __convkit_subs=%s __convkit_args=%s __convkit_args1=%s ;;\n", shQuote(strings.Join(commandNames(n.subs), " ")), shQuote(n.args), shQuote(n.args1))
	}
	b.WriteString("\t*) __convkit_flags='' __convkit_subs='' __convkit_args='' __convkit_args1='' ;;\n\tesac\n}\n\n")

	b.WriteString("__convkit_value() {\n\tcase \"$1 $2\" in\n")
	// A global's value after any command's path, a command's after its own.
	value := func(pattern func(string) string, flags []flagInfo) {
		for _, fi := range flags {
			if v := valueCompletion(fi); fi.takesValue && v != "" {
				for _, s := range fi.spellings() {
					fmt.Fprintf(&b, "\t%s) echo %s ;;\n", pattern(s), shQuote(v))
				}
			}
		}
	}
	value(func(s string) string { return "*' '" + shQuote(s) }, m.globals)
	for _, n := range m.nodes {
		value(func(s string) string { return shQuote(n.path + " " + s) }, n.flags)
	}
	b.WriteString("\tesac\n}\n\n")

	b.WriteString(sharedScript)
	io.WriteString(w, b.String())
}

// shellHeads are the first lines and own functions of bash and zsh.
var shellHeads = map[string][2]string{
	"bash": {"# bash completion for convkit (convkit completion bash), generated from its command definitions.\n\n", bashScript},
	"zsh":  {"#compdef convkit\n# zsh completion for convkit (convkit completion zsh), generated from its command definitions.\n# Put it in $fpath as _convkit, or source it after compinit.\n\n", zshScript},
}

// fishQuote quotes for fish, where only \ and ' are special inside '...'.
func fishQuote(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func writeFishCompletion(w io.Writer, app *ucli.App) error {
	m := newCompletionModel(app)
	var b strings.Builder
	b.WriteString("# fish completion for convkit (convkit completion fish), generated from its command definitions.\n\n")
	var pairs, names []string
	for _, n := range m.nodes {
		for _, s := range n.subs {
			for _, name := range s.Names() {
				pairs = append(pairs, fishQuote(n.path+":"+name))
				names = append(names, fishQuote(s.Name))
			}
		}
	}
	fmt.Fprintf(&b, "set -g __convkit_subs %s\nset -g __convkit_names %s\nset -g __convkit_valued %s\n\n",
		strings.Join(pairs, " "), strings.Join(names, " "), mapJoin(m.valued, fishQuote, " "))
	b.WriteString(fishScript)
	flagLine := func(cond string, fi flagInfo, values string) {
		fmt.Fprintf(&b, "complete -c convkit")
		if cond != "" {
			fmt.Fprintf(&b, " -n %s", fishQuote(cond))
		}
		for _, n := range fi.names {
			fmt.Fprintf(&b, " %s %s", map[bool]string{true: "-s", false: "-l"}[len(n) == 1], n)
		}
		if fi.takesValue {
			// -r: the value follows; -F: files; -x: this value list only.
			switch values {
			case completeFiles:
				b.WriteString(" -r -F")
			case completeDirs:
				b.WriteString(" -x -a '(__fish_complete_directories)'")
			case "":
				b.WriteString(" -x")
			default:
				fmt.Fprintf(&b, " -x -a %s", fishQuote(values))
			}
		}
		fmt.Fprintf(&b, " -d %s\n", fishQuote(firstSentence(fi.usage)))
	}
	for _, fi := range m.globals {
		flagLine("", fi, valueCompletion(fi))
	}
	for _, n := range m.nodes {
		at := fmt.Sprintf("__convkit_at %s", fishQuote(n.path))
		for _, s := range n.subs {
			for _, name := range s.Names() { // aliases too
				fmt.Fprintf(&b, "complete -c convkit -n %s -a %s -d %s\n", fishQuote(at+" noargs"), fishQuote(name), fishQuote(s.Usage))
			}
		}
		for _, fi := range n.flags {
			flagLine(at, fi, valueCompletion(fi))
		}
		if n.path == "" {
			continue
		}
		fishArgs(&b, at+" arg", n.args)
		fishArgs(&b, at+" noargs", strings.TrimSpace(strings.Replace(" "+n.args1+" ", " "+n.args+" ", " ", 1)))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fishKinds are fish's arguments for what the completion offers of a kind.
var fishKinds = map[string]string{completeFiles: "-F", completeDirs: "-a '(__fish_complete_directories)'", completeIDs: "-a '(__convkit_ids)'"}

func fishArgs(b *strings.Builder, cond, what string) {
	var words []string
	for _, w := range strings.Fields(what) {
		if kind, ok := fishKinds[w]; ok {
			fmt.Fprintf(b, "complete -c convkit -n %s %s\n", fishQuote(cond), kind)
		} else {
			words = append(words, w)
		}
	}
	if len(words) > 0 {
		fmt.Fprintf(b, "complete -c convkit -n %s -a %s\n", fishQuote(cond), fishQuote(strings.Join(words, " ")))
	}
}

// firstSentence shortens a usage for fish's one-line descriptions.
func firstSentence(s string) string {
	if i := strings.Index(s, " ("); i > 0 {
		s = s[:i]
	}
	return s
}
