package hostile

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// hcase is one hostile input and what convkit must do with it.
type hcase struct {
	name string
	// setup builds the hostile thing under f.root and returns the command
	// to run (after the global --data-dir). It may skip the case.
	setup func(f *fx) []string
	// code is the exit code the command must return.
	code int
	// stderr and stdout are substrings the streams must hold ({vars}
	// expanded). stderr names the file, the position and what was
	// expected.
	stderr, stdout []string
	// allow lists the changes on disk the command may make: "+GLOB" (may
	// appear), "~GLOB" (may change), "-GLOB" (may vanish); GLOB is a path
	// under the root, or a {var} path. Anything else that changed fails the
	// case. want lists the changes that must happen (same syntax).
	allow, want []string
	// check runs extra assertions after the command.
	check func(f *fx, r result)
	// bare: the case starts from an empty root, without the base store.
	bare bool
	// noDataDir: the command runs without --data-dir, so the data
	// directory is the environment's ($CONVKIT_DATA_DIR in f.env).
	noDataDir bool
}

// Documented outputs that several cases allow.
var (
	// A writing command replaces runtime.lock's content with its holder
	// record (docs/FORMAT.md, runtime.lock).
	lockRecord = "~data/runtime.lock"
	// migrate's private report folder in $TMPDIR (docs/CLI.md, migrate).
	migrateReport = []string{"+tmp/convkit-migrate-v4-*", "+tmp/convkit-migrate-v4-*/migration.log", "+tmp/convkit-migrate-v4-*/summary.json"}
	// reindex builds metadata.db (docs/CLI.md, reindex).
	newIndex = "+data/metadata.db"
)

func TestCatalogue(t *testing.T) {
	cases := catalogue()
	if len(cases) < 40 {
		t.Errorf("the catalogue has %d cases, want at least 40", len(cases))
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("two cases are named %q", c.name)
		}
		seen[c.name] = true
		if strings.Contains(c.name, "/") {
			t.Fatalf("case %q: a slash in a name breaks go test -run", c.name)
		}
		t.Run(c.name, func(t *testing.T) { runCase(t, c) })
	}
}

func runCase(t *testing.T, c hcase) {
	f := newFx(t)
	if !c.bare {
		f.withBase()
	}
	args := c.setup(f)
	before := snapshot(t, f.root)
	var r result
	switch {
	case f.limit > 0:
		r = f.runLimited(f.limit, args...)
	case c.noDataDir:
		r = f.runFull(args...)
	default:
		r = f.run(args...)
	}
	if f.after != nil {
		f.after()
	}
	after := snapshot(t, f.root)
	t.Logf("convkit %s: exit %d\n--- stdout\n%s--- stderr\n%s", strings.Join(args, " "), r.code, clip(r.stdout), clip(r.stderr))

	if r.code != c.code {
		t.Errorf("exit code %d, want %d", r.code, c.code)
	}
	for _, s := range c.stderr {
		if s = f.expand(s); !strings.Contains(r.stderr, s) {
			t.Errorf("stderr does not say %q", s)
		}
	}
	for _, s := range c.stdout {
		if s = f.expand(s); !strings.Contains(r.stdout, s) {
			t.Errorf("stdout does not say %q", s)
		}
	}
	// Results only on stdout: no error, hint, warning or panic text, and
	// not the error message itself.
	for _, s := range errorText {
		if strings.Contains(r.stdout, s) {
			t.Errorf("stdout carries error text %q", s)
		}
	}
	if msg, ok := errorMessage(r.stderr); ok && strings.Contains(r.stdout, msg) {
		t.Errorf("stdout repeats the error message %q", msg)
	}
	if c.code != 0 && !strings.Contains(r.stderr, "convkit: error: ") {
		t.Errorf("exit %d without an error line on stderr", r.code)
	}
	if strings.Contains(r.stderr, "PANIC") || strings.Contains(r.stderr, "goroutine ") {
		t.Errorf("the command panicked")
	}
	// Nothing that acts on a terminal reaches one raw: text from logs and
	// archives is escaped (docs/CLI.md, Output).
	for name, out := range map[string]string{"stdout": r.stdout, "stderr": r.stderr} {
		if c, i, ok := rawTerminalControl(out); ok {
			t.Errorf("%s carries %U raw at byte %d: %q", name, c, i, clip(out[max(0, i-40):min(len(out), i+40)]))
		}
	}
	// An error or warning line names each file once.
	for _, l := range strings.Split(r.stderr, "\n") {
		if p, n := repeatedPath(l, f.root); n > 1 {
			t.Errorf("stderr names %s %d times in one line: %q", p, n, l)
		}
	}

	changes := diff(before, after)
	for _, ch := range changes {
		if _, ok := f.allowed(ch, c.allow); !ok {
			if _, ok := f.allowed(ch, c.want); !ok {
				t.Errorf("on disk: %c %s (%s) is not a documented output of this command", ch.op, ch.path, ch.what)
			}
		}
	}
	for _, w := range c.want {
		found := false
		for _, ch := range changes {
			if _, ok := f.allowed(ch, []string{w}); ok {
				found = true
			}
		}
		if !found {
			t.Errorf("on disk: no change matches %q, which the command must make", w)
		}
	}
	if c.check != nil {
		c.check(f, r)
	}
}

