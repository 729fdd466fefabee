package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/convkit/convkit/fixtures"
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
	{[]string{"help", "mi"}, []string{"migrate"}, []string{"backup"}},
	{[]string{"help", ""}, []string{"backup", "list", "completion"}, []string{"status", "__complete"}},
	{[]string{"migrate-sessions", "--j"}, []string{"--jobs"}, nil},
	// After "--" nothing is an option.
	{[]string{"inspect", "--", "--"}, nil, []string{"--stats"}},
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

// TestCompletionIDs: an argument that is a conversation id completes the
// ids of the store the command line names (or $CONVKIT_DATA_DIR), read
// by convkit __complete ids; zsh and fish show each title beside it.
func TestCompletionIDs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	rep, err := fixtures.Generate(dir, fixtures.Options{Seed: 3, Conversations: fixtures.SpecialCases})
	if err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runIn(t, dir, "reindex"); code != exitOK && code != exitPartial {
		t.Fatalf("reindex: exit %d, %s", code, stderr)
	}
	id := rep.Find(fixtures.CaseCompaction).ID
	odd := rep.Find(fixtures.CaseBasic).ID // "team/α β ~1 ../x"
	code, stdout, stderr := runIn(t, dir, "__complete", "ids")
	var title string
	for _, l := range strings.Split(stdout, "\n") {
		if got, ttl, _ := strings.Cut(l, "\t"); got == id {
			title = ttl
		}
	}
	if code != 0 || stderr != "" || title == "" || !strings.Contains(stdout, odd+"\t") {
		t.Fatalf("__complete ids: exit %d, %q, stdout:\n%s", code, stderr, stdout)
	}
	// No store: nothing, and no complaint.
	if code, stdout, stderr := runIn(t, filepath.Join(t.TempDir(), "none"), "__complete", "ids"); code != 0 || stdout != "" || stderr != "" {
		t.Errorf("__complete ids without a store: exit %d, %q, %q", code, stdout, stderr)
	}

	path := convkitOnPath(t)
	env := append(os.Environ(), "PATH="+path, "CONVKIT_DATA_DIR="+filepath.Join(t.TempDir(), "none"))
	shell := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env = env
		cmd.Dir = t.TempDir()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, out)
		}
		return string(out)
	}
	prefix := id[:5]
	bashCases := []struct {
		words   []string
		want    []string
		notWant []string
	}{
		{[]string{"--data-dir", dir, "rename", prefix}, []string{id}, nil},
		{[]string{"rename", "--data-dir=" + dir, prefix}, []string{id}, nil},
		{[]string{"--data-dir", dir, "rename", id, ""}, nil, []string{id}}, // TITLE: no id
		{[]string{"--data-dir", dir, "delete", id, prefix}, []string{id}, nil},
		{[]string{"--data-dir", dir, "export", "--to", "x.tar.zst", prefix}, []string{id}, nil},
		{[]string{"--data-dir", dir, "delete", "team"}, []string{`team/α\ β\ ~1\ ../x`}, nil},
		{[]string{"--data-dir", dir, "list", ""}, nil, []string{id}}, // takes no ids
	}
	if bash, err := exec.LookPath("bash"); err == nil {
		script := completionScript(t, "bash")
		for _, tc := range bashCases {
			prog := "source " + shQuote(script) + "\nCOMP_WORDS=(convkit " + shellWords(tc.words) + ")\nCOMP_CWORD=" +
				strconv.Itoa(len(tc.words)) + "\n_convkit\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
			got := strings.Split(strings.TrimSpace(shell(bash, "--norc", "--noprofile", "-c", prog)), "\n")
			checkOffered(t, "bash", tc.words, got, tc.want, tc.notWant)
		}
		// The data directory from the environment.
		prog := "source " + shQuote(completionScript(t, "bash")) + "\nCONVKIT_DATA_DIR=" + shQuote(dir) +
			"\nCOMP_WORDS=(convkit inspect " + prefix + ")\nCOMP_CWORD=2\n_convkit\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n"
		checkOffered(t, "bash", []string{"inspect", prefix}, strings.Split(shell(bash, "--norc", "--noprofile", "-c", prog), "\n"), []string{id}, nil)
	}
	if zsh, err := exec.LookPath("zsh"); err == nil {
		// _convkit with compsys's functions stubbed: what it hands
		// _describe (ID:TITLE) and compadd.
		prog := "compdef() { :; }\n_describe() { print -rl -- \"${(@P)4}\"; }\ncompadd() { shift; print -rl -- \"$@\"; }\n" +
			"source " + shQuote(completionScript(t, "zsh")) + "\nwords=(convkit --data-dir " + shQuote(dir) + " archive " + prefix +
			")\nCURRENT=5\n_convkit\n"
		got := strings.Split(strings.TrimSpace(shell(zsh, "-f", "-c", prog)), "\n")
		if !slices.Contains(got, id+":"+title) {
			t.Errorf("zsh: archive %s<TAB> describes %q, want %q", prefix, got, id+":"+title)
		}
	} else {
		t.Log("zsh is not installed (.ci/run installs it)")
	}
	if fish, err := exec.LookPath("fish"); err == nil {
		prog := "source " + fishQuote(completionScript(t, "fish")) + "; complete -C " + fishQuote("convkit --data-dir "+dir+" unarchive "+prefix)
		got := strings.Split(strings.TrimSpace(shell(fish, "--no-config", "-c", prog)), "\n")
		if !slices.Contains(got, id+"\t"+title) {
			t.Errorf("fish: unarchive %s<TAB> offers %q, want %q", prefix, got, id+"\t"+title)
		}
	} else {
		t.Log("fish is not installed (.ci/run installs it)")
	}
}
