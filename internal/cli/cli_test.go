package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/store"
)

// run calls Main in-process with an environment holding only env.
func run(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string { return env[k] }
	code = Main(context.Background(), append([]string{"convkit"}, args...), strings.NewReader(""), &out, &errOut, getenv)
	return code, out.String(), errOut.String()
}

func TestMainUsageErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"no command", nil},
		{"unknown command", []string{"frobnicate"}},
		{"unknown subcommand", []string{"lock", "frobnicate"}},
		{"group without subcommand", []string{"lock"}},
		{"unknown root flag", []string{"--frobnicate", "version"}},
		{"unknown command flag", []string{"version", "--frobnicate"}},
		{"flag of another command", []string{"version", "--limit", "3"}},
		{"bad duration", []string{"--lock-timeout", "soon", "version"}},
		{"negative duration", []string{"--lock-timeout", "-1s", "version"}},
		{"missing flag value", []string{"--data-dir"}},
		{"extra argument", []string{"version", "extra"}},
		{"argument to a command that takes none", []string{"lock", "status", "x", "--json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := run(t, nil, tt.args...)
			if code != exitUsage {
				t.Errorf("exit code = %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			if stdout != "" {
				t.Errorf("stdout = %q, want nothing", stdout)
			}
			if !strings.HasPrefix(stderr, "convkit: error: ") || !strings.Contains(stderr, "--help' for usage\n") {
				t.Errorf("stderr = %q, want an error line and a usage hint", stderr)
			}
		})
	}
}

func TestMainHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"lock", "--help"}, {"lock", "status", "-h"}} {
		code, stdout, stderr := run(t, nil, args...)
		if code != exitOK || stderr != "" || !strings.Contains(stdout, "EXIT STATUS:") {
			t.Errorf("%q: code %d, stderr %q, stdout %q; want 0, no stderr, help with EXIT STATUS on stdout",
				args, code, stderr, stdout)
		}
	}
}

// TestHelpEndsWithExitStatus: the help of the program and of every command
// ends with the EXIT STATUS table, after the options (docs/CLI.md).
func TestHelpEndsWithExitStatus(t *testing.T) {
	e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, g: &globals{getenv: func(string) string { return "" }}}
	helps := [][]string{{"--help"}}
	for _, n := range commandNodes(newApp(e)) {
		helps = append(helps, append(strings.Fields(n.name()), "--help"))
	}
	for _, args := range helps {
		code, stdout, _ := run(t, nil, args...)
		i := strings.LastIndex(stdout, "\nEXIT STATUS:\n")
		if code != exitOK || i < 0 || !strings.HasSuffix(stdout, "130  interrupted\n") || strings.Contains(stdout[i:], "OPTIONS:") {
			t.Errorf("%q: exit %d; want the help to end with its EXIT STATUS section:\n%s", args, code, stdout)
		}
		if strings.Count(stdout, "EXIT STATUS:") != 1 {
			t.Errorf("%q: EXIT STATUS %d times", args, strings.Count(stdout, "EXIT STATUS:"))
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"--version", "list"}} {
		code, stdout, stderr := run(t, nil, args...)
		if want := "convkit " + buildVersion() + "\n"; code != exitOK || stdout != want || stderr != "" {
			t.Errorf("%q: code %d, stdout %q, stderr %q; want 0, %q, nothing", args, code, stdout, stderr, want)
		}
	}

	// --json carries the module versions and the revision from the build
	// information.
	defer func(f func() (*debug.BuildInfo, bool)) { readBuildInfo = f }(readBuildInfo)
	readBuildInfo = func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.26.8",
			Main: debug.Module{Path: "github.com/convkit/convkit", Version: "v1.2.3", Sum: "h1:main"},
			Deps: []*debug.Module{{Path: "github.com/urfave/cli/v2", Version: "v2.27.7", Sum: "h1:x"},
				{Path: "example.com/old", Version: "v1.0.0", Replace: &debug.Module{Path: "../old", Version: "(devel)"}}},
			Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "0123abcd"},
				{Key: "vcs.time", Value: "2026-09-01T00:00:00Z"}, {Key: "vcs.modified", Value: "true"}},
		}, true
	}
	for _, args := range [][]string{{"--json", "version"}, {"version", "--json"}} {
		code, stdout, stderr := run(t, nil, args...)
		if code != exitOK || stderr != "" {
			t.Fatalf("%q: code %d, stderr %q", args, code, stderr)
		}
		want := `{"schemaVersion":2,"version":"v1.2.3","go":"go1.26.8","platform":"` + runtime.GOOS + "/" + runtime.GOARCH + `",` +
			`"module":{"path":"github.com/convkit/convkit","version":"v1.2.3","sum":"h1:main"},` +
			`"vcs":{"system":"git","revision":"0123abcd","time":"2026-09-01T00:00:00Z","modified":true},` +
			`"dependencies":[{"path":"github.com/urfave/cli/v2","version":"v2.27.7","sum":"h1:x"},` +
			`{"path":"example.com/old","version":"v1.0.0","replace":{"path":"../old","version":"(devel)"}}]}` + "\n"
		if stdout != want {
			t.Errorf("%q:\n got %s\nwant %s", args, stdout, want)
		}
	}
	readBuildInfo = func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{Main: debug.Module{Path: "m", Version: "(devel)"}}, true
	}
	code, stdout, _ := run(t, nil, "--json", "version")
	var got versionResult
	if err := json.Unmarshal([]byte(stdout), &got); err != nil || code != 0 {
		t.Fatalf("--json version: %d, %v in %q", code, err, stdout)
	}
	if got.Version != "devel" || got.VCS != nil {
		t.Errorf("without a version or revision: %+v, want version devel and vcs null", got)
	}

	// A build that recorded only the revision: a pseudo-version of it.
	for _, tc := range []struct {
		settings []debug.BuildSetting
		want     string
	}{
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "0000e225ba5434f5e968f1066bc3619406206db6"}, {Key: "vcs.time", Value: "2026-12-07T01:26:53Z"},
			{Key: "vcs.modified", Value: "false"}}, "v0.0.0-20261207012653-0000e225ba54"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "0000e225ba5434f5e968f1066bc3619406206db6"}, {Key: "vcs.modified", Value: "true"}},
			"v0.0.0-00000000000000-0000e225ba54+dirty"},
		{[]debug.BuildSetting{{Key: "vcs.revision", Value: "0123"}}, "devel"},
	} {
		readBuildInfo = func() (*debug.BuildInfo, bool) {
			return &debug.BuildInfo{Main: debug.Module{Path: "m", Version: "(devel)"}, Settings: tc.settings}, true
		}
		if code, stdout, _ := run(t, nil, "version"); code != 0 || stdout != "convkit "+tc.want+"\n" {
			t.Errorf("revision only %v: %q, want %q", tc.settings, stdout, tc.want)
		}
	}
}

