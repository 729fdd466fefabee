package cli

import (
	"bytes"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"
)

func TestClosest(t *testing.T) {
	names := []string{"list", "lock", "inspect", "reindex", "repair", "rename", "backup", "migrate", "migrate-sessions"}
	tests := []struct {
		word string
		want []string
	}{
		{"lsit", []string{"list"}},       // neighbours swapped: one edit
		{"lst", []string{"list"}},        // one left out
		{"lisst", []string{"list"}},      // one too many
		{"inpsect", []string{"inspect"}}, // longer word: one swap
		{"reindx", []string{"reindex"}},
		{"migrat", []string{"migrate"}},
		{"rein", []string{"reindex"}}, // a unique prefix
		{"re", nil},                   // a prefix of three: no suggestion
		{"lokc", []string{"lock"}},
		{"frobnicate", nil},
		{"l", nil},
		{"list", nil}, // the name itself is not suggested
	}
	for _, tt := range tests {
		if got := closest(tt.word, names); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("closest(%q) = %q, want %q", tt.word, got, tt.want)
		}
	}
	if got := closest("bat", []string{"bar", "baz", "bar"}); !reflect.DeepEqual(got, []string{"bar", "baz"}) {
		t.Errorf("closest(bat) = %q, want both, in order, once", got)
	}
	for _, tt := range []struct {
		a, b string
		d    int
	}{{"", "abc", 3}, {"abc", "abc", 0}, {"ab", "ba", 1}, {"kitten", "sitting", 3}, {"ça", "ac", 2}} {
		if got := editDistance(tt.a, tt.b); got != tt.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.d)
		}
	}
}

// TestDidYouMean: a mistyped command, subcommand or option is a usage error
// (exit 2) whose hint names the closest one.
func TestDidYouMean(t *testing.T) {
	tests := []struct {
		args       []string
		msg, hint  string
		helpOfWhat string
	}{
		{[]string{"lsit"}, `unknown command "lsit"`, `did you mean "list"?`, "convkit"},
		{[]string{"lock", "stauts"}, `unknown command "lock stauts"`, `did you mean "lock status"?`, "convkit lock"},
		{[]string{"backup", "verfy", "a.tar.zst"}, `convkit backup takes no arguments, got "verfy"`, `did you mean "backup verify"?`, "convkit backup"},
		{[]string{"list", "--limt", "3"}, "unknown flag --limt", "did you mean --limit?", "convkit list"},
		{[]string{"list", "--jsno"}, "unknown flag --jsno", "did you mean --json?", "convkit list"},
		{[]string{"list", "--dat-dir", "/x"}, "unknown flag --dat-dir", "did you mean --data-dir?", "convkit list"},
		{[]string{"--jsno", "list"}, "unknown flag --jsno", "did you mean --json?", "convkit list"},
		{[]string{"help", "migrat"}, `no help for unknown command "migrat"`, `did you mean "migrate"?`, "convkit help"},
	}
	for _, tt := range tests {
		code, stdout, stderr := run(t, nil, tt.args...)
		want := "convkit: error: " + tt.msg + "\nconvkit: hint: " + tt.hint + "\nconvkit: hint: run '" + tt.helpOfWhat + " --help' for usage\n"
		if code != exitUsage || stdout != "" || stderr != want {
			t.Errorf("%q: exit %d, stdout %q, stderr\n%s\nwant exit 2 and\n%s", tt.args, code, stdout, stderr, want)
		}
	}
	// Nothing close: no guess.
	code, _, stderr := run(t, nil, "frobnicate")
	if code != exitUsage || strings.Contains(stderr, "did you mean") {
		t.Errorf("frobnicate: exit %d, %q", code, stderr)
	}
}

// TestHelpCommand: convkit help [command...] prints what --help prints.
func TestHelpCommand(t *testing.T) {
	for _, path := range [][]string{nil, {"migrate"}, {"backup", "verify"}, {"lock"}, {"migrate-sessions"}, {"help"}} {
		code, got, stderr := run(t, nil, append([]string{"help"}, path...)...)
		_, want, _ := run(t, nil, append(path, "--help")...)
		if code != exitOK || stderr != "" || got != want || !strings.Contains(got, "EXAMPLES:") {
			t.Errorf("help %q: exit %d, stderr %q; output differs from --help:\n%s\n---\n%s", path, code, stderr, got, want)
		}
	}
	code, _, stderr := run(t, nil, "help", "list", "extra")
	if code != exitUsage || !strings.Contains(stderr, `no help for "list extra": list has no subcommands`) {
		t.Errorf("help list extra: exit %d, %q", code, stderr)
	}
}

