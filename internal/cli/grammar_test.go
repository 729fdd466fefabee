package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"
)

// parsed is what a command's Action saw: the command, its set flags with
// their values, its arguments and the global flags.
type parsed struct {
	command string
	flags   map[string]string
	args    []string
	dataDir string
	json    bool
	quiet   bool
}

// parseOnly runs the real grammar and urfave's parser on args, with every
// Action replaced by one that records what it was given.
func parseOnly(t *testing.T, args ...string) (parsed, int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := &env{stdout: &out, stderr: &errOut, g: &globals{getenv: func(string) string { return "" }}}
	app := newApp(e)
	var got parsed
	var record func(cmds []*ucli.Command)
	record = func(cmds []*ucli.Command) {
		for _, c := range cmds {
			c.Action = func(c *ucli.Context) error {
				got = parsed{command: strings.TrimPrefix(c.Command.HelpName, "convkit "), flags: map[string]string{},
					args: c.Args().Slice(), dataDir: e.g.DataDir, json: e.g.JSON, quiet: e.g.Quiet}
				for _, f := range c.Command.Flags {
					name := f.Names()[0]
					if name == "help" || !c.IsSet(name) {
						continue
					}
					switch f.(type) {
					case *ucli.StringSliceFlag:
						got.flags[name] = fmt.Sprint(c.StringSlice(name))
					case *ucli.GenericFlag:
						got.flags[name] = fmt.Sprint(c.Generic(name))
					default:
						got.flags[name] = fmt.Sprint(c.Value(name))
					}
				}
				return nil
			}
			record(c.Subcommands)
		}
	}
	record(app.Commands)
	norm, inv := normalizeArgs(app, append([]string{"convkit"}, args...))
	e.inv = inv
	if inv.missing != "" {
		return got, report(&errOut, &exitError{err: errors.New("flag needs an argument: " + inv.missing), code: exitUsage}, false), errOut.String()
	}
	code := report(&errOut, app.RunContext(context.Background(), norm), false)
	return got, code, errOut.String()
}

// grammarCases is one invocation of every command: an option (one that
// takes a value where the command has one) and an argument where the
// command takes arguments.
var grammarCases = []struct {
	command string   // the command path
	opt     []string // an option, with its value
	flag    string   // the option's name, and the value it must get
	value   string
	arg     string // an argument ("" when the command takes none)
}{
	{"version", nil, "", "", ""},
	{"migrate", []string{"--jobs", "2"}, "jobs", "2", ""},
	{"prune", []string{"--sessions-dir", "/sessions"}, "sessions-dir", "/sessions", ""},
	{"list", []string{"--limit", "5"}, "limit", "5", ""},
	{"inspect", []string{"--type", "tool/*"}, "type", "[tool/*]", "log.v4.jsonl"},
	{"reindex", []string{"--jobs", "3"}, "jobs", "3", ""},
	{"search", []string{"--limit", "4"}, "limit", "4", "retry"},
	{"rename", []string{"--config", "/etc/runtime.toml"}, "config", "/etc/runtime.toml", "conv-1"},
	{"archive", []string{"--config", "/etc/runtime.toml"}, "config", "/etc/runtime.toml", "conv-1"},
	{"unarchive", []string{"--config", "/etc/runtime.toml"}, "config", "/etc/runtime.toml", "conv-1"},
	{"delete", []string{"--force"}, "force", "true", "conv-1"},
	{"repair", []string{"--dry-run"}, "dry-run", "true", ""},
	{"backup", []string{"--to", "/backups"}, "to", "/backups", ""},
	{"backup verify", []string{"--work-dir", "/scratch"}, "work-dir", "/scratch", "a.tar.zst"},
	{"backup list", nil, "", "", "/backups"},
	{"backup latest", []string{"--max-age", "26h"}, "max-age", "26h", "/backups"},
	{"restore", []string{"--to", "/restored"}, "to", "/restored", "a.tar.zst"},
	{"export", []string{"--to", "out.tar.zst"}, "to", "out.tar.zst", "conv-1"},
	{"import", []string{"--on-conflict", "skip"}, "on-conflict", "skip", "in.tar.zst"},
	{"lock status", nil, "", "", ""},
	{"fixtures", []string{"--to", "/store"}, "to", "/store", ""},
	{"demo", []string{"--to", "/demo"}, "to", "/demo", ""},
	{"completion", nil, "", "", "bash"},
	{"man", nil, "", "", ""},
	{"help", nil, "", "", "list"},
}