func TestLockStatusUsesInjectedEnvironment(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := run(t, map[string]string{"CONVKIT_DATA_DIR": dir}, "--json", "lock", "status")
	if code != exitOK || stderr != "" {
		t.Fatalf("code %d, stderr %q", code, stderr)
	}
	want := fmt.Sprintf(`{"schemaVersion":2,"path":%q,"held":false,"holder":null}`+"\n", filepath.Join(dir, "runtime.lock"))
	if stdout != want {
		t.Errorf("stdout = %q, want %q", stdout, want)
	}
}

func TestExitCode(t *testing.T) {
	locked := &store.LockedError{Status: store.Status{Path: "/d/runtime.lock", Holder: &store.Holder{PID: 7}}}
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"plain", errors.New("boom"), 1},
		{"usage", &exitError{err: errors.New("bad"), code: exitUsage}, 2},
		{"wrapped usage", fmt.Errorf("x: %w", &exitError{err: errors.New("bad"), code: exitUsage}), 2},
		{"partial", partialf("2 conversations skipped"), 3},
		{"wrapped partial", fmt.Errorf("reindex: %w", partialf("skipped")), 3},
		{"ErrLocked", store.ErrLocked, 11},
		{"wrapped ErrLocked", fmt.Errorf("reindex: %w", store.ErrLocked), 11},
		{"LockedError", locked, 11},
		{"canceled", context.Canceled, 130},
		{"wrapped canceled", fmt.Errorf("migrate: %w", context.Canceled), 130},
		{"locked wait interrupted", fmt.Errorf("%w (%w)", locked, context.Canceled), 130},
		{"deadline", context.DeadlineExceeded, 1},
	}
	for _, tt := range tests {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("%s: exitCode(%v) = %d, want %d", tt.name, tt.err, got, tt.want)
		}
	}
}

type hintedError struct{}

func (hintedError) Error() string { return "no such conversation" }
func (hintedError) Hint() string  { return "convkit list shows them" }

