package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// completionCases: a command line up to the cursor (the last word is the
// one being completed), and words the completion must offer and must not.
var completionCases = []struct {
	line    []string
	want    []string
	notWant []string
}{
	{[]string{""}, []string{"migrate", "backup", "completion", "man", "version"}, []string{"verify", "--stats"}},
	{[]string{"ba"}, []string{"backup"}, []string{"migrate"}},
	// Aliases are offered too.
	{[]string{"mig"}, []string{"migrate", "migrate-sessions"}, []string{"backup"}},
	{[]string{"backup", ""}, []string{"verify", "list"}, []string{"migrate"}},
	{[]string{"--data-dir", "/srv/convkit", "backup", "v"}, []string{"verify"}, nil},
	{[]string{"backup", "--to", "/backups", "--"}, []string{"--keep", "--dry-run", "--json", "--data-dir"}, []string{"--work-dir"}},
	{[]string{"backup", "verify", "--"}, []string{"--work-dir", "--quiet", "--help"}, []string{"--keep"}},
	{[]string{"inspect", "--st"}, []string{"--stats"}, []string{"--validate"}},
	{[]string{"inspect", "log.jsonl", "--h"}, []string{"--history", "--help"}, nil},
	{[]string{"import", "in.tar.zst", "--on-conflict", ""}, []string{"refuse", "replace", "skip"}, []string{"--dry-run"}},
	{[]string{"migrate", "--compress", ""}, []string{"keep", "zstd", "none"}, nil},
	{[]string{"fixtures", "--compress", ""}, []string{"zstd", "none"}, []string{"keep"}},
	{[]string{"completion", ""}, []string{"bash", "zsh", "fish"}, nil},
	{[]string{"lock", ""}, []string{"status"}, nil},
	{[]string{"migrate-sessions", "--j"}, []string{"--jobs"}, nil},
	// After "--" nothing is an option.
	{[]string{"inspect", "--", "--"}, nil, []string{"--stats"}},
}

// TestCompletionChoices: every option named in completionChoices exists.
func TestCompletionChoices(t *testing.T) {
	e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, g: &globals{getenv: func(string) string { return "" }}}
	have := map[string]bool{}
	for _, n := range commandNodes(newApp(e)) {
		for _, fi := range ownFlags(n.cmd.Flags) {
			have[n.name()+" "+dashed(fi.names[0])] = true
		}
	}
	for k := range completionChoices {
		if !have[k] {
			t.Errorf("completionChoices names %q, which is not an option", k)
		}
	}
}

func completionScript(t *testing.T, shell string) string {
	t.Helper()
	code, stdout, stderr := run(t, nil, "completion", shell)
	if code != 0 || stderr != "" {
		t.Fatalf("completion %s: exit %d, %s", shell, code, stderr)
	}
	p := filepath.Join(t.TempDir(), "convkit."+shell)
	if err := os.WriteFile(p, []byte(stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func needShell(t *testing.T, shell string) string {
	t.Helper()
	p, err := exec.LookPath(shell)
	if err != nil {
		t.Skipf("%s is not installed (.ci/run installs it): %v", shell, err)
	}
	return p
}

func checkOffered(t *testing.T, shell string, line []string, got, want, notWant []string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("%s: convkit %s<TAB> offers %q, not %q", shell, strings.Join(line, " "), got, w)
		}
	}
	for _, w := range notWant {
		if slices.Contains(got, w) {
			t.Errorf("%s: convkit %s<TAB> offers %q, which it must not", shell, strings.Join(line, " "), w)
		}
	}
}

func shellWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = shQuote(w)
	}
	return strings.Join(q, " ")
}

func TestBashCompletion(t *testing.T) {
	bash := needShell(t, "bash")
	script := completionScript(t, "bash")
	for _, tc := range completionCases {
		prog := "source " + shQuote(script) + "\nCOMP_WORDS=(convkit " + shellWords(tc.line) + ")\nCOMP_CWORD=" +
			strconv.Itoa(len(tc.line)) + "\n_convkit\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
		out, err := exec.Command(bash, "--norc", "--noprofile", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		checkOffered(t, "bash", tc.line, strings.Fields(string(out)), tc.want, tc.notWant)
	}
	// A value that names a directory completes directories.
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "backups-here"), 0o700)
	os.WriteFile(filepath.Join(dir, "backups-file"), nil, 0o600)
	prog := "cd " + shQuote(dir) + "\nsource " + shQuote(script) + "\nCOMP_WORDS=(convkit backup --to backups)\nCOMP_CWORD=3\n_convkit\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
	out, err := exec.Command(bash, "--norc", "--noprofile", "-c", prog).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "backups-here" {
		t.Errorf("backup --to backups<TAB>: %v %q, want the directory only", err, out)
	}
}

func TestZshCompletion(t *testing.T) {
	zsh := needShell(t, "zsh")
	script := completionScript(t, "zsh")
	if out, err := exec.Command(zsh, "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v\n%s", err, out)
	}
	for _, tc := range completionCases {
		// The shared candidate function, as _convkit calls it; compdef is
		// compinit's and only registers the function.
		cur := tc.line[len(tc.line)-1]
		prog := "compdef() { :; }\nsource " + shQuote(script) + "\n__convkit_candidates " + shQuote(cur) + " " + shellWords(tc.line[:len(tc.line)-1]) + "\n"
		out, err := exec.Command(zsh, "-f", "-c", prog).CombinedOutput()
		if err != nil {
			t.Fatalf("zsh: %v\n%s", err, out)
		}
		var got []string
		for _, w := range strings.Fields(string(out)) {
			if strings.HasPrefix(w, cur) {
				got = append(got, w)
			}
		}
		checkOffered(t, "zsh", tc.line, got, tc.want, tc.notWant)
	}
}

func TestFishCompletion(t *testing.T) {
	fish := needShell(t, "fish")
	script := completionScript(t, "fish")
	if out, err := exec.Command(fish, "--no-config", "-n", script).CombinedOutput(); err != nil {
		t.Fatalf("fish -n: %v\n%s", err, out)
	}
	for _, tc := range completionCases {
		line := "convkit " + strings.Join(tc.line, " ")
		prog := "source " + fishQuote(script) + "; complete -C " + fishQuote(line)
		cmd := exec.Command(fish, "--no-config", "-c", prog)
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("fish: %v\n%s", err, out)
		}
		var got []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if w, _, _ := strings.Cut(l, "\t"); w != "" {
				got = append(got, w)
			}
		}
		checkOffered(t, "fish", tc.line, got, tc.want, tc.notWant)
	}
}