// TestGrammar runs every command with the global flags before and after
// the command, the option before and after the argument, and "--" before
// an argument that starts with "-": each must parse to the same thing.
func TestGrammar(t *testing.T) {
	globals := []string{"--data-dir", "/data", "--json", "-q"}
	for _, tc := range grammarCases {
		path := strings.Fields(tc.command)
		arg := []string{}
		if tc.arg != "" {
			arg = []string{tc.arg}
		}
		cat := func(parts ...[]string) []string { return slices.Concat(parts...) }
		variants := map[string][]string{
			"globals before the command":           cat(globals, path, tc.opt, arg),
			"globals after the command":            cat(path, globals, tc.opt, arg),
			"globals after the arguments":          cat(path, tc.opt, arg, globals),
			"globals between command and argument": cat(path, globals[:2], tc.opt, arg, globals[2:]),
		}
		if tc.arg != "" {
			variants["option after the argument"] = cat(globals, path, arg, tc.opt)
			variants["option and globals after the argument"] = cat(path, arg, tc.opt, globals)
		}
		for name, args := range variants {
			got, code, stderr := parseOnly(t, args...)
			if code != 0 {
				t.Errorf("%s: %q: exit %d: %s", name, args, code, stderr)
				continue
			}
			want := parsed{command: tc.command, flags: map[string]string{}, args: arg, dataDir: "/data", json: true, quiet: true}
			if tc.flag != "" {
				want.flags[tc.flag] = tc.value
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: %q parsed as\n %+v\nwant\n %+v", name, args, got, want)
			}
		}
		// After "--", an argument that starts with "-" is an argument, and
		// so are "--json" and "-h".
		args := cat(path, tc.opt, []string{"--json", "--", "-x.v4.jsonl", "--json", "-h"})
		got, code, stderr := parseOnly(t, args...)
		want := parsed{command: tc.command, flags: map[string]string{}, args: []string{"-x.v4.jsonl", "--json", "-h"}, json: true}
		if tc.flag != "" {
			want.flags[tc.flag] = tc.value
		}
		if code != 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("%q: exit %d (%s), parsed as\n %+v\nwant\n %+v", args, code, stderr, got, want)
		}
	}
}

// TestGrammarCoversEveryCommand: every command that runs is in
// grammarCases.
func TestGrammarCoversEveryCommand(t *testing.T) {
	e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, g: &globals{getenv: func(string) string { return "" }}}
	covered := map[string]bool{}
	for _, tc := range grammarCases {
		covered[tc.command] = true
	}
	for _, n := range commandNodes(newApp(e)) {
		if len(n.cmd.Subcommands) > 0 && n.name() != "backup" {
			continue // a group: it only refuses a missing subcommand
		}
		if !covered[n.name()] {
			t.Errorf("command %q is not in grammarCases", n.name())
		}
	}
}

// TestGrammarValues: a value that looks like a flag or a command stays the
// flag's value, and --flag=value works anywhere.
func TestGrammarValues(t *testing.T) {
	tests := []struct {
		args []string
		want parsed
	}{
		{[]string{"backup", "--to", "-"}, parsed{command: "backup", flags: map[string]string{"to": "-"}, args: []string{}}},
		{[]string{"export", "c1", "--to", "-", "c2"}, parsed{command: "export", flags: map[string]string{"to": "-"}, args: []string{"c1", "c2"}}},
		{[]string{"export", "--to=-", "c1"}, parsed{command: "export", flags: map[string]string{"to": "-"}, args: []string{"c1"}}},
		{[]string{"--data-dir", "list", "list"}, parsed{command: "list", flags: map[string]string{}, args: []string{}, dataDir: "list"}},
		{[]string{"inspect", "-", "--data-dir=/d"}, parsed{command: "inspect", flags: map[string]string{}, args: []string{"-"}, dataDir: "/d"}},
		{[]string{"restore", "-", "--to", "--force"}, parsed{command: "restore", flags: map[string]string{"to": "--force"}, args: []string{"-"}}},
		{[]string{"import", "x", "--map-cwd", "/a=/b", "--map-cwd", "/c=/d"},
			parsed{command: "import", flags: map[string]string{"map-cwd": "/a=/b /c=/d"}, args: []string{"x"}}},
		{[]string{"migrate-sessions", "--jobs", "4"}, parsed{command: "migrate", flags: map[string]string{"jobs": "4"}, args: []string{}}},
		// A command name after the command is an argument.
		{[]string{"search", "list"}, parsed{command: "search", flags: map[string]string{}, args: []string{"list"}}},
		{[]string{"backup", "verify", "verify"}, parsed{command: "backup verify", flags: map[string]string{}, args: []string{"verify"}}},
	}
	for _, tt := range tests {
		got, code, stderr := parseOnly(t, tt.args...)
		if code != 0 || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: exit %d (%s), parsed as\n %+v\nwant\n %+v", tt.args, code, stderr, got, tt.want)
		}
	}
}