// TestRootHelpGroups: the program's help lists every command once, under
// its group, the groups in commandGroups' order.
func TestRootHelpGroups(t *testing.T) {
	_, help, _ := run(t, nil, "--help")
	sect := help[strings.Index(help, "COMMANDS:\n"):strings.Index(help, "GLOBAL OPTIONS:")]
	var groups []string
	seen := map[string]string{}
	group := ""
	for _, l := range strings.Split(strings.TrimSpace(sect), "\n")[1:] {
		switch {
		case strings.HasPrefix(l, "     "):
			name := strings.TrimRight(strings.Fields(l)[0], ",")
			if seen[name] != "" {
				t.Errorf("%s listed twice", name)
			}
			seen[name] = group
		case strings.HasPrefix(l, "   ") && strings.HasSuffix(l, ":"):
			group = strings.TrimSuffix(strings.TrimSpace(l), ":")
			groups = append(groups, group)
		}
	}
	var want []string
	for _, g := range commandGroups {
		want = append(want, g.name)
	}
	if !slices.Equal(groups, want) {
		t.Errorf("groups %q, want %q", groups, want)
	}
	e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, g: &globals{getenv: func(string) string { return "" }}}
	for _, c := range newApp(e).Commands {
		if c.Hidden {
			continue
		}
		if seen[c.Name] == "" || seen[c.Name] != c.Category {
			t.Errorf("%s is in group %q of the help, its category is %q", c.Name, seen[c.Name], c.Category)
		}
	}
	if seen["migrate"] != "migration" || seen["reindex"] != "store upkeep" || seen["export"] != "backup and transfer" ||
		seen["inspect"] != "inspection" || seen["completion"] != "setup" {
		t.Errorf("groups: %v", seen)
	}
}

// argBounds reads how many arguments a command takes from its ArgsUsage:
// "ID TITLE" two, "ID..." one or more, "[X]" optional, "A | B C"
// alternatives; an option written there ("--to FILE") is not an argument.
func argBounds(usage string) (lo, hi int) {
	lo, hi = math.MaxInt, 0
	for _, alt := range strings.Split(usage, " | ") {
		a, b, depth := 0, 0, 0
		words := strings.Fields(alt)
		for i := 0; i < len(words); i++ {
			w := words[i]
			if strings.HasPrefix(w, "-") && len(w) > 1 {
				i++ // its value
				continue
			}
			opens := strings.Count(w, "[")
			depth += opens
			if depth == 0 {
				a++
			}
			if strings.HasSuffix(strings.TrimRight(w, "]"), "...") {
				b = math.MaxInt
			} else if b < math.MaxInt {
				b++
			}
			depth -= strings.Count(w, "]")
		}
		lo, hi = min(lo, a), max(hi, b)
	}
	return lo, hi
}

func TestArgBounds(t *testing.T) {
	for _, tt := range []struct {
		usage  string
		lo, hi int
	}{{"", 0, 0}, {" ", 0, 0}, {"ID TITLE", 2, 2}, {"ID...", 1, math.MaxInt}, {"ID... --to FILE|-", 1, math.MaxInt},
		{"PATH | DIR | - | CONVERSATION [SESSION]", 1, 2}, {"[COMMAND [SUBCOMMAND]]", 0, 2}, {"bash|zsh|fish", 1, 1}} {
		if lo, hi := argBounds(tt.usage); lo != tt.lo || hi != tt.hi {
			t.Errorf("argBounds(%q) = %d, %d; want %d, %d", tt.usage, lo, hi, tt.lo, tt.hi)
		}
	}
}