func TestReport(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		json   bool
		want   string
		wantRC int
	}{
		{"nil", nil, true, "", 0},
		{"plain", errors.New("boom"), false, "convkit: error: boom\n", 1},
		{"hint", fmt.Errorf("inspect: %w", hintedError{}), false,
			"convkit: error: inspect: no such conversation\nconvkit: hint: convkit list shows them\n", 1},
		{"locked default hint", fmt.Errorf("reindex: %w", store.ErrLocked), false,
			"convkit: error: reindex: runtime.lock is held by another process\nconvkit: hint: " + lockedHint + "\n", 11},
		{"interrupted", context.Canceled, false, "convkit: error: interrupted\n", 130},
		{"usage", &exitError{err: errors.New(`unexpected "-x"`), code: exitUsage, hint: "flags must come before arguments", command: "convkit lock status"}, false,
			"convkit: error: unexpected \"-x\"\nconvkit: hint: flags must come before arguments\n" +
				"convkit: hint: run 'convkit lock status --help' for usage\n", 2},
		{"partial json", partialf("1 conversation skipped"), true,
			"convkit: error: 1 conversation skipped\n" +
				`{"message_type":"exit_error","code":3,"message":"1 conversation skipped"}` + "\n", 3},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		rc := report(&buf, tt.err, tt.json)
		if rc != tt.wantRC || buf.String() != tt.want {
			t.Errorf("%s: report = %d, %q; want %d, %q", tt.name, rc, buf.String(), tt.wantRC, tt.want)
		}
	}
}

// TestCommandTree checks every command as app.go completes it: no command
// redefines a global flag, none uses urfave's Required (its error bypasses
// the usage mapping and prints help on stdout), every Description ends with
// the exit status table.
func TestCommandTree(t *testing.T) {
	e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, g: &globals{getenv: func(string) string { return "" }}}
	app := newApp(e)
	global := map[string]bool{}
	for _, f := range app.Flags {
		for _, n := range f.Names() {
			global[n] = true
		}
	}
	// The grammar must know whether the word after a flag is its value
	// before it knows which command the flag belongs to: a name takes a
	// value in every command or in none.
	takes := map[string]bool{}
	var walk func(c *ucli.Command)
	walk = func(c *ucli.Command) {
		for _, f := range c.Flags {
			for _, n := range f.Names() {
				if global[n] {
					t.Errorf("command %s redefines global flag %s", c.Name, dashed(n))
				}
				v := infoOf(f).takesValue
				if prev, seen := takes[n]; seen && prev != v {
					t.Errorf("flag %s takes a value in one command and not in another (%s)", dashed(n), c.Name)
				}
				takes[n] = v
			}
			if r, ok := f.(ucli.RequiredFlag); ok && r.IsRequired() {
				t.Errorf("command %s: flag %s is Required; check it in the Action with usagef", c.Name, f.Names()[0])
			}
		}
		if c.OnUsageError == nil {
			t.Errorf("command %s: no OnUsageError", c.Name)
		}
		for _, sub := range c.Subcommands {
			walk(sub)
		}
	}
	for _, c := range app.Commands {
		walk(c)
	}
}