// TestGrammarErrors: what the grammar cannot place is a usage error, and a
// hint about an option of another command keeps the option's value.
func TestGrammarErrors(t *testing.T) {
	tests := []struct {
		args   []string
		stderr []string
	}{
		{[]string{"backup", "verify", "a.tar.zst", "--keep", "7"}, []string{
			"convkit: error: unknown flag --keep for convkit backup verify\n",
			"convkit: hint: --keep is an option of convkit backup, not of convkit backup verify: convkit backup --keep 7 ...\n"}},
		{[]string{"lock", "status", "--to", "/srv/backups"}, []string{
			"convkit: error: unknown flag --to for convkit lock status\n",
			"convkit backup --to /srv/backups ...\n"}},
		{[]string{"list", "--frobnicate"}, []string{"convkit: error: unknown flag --frobnicate\n", "run 'convkit list --help'"}},
		{[]string{"--frobnicate"}, []string{"convkit: error: unknown flag --frobnicate\n"}},
		{[]string{"list", "--limit"}, []string{"convkit: error: flag needs an argument: --limit\n"}},
		{[]string{"inspect", "--data-dir"}, []string{"convkit: error: flag needs an argument: --data-dir\n"}},
		{[]string{"--lock-timeout", "soon", "list"}, []string{`invalid value "soon" for flag --lock-timeout`}},
	}
	for _, tt := range tests {
		_, code, stderr := parseOnly(t, tt.args...)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want 2; stderr %q", tt.args, code, stderr)
		}
		for _, s := range tt.stderr {
			if !strings.Contains(stderr, s) {
				t.Errorf("%q: stderr %q does not say %q", tt.args, stderr, s)
			}
		}
	}
}

// TestHelpAnywhere: -h and --help before or after the command, its options
// and its arguments print the command's help on stdout and exit 0; after
// "--" they are arguments.
func TestHelpAnywhere(t *testing.T) {
	for _, args := range [][]string{
		{"inspect", "--help"}, {"--help", "inspect"}, {"inspect", "log.jsonl", "-h"}, {"inspect", "--stats", "log.jsonl", "--help"},
		{"--json", "inspect", "-h", "--stats"}, {"backup", "verify", "a.tar.zst", "--help"}, {"lock", "status", "-h"},
	} {
		code, stdout, stderr := run(t, nil, args...)
		name := "inspect"
		if args[0] == "backup" {
			name = "backup verify"
		} else if args[0] == "lock" {
			name = "lock status"
		}
		if code != 0 || stderr != "" || !strings.Contains(stdout, "convkit "+name+" - ") || !strings.Contains(stdout, "EXIT STATUS:") {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want the help of %s", args, code, stderr, stdout, name)
		}
	}
	code, stdout, stderr := run(t, map[string]string{"CONVKIT_DATA_DIR": t.TempDir()}, "inspect", "--", "--help")
	if code == 0 || strings.Contains(stdout, "EXIT STATUS") || !strings.Contains(stderr, `"--help"`) {
		t.Errorf("inspect -- --help: exit %d, stdout %q, stderr %q; want --help read as a log name", code, stdout, stderr)
	}
}