// repeatedPath finds the path under root that a line names most often
// (a path counts once however it continues: "DIR/x" and "DIR/x/y" are
// both DIR/x... only when equal up to a separator or the end).
func repeatedPath(line, root string) (string, int) {
	counts := map[string]int{}
	for rest := line; ; {
		i := strings.Index(rest, root)
		if i < 0 {
			break
		}
		rest = rest[i:]
		end := strings.IndexAny(rest, " :\"'")
		if end < 0 {
			end = len(rest)
		}
		counts[rest[:end]]++
		rest = rest[end:]
	}
	best, n := "", 0
	for p, c := range counts {
		if c > n {
			best, n = p, c
		}
	}
	return best, n
}

// errorMessage is the message of stderr's "convkit: error: " line.
func errorMessage(stderr string) (string, bool) {
	for _, l := range strings.Split(stderr, "\n") {
		if m, ok := strings.CutPrefix(l, "convkit: error: "); ok {
			return m, true
		}
	}
	return "", false
}

func clip(s string) string {
	if len(s) > 4000 {
		return s[:2000] + "\n[...]\n" + s[len(s)-2000:]
	}
	return s
}

func catalogue() []hcase {
	var cs []hcase
	cs = append(cs, logCases()...)
	cs = append(cs, formatCases()...)
	cs = append(cs, storeCases()...)
	cs = append(cs, archiveCases()...)
	cs = append(cs, indexCases()...)
	cs = append(cs, fsCases()...)
	cs = append(cs, lockCases()...)
	cs = append(cs, termCases()...)
	cs = append(cs, noStoreCases()...)
	cs = append(cs, stagingCases()...)
	cs = append(cs, sessionCases()...)
	cs = append(cs, writeCases()...)
	cs = append(cs, conversationsFileCases()...)
	cs = append(cs, identityCases()...)
	cs = append(cs, pathCases()...)
	cs = append(cs, framingCases()...)
	cs = append(cs, fieldCases()...)
	return cs
}

// TestCatalogueDocumented: docs/HOSTILE.md lists every case with its exit
// code, and no case that is not here.
func TestCatalogueDocumented(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "HOSTILE.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{} // name -> exit
	for _, l := range strings.Split(string(data), "\n") {
		cells := strings.Split(l, " | ")
		if len(cells) == 3 && strings.HasPrefix(l, "| ") && strings.HasSuffix(l, " |") && strings.HasPrefix(cells[1], "`convkit ") {
			rows[strings.TrimPrefix(cells[0], "| ")] = strings.TrimSuffix(cells[2], " |")
		}
	}
	for _, c := range catalogue() {
		code, ok := rows[c.name]
		switch {
		case !ok:
			t.Errorf("docs/HOSTILE.md does not list %q", c.name)
		case code != strconv.Itoa(c.code):
			t.Errorf("docs/HOSTILE.md: %q exits %s, the case says %d", c.name, code, c.code)
		}
		delete(rows, c.name)
	}
	for name := range rows {
		t.Errorf("docs/HOSTILE.md lists %q, which is not a case", name)
	}
}