func TestDataDir(t *testing.T) {
	tests := []struct {
		name string
		flag string
		env  map[string]string
		want string
	}{
		{"flag wins", "/flag", map[string]string{"CONVKIT_DATA_DIR": "/env", "XDG_DATA_HOME": "/xdg", "HOME": "/home/u"}, "/flag"},
		{"env", "", map[string]string{"CONVKIT_DATA_DIR": "/env", "XDG_DATA_HOME": "/xdg", "HOME": "/home/u"}, "/env"},
		{"xdg", "", map[string]string{"XDG_DATA_HOME": "/xdg", "HOME": "/home/u"}, "/xdg/convkit"},
		{"home", "", map[string]string{"HOME": "/home/u"}, "/home/u/.local/share/convkit"},
	}
	for _, tt := range tests {
		g := &globals{DataDir: tt.flag, getenv: func(k string) string { return tt.env[k] }}
		got, err := g.dataDir()
		if err != nil || got != tt.want {
			t.Errorf("%s: dataDir() = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
	g := &globals{getenv: func(string) string { return "" }}
	if got, err := g.dataDir(); err == nil {
		t.Errorf("nothing set: dataDir() = %q, want an error", got)
	}
}

func TestProgressOnlyOnTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, w := range []io.Writer{&bytes.Buffer{}, f} {
		e := &env{stderr: w, g: &globals{}}
		p := e.newProgress("test", "logs", 10)
		if p != nil {
			t.Errorf("newProgress on %T = %T, want no bar off a terminal", w, p)
		}
		p.SetTotal(20)
		p.Add(5)
		p.Finish()
	}
	if info, _ := f.Stat(); info.Size() != 0 {
		t.Errorf("progress wrote %d bytes to a file", info.Size())
	}
	// On a terminal, but --quiet or --json: no bar either.
	yes := func(any) bool { return true }
	for _, g := range []*globals{{Quiet: true}, {JSON: true}} {
		var buf bytes.Buffer
		e := &env{stderr: &buf, g: g, isTerminal: yes}
		p := e.newProgress("test", "logs", 10)
		p.Add(5)
		p.Finish()
		if buf.Len() != 0 {
			t.Errorf("%+v: progress wrote %q", *g, buf.String())
		}
	}
}

// TestProgressText: what a bar says after the bar: what it counts, how
// many of how many, and only with a rate to go by the rate and the time
// left; sizes humanised.
func TestProgressText(t *testing.T) {
	for _, tt := range []struct {
		what    string
		u       unit
		done    int64
		total   int64
		elapsed time.Duration
		rate    float64
		known   bool
		want    string
	}{
		{"migrate", "logs", 569, 4744, 1200 * time.Millisecond, 0, false, "migrate: 569/4744 logs [1s]"},
		{"migrate", "logs", 1660, 4744, 11 * time.Second, 145.3, true, "migrate: 1660/4744 logs, 145 logs/s [11s, 21s left]"},
		{"reindex", "conversations", 3, 400, 20 * time.Second, 0.1, true, "reindex: 3/400 conversations, 6.0 conversations/min [20s, 1h6m0s left]"},
		{"backup", "files archived", 3812, 0, 4 * time.Second, 912, true, "backup: 3812 files archived, 912 files archived/s [4s]"},
		{"verify", unitBytes, 812 << 20, 1331 << 20, 3 * time.Second, 231 << 20, true, "verify: 812 MiB/1.30 GiB, 231 MiB/s [3s, 2s left]"},
		{"import", unitBytes, 5954723, 0, 0, 0, false, "import: 5.68 MiB [0s]"},
		{"migrate", "logs", 10, 10, 5 * time.Second, 2, true, "migrate: 10/10 logs, 2 logs/s [5s]"},
	} {
		if got := progressText(tt.what, tt.u, tt.done, tt.total, tt.elapsed, tt.rate, tt.known); got != tt.want {
			t.Errorf("progressText(%s, %d/%d) = %q, want %q", tt.what, tt.done, tt.total, got, tt.want)
		}
	}
}

// fakeClock is a clock a test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newTestBar(w io.Writer, what string, u unit, total int64, c *fakeClock) *barReporter {
	r := newBarReporter(w, what, u, total)
	r.now = c.now
	r.start = c.now()
	r.line.bar = r
	return r
}

// lastDrawn is the bar as the terminal shows it last: the text after the
// last carriage return that is not blank.
func lastDrawn(out string) string {
	parts := strings.Split(out, "\r")
	for i := len(parts) - 1; i >= 0; i-- {
		if strings.TrimSpace(parts[i]) != "" {
			return strings.TrimSpace(parts[i])
		}
	}
	return ""
}

// TestBarReporter: a bar shows no rate and no time left until it has
// rateAfter of progress to go by, then the rate of the latest progress;
// finished, it erases itself.
func TestBarReporter(t *testing.T) {
	var buf bytes.Buffer
	c := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	p := newTestBar(&buf, "migrate", "logs", 0, c)
	c.advance(5 * time.Second) // the job looks for its logs first
	p.SetTotal(100)
	for range 4 {
		c.advance(500 * time.Millisecond)
		p.Add(1)
	}
	if got := lastDrawn(buf.String()); !regexp.MustCompile(`^\d+% \|[^|]*\| +migrate: 4/100 logs \[7s\]$`).MatchString(got) {
		t.Errorf("after 1.5 s of progress the bar shows %q: want the count, no rate, no time left", got)
	}
	for range 4 {
		c.advance(500 * time.Millisecond)
		p.Add(1)
	}
	// 8 logs in the 3.5 s since the first began: 2.3 a second.
	if got := lastDrawn(buf.String()); !strings.HasSuffix(got, "migrate: 8/100 logs, 2 logs/s [9s, 40s left]") {
		t.Errorf("after 3.5 s of progress the bar shows %q: want the rate and the time left", got)
	}
	p.Finish()
	out := buf.String()
	parts := strings.Split(out, "\r")
	if len(parts) < 3 || strings.TrimSpace(parts[len(parts)-2]) != "" || parts[len(parts)-1] != "" {
		t.Errorf("bar output %q does not end by clearing the line", out)
	}
	buf.Reset()
	p.Add(1)
	if buf.Len() != 0 {
		t.Errorf("a finished bar drew %q", buf.String())
	}

	// A rate over the latest progress: a job that slows down says so.
	buf.Reset()
	p = newTestBar(&buf, "reindex", "conversations", 2000, c)
	for range 20 {
		c.advance(time.Second)
		p.Add(50)
	}
	for range 12 {
		c.advance(time.Second)
		p.Add(1)
	}
	if got := lastDrawn(buf.String()); !strings.HasSuffix(got, "reindex: 1012/2000 conversations, 1 conversations/s [32s, 16m28s left]") {
		t.Errorf("after slowing down the bar shows %q: want the rate of the last 10 s, not the average", got)
	}

	// Bytes, humanised; an unknown total: a spinner and the count.
	buf.Reset()
	p = newTestBar(&buf, "verify", unitBytes, 4<<20, c)
	p.Add(1 << 20)
	if got := lastDrawn(buf.String()); !strings.HasSuffix(got, "verify: 1.00 MiB/4.00 MiB [0s]") {
		t.Errorf("byte bar %q", got)
	}
	buf.Reset()
	p = newTestBar(&buf, "backup", "files archived", 0, c)
	p.Add(3)
	if got := lastDrawn(buf.String()); !strings.HasSuffix(got, "backup: 3 files archived [0s]") || strings.Contains(got, "%") {
		t.Errorf("bar of unknown total %q", got)
	}
}

// screen renders what a terminal shows of out: a carriage return goes
// back to the line's start, a newline to the next line.
func screen(out string) []string {
	var lines []string
	var cur []rune
	col := 0
	for _, r := range out {
		switch r {
		case '\r':
			col = 0
		case '\n':
			lines = append(lines, strings.TrimRight(string(cur), " "))
			cur, col = nil, 0
		default:
			if col < len(cur) {
				cur[col] = r
			} else {
				cur = append(cur, r)
			}
			col++
		}
	}
	return append(lines, strings.TrimRight(string(cur), " "))
}

// TestBarLeavesLinesAlone: output written to the terminal while a bar is
// drawn clears the bar first, so no line shows both; a line written in
// two parts keeps the bar away until it ends.
func TestBarLeavesLinesAlone(t *testing.T) {
	var term bytes.Buffer
	c := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	p := newTestBar(&term, "migrate", "logs", 3, c)
	tw := &termWriter{w: &term, line: p.line}
	for i := 1; i <= 3; i++ {
		c.advance(time.Second)
		p.Add(1)
		fmt.Fprintf(tw, "[%d/3] \"log-%d\" converted\n", i, i)
		c.advance(time.Second)
		io.WriteString(tw, "a line in ")
		p.Add(0) // the bar must wait
		c.advance(time.Second)
		io.WriteString(tw, "two parts\n")
	}
	p.Finish()
	lines := screen(term.String())
	for _, l := range lines {
		if strings.Contains(l, "|") && (strings.Contains(l, "converted") || strings.Contains(l, "parts")) {
			t.Errorf("a line shows the bar and other output: %q", l)
		}
	}
	want := []string{`[1/3] "log-1" converted`, "a line in two parts", `[2/3] "log-2" converted`, "a line in two parts", `[3/3] "log-3" converted`, "a line in two parts", ""}
	if !slices.Equal(lines, want) {
		t.Errorf("the terminal shows\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// fullWriter fails every write, as stdout on a full disk does.
type fullWriter struct{}

func (fullWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestLostResultsFail: a command whose text results could not be written
// must not exit 0, whichever way it renders them.
func TestLostResultsFail(t *testing.T) {
	dir := t.TempDir()
	getenv := func(k string) string { return map[string]string{"CONVKIT_DATA_DIR": dir}[k] }
	for _, args := range [][]string{{"version"}, {"lock", "status"}, {"--json", "lock", "status"}} {
		var errOut bytes.Buffer
		code := Main(context.Background(), append([]string{"convkit"}, args...), strings.NewReader(""), fullWriter{}, &errOut, getenv)
		if code != exitFailure || !strings.Contains(errOut.String(), "no space left on device") {
			t.Errorf("%v: code %d, stderr %q; want %d naming the write error", args, code, errOut.String(), exitFailure)
		}
	}
}