// TestExamplesParse: every command has two to four examples, and each
// example's convkit words parse with the real command definitions to that
// command (or, for a group, one of its subcommands), with as many
// arguments as the command takes and option values it accepts.
func TestExamplesParse(t *testing.T) {
	e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, g: &globals{getenv: func(string) string { return "" }}}
	app := newApp(e)
	paths := map[string]bool{"": true}
	for _, n := range commandNodes(app) {
		paths[n.name()] = true
	}
	for p := range commandExamples {
		if !paths[p] {
			t.Errorf("commandExamples names %q, which is not a command", p)
		}
	}
	for p := range paths {
		ex := commandExamples[p]
		if len(ex) < 2 || len(ex) > 4 {
			t.Errorf("command %q has %d examples, want 2 to 4", p, len(ex))
		}
		for _, x := range ex {
			words, ok := convkitWords(x.line)
			if !ok || x.note == "" {
				t.Errorf("%q: example %q has no convkit invocation or no note", p, x.line)
				continue
			}
			got, code, stderr := parseOnly(t, words...)
			if code != exitOK {
				t.Errorf("example %q: exit %d: %s", x.line, code, stderr)
				continue
			}
			if p != "" && got.command != p && !strings.HasPrefix(got.command, p+" ") {
				t.Errorf("example %q of %q runs %q", x.line, p, got.command)
			}
			n := findPath(app.Commands, strings.Fields(got.command))
			if n == nil {
				t.Errorf("example %q: no command %q", x.line, got.command)
				continue
			}
			if lo, hi := argBounds(n.ArgsUsage); len(got.args) < lo || len(got.args) > hi {
				t.Errorf("example %q: %d argument(s); %s takes %q", x.line, len(got.args), got.command, n.ArgsUsage)
			}
			for flag, v := range got.flags {
				if ch := flagChoices(n.Flags, flag); ch != nil && !slices.Contains(ch, v) {
					t.Errorf("example %q: --%s %s is not one of %q", x.line, flag, v, ch)
				}
			}
		}
	}
}

// flagChoices are the choices of the flag name among flags (nil: any value).
func flagChoices(flags []ucli.Flag, name string) []string {
	for _, f := range flags {
		if fi := infoOf(f); slices.Contains(fi.names, name) {
			return fi.choices
		}
	}
	return nil
}

func TestSplitShell(t *testing.T) {
	for _, tt := range []struct {
		line string
		want []string
	}{
		{`convkit search '"a b" NOT c' --limit 5`, []string{"convkit", "search", `"a b" NOT c`, "--limit", "5"}},
		{`convkit rename x "it's \"done\""`, []string{"convkit", "rename", "x", `it's "done"`}},
		{`convkit man | man -l -`, []string{"convkit", "man"}},
		{`convkit -q migrate && convkit reindex`, []string{"convkit", "-q", "migrate"}},
		{`convkit completion bash > /etc/x`, []string{"convkit", "completion", "bash"}},
	} {
		if got, ok := splitShell(tt.line); !ok || !slices.Equal(got, tt.want) {
			t.Errorf("splitShell(%q) = %q, %v; want %q", tt.line, got, ok, tt.want)
		}
	}
	if _, ok := splitShell(`convkit 'open`); ok {
		t.Error("an unterminated quote split")
	}
	if got, ok := convkitWords(`zstd -dc f | convkit inspect -`); !ok || !slices.Equal(got, []string{"inspect", "-"}) {
		t.Errorf("convkitWords = %q, %v", got, ok)
	}
}

// findPath finds the command at path among cmds.
func findPath(cmds []*ucli.Command, path []string) *ucli.Command {
	var c *ucli.Command
	for _, name := range path {
		if c = findCommand(cmds, name); c == nil {
			return nil
		}
		cmds = c.Subcommands
	}
	return c
}

// splitShell splits a shell line into words, as sh would for what the
// examples use: blanks separate words, single and double quotes group
// them (a backslash escapes in double quotes). It stops at the first
// operator (|, >, <, &&, ;): the rest is another command's. ok is false
// for an unterminated quote.
func splitShell(line string) (words []string, ok bool) {
	var cur strings.Builder
	inWord := false
	flush := func() {
		if inWord {
			words = append(words, cur.String())
			cur.Reset()
			inWord = false
		}
	}
	for i := 0; i < len(line); i++ {
		ch := line[i]
		switch {
		case ch == ' ' || ch == '\t':
			flush()
		case ch == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, false
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case ch == '"':
			i++
			for ; i < len(line) && line[i] != '"'; i++ {
				if line[i] == '\\' && i+1 < len(line) {
					i++
				}
				cur.WriteByte(line[i])
			}
			if i >= len(line) {
				return nil, false
			}
			inWord = true
		case !inWord && strings.ContainsRune("|<>;&", rune(ch)):
			flush()
			return words, true
		default:
			cur.WriteByte(ch)
			inWord = true
		}
	}
	flush()
	return words, true
}

// convkitWords are the words of an example's convkit invocation, after
// the program's name: an example may start with another command piping
// into convkit (zstd -dc F | convkit inspect -), and may end with one.
func convkitWords(line string) ([]string, bool) {
	for _, part := range strings.Split(line, "|") {
		words, ok := splitShell(strings.TrimSpace(part))
		if !ok {
			return nil, false
		}
		if len(words) > 0 && words[0] == progName {
			return words[1:], true
		}
	}
	return nil, false
}
