package cli

import (
	"bytes"
	"context"
	"flag"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/convkit/convkit/store"
)

var updateMan = flag.Bool("update", false, "rewrite docs/convkit.1 from the command definitions")

// manPath is the man page kept in the source.
var manPath = filepath.Join("..", "..", "docs", "convkit.1")

// TestManPage: convkit man prints the page docs/convkit.1 holds, with every
// command, every option, EXIT STATUS and ENVIRONMENT; man reads it
// without a warning where man is installed.
func TestManPage(t *testing.T) {
	code, page, stderr := run(t, nil, "man")
	if code != 0 || stderr != "" {
		t.Fatalf("convkit man: exit %d, %s", code, stderr)
	}
	if *updateMan {
		if err := os.WriteFile(manPath, []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := os.ReadFile(manPath)
	if err != nil {
		t.Fatal(err)
	}
	if string(kept) != page {
		t.Errorf("docs/convkit.1 is not what convkit man prints: run go test ./internal/cli -run TestManPage -update")
	}
	for _, section := range []string{".SH NAME", ".SH SYNOPSIS", ".SH GLOBAL OPTIONS", ".SH COMMANDS", ".SH EXAMPLES", ".SH EXIT STATUS", ".SH ENVIRONMENT", ".SH FILES"} {
		if !strings.Contains(page, "\n"+section+"\n") {
			t.Errorf("the man page has no %s section", section)
		}
	}
	for _, s := range exitStatuses {
		if !strings.Contains(page, ".TP\n.B "+strconv.Itoa(s.code)+"\n") {
			t.Errorf("EXIT STATUS lacks %d", s.code)
		}
	}
	e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, g: &globals{getenv: func(string) string { return "" }}}
	app := newApp(e)
	for _, n := range commandNodes(app) {
		if !strings.Contains(page, `.SS "convkit `+roff(n.name())) {
			t.Errorf("the man page does not describe convkit %s", n.name())
		}
		sect := manSection(page, n.name())
		for _, x := range commandExamples[n.name()] {
			if !strings.Contains(sect, "\n"+roff(x.line)+"\n") {
				t.Errorf("the man page's section of %s lacks the example %q", n.name(), x.line)
			}
		}
		for _, fi := range ownFlags(n.cmd.Flags) {
			if !strings.Contains(page, `\fB`+roff(dashed(fi.names[0]))+`\fR`) {
				t.Errorf("the man page does not list %s of %s", dashed(fi.names[0]), n.name())
			}
		}
	}
	for _, v := range []string{"CONVKIT_DATA_DIR", "XDG_DATA_HOME", "CONVKIT_CONFIG", "TMPDIR"} {
		if !strings.Contains(page, ".B "+v+"\n") {
			t.Errorf("ENVIRONMENT lacks %s", v)
		}
	}
	if !strings.Contains(manSection(page, "backup"), "\nconvkit backup \\-\\-to /backups \\-\\-keep 14\n") ||
		strings.Contains(manSection(page, "backup"), "backup verify /backups/latest") {
		t.Error("manSection does not find a command's own section")
	}
	if _, err := exec.LookPath("man"); err != nil {
		t.Logf("man is not installed: the page is not rendered (%v)", err)
		return
	}
	cmd := exec.Command("man", "--warnings", "-l", manPath)
	cmd.Env = append(os.Environ(), "MANWIDTH=80", "MANPAGER=cat", "PAGER=cat")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil || errb.Len() > 0 {
		t.Errorf("man -l docs/convkit.1: %v\n%s", err, errb.String())
	}
	if !strings.Contains(string(out), "EXIT STATUS") || !strings.Contains(string(out), "convkit backup list") {
		t.Errorf("man rendered:\n%s", out)
	}
}

// manSection is the man page's section of the command at path: from its
// .SS heading (the synopsis: "convkit PATH", then its options and
// arguments, never a subcommand's name) to the next heading.
func manSection(page, path string) string {
	head := `.SS "convkit ` + roff(path)
	for _, sect := range strings.Split(page, "\n.S")[1:] {
		sect = ".S" + sect
		rest, ok := strings.CutPrefix(sect, head)
		if !ok {
			continue
		}
		if strings.HasPrefix(rest, `"`) || strings.HasPrefix(rest, " [") {
			return sect
		}
		if next, _, _ := strings.Cut(strings.TrimPrefix(rest, " "), " "); strings.HasPrefix(rest, " ") &&
			!strings.ContainsAny(next[:1], "abcdefghijklmnopqrstuvwxyz") || strings.Contains(next, "|") {
			return sect
		}
	}
	return ""
}

// TestReadmeWalkThrough: every convkit line of the README's "Try it"
// parses with the real command definitions, and every conversation or
// session id in it names one conversation (or session) of the store its
// fixtures line generates.
func TestReadmeWalkThrough(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	s := string(readme)
	i := strings.Index(s, "## Try it\n\n```\n")
	if i < 0 {
		t.Fatal("README.md has no Try it block")
	}
	block := s[i+len("## Try it\n\n```\n"):]
	block = block[:strings.Index(block, "```")]
	tmp := t.TempDir()
	dataDir := ""
	var runs [][]string
	for _, line := range strings.Split(block, "\n") {
		if c := strings.Index(line, "  #"); c >= 0 {
			line = line[:c]
		}
		for _, part := range strings.Split(line, "&&") {
			words, ok := convkitWords(strings.TrimSpace(part))
			if !ok {
				continue
			}
			for j, w := range words {
				words[j] = strings.ReplaceAll(w, "/tmp/", tmp+"/")
			}
			if _, code, stderr := parseOnly(t, words...); code != 0 {
				t.Errorf("README: %q: exit %d: %s", part, code, stderr)
			}
			if len(words) > 0 && words[0] == "fixtures" && dataDir == "" {
				if code, _, stderr := run(t, nil, words...); code != 0 {
					t.Fatalf("README's %q: exit %d, %s", line, code, stderr)
				}
				dataDir = words[slices.Index(words, "--to")+1]
				continue
			}
			runs = append(runs, words)
		}
	}
	if dataDir == "" {
		t.Fatal("the README's walk-through generates no store")
	}
	s0, err := store.Open(context.Background(), dataDir, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s0.Close()
	hexID := regexp.MustCompile(`^[0-9a-f]{8}$`)
	checked := 0
	for _, words := range runs {
		var ids []string
		for _, w := range words {
			if hexID.MatchString(w) {
				ids = append(ids, w)
			}
		}
		for k, ref := range ids {
			if k == 1 && words[0] == "inspect" {
				conv, _ := s0.ResolveIDs(ids[:1])
				if id, err := s0.ResolveSessionID(conv[0], ref); err != nil || id == ref {
					t.Errorf("README: %q: session %s names no session of %s (%v)", words, ref, conv, err)
				}
				checked++
				continue
			}
			if id, err := s0.ResolveIDs([]string{ref}); err != nil || id[0] == ref {
				t.Errorf("README: %q: %s names no conversation of the generated store (%v)", words, ref, err)
			}
			checked++
		}
	}
	if checked < 5 {
		t.Errorf("the README's walk-through names %d ids; want its commands to use ordinary conversations", checked)
	}
	if strings.Contains(block, "team/") {
		t.Error("the README's walk-through uses the hostile id")
	}
}

// TestReadmeLayout: the README's Layout starts with a picture that lists
// every Go package of the module and no other path that does not exist,
// and marks with R exactly the packages outside internal/ that a runtime
// imports: examples/runtime's and chatread's imports in the module,
// followed through each other.
func TestReadmeLayout(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const head = "## Layout\n"
	s := string(readme)
	i := strings.Index(s, head)
	if i < 0 {
		t.Fatal("README.md has no Layout section")
	}
	s = s[i+len(head):]
	i = strings.Index(s, "```\n")
	if i < 0 || strings.TrimSpace(s[:i]) != "" {
		t.Fatal("README.md's Layout does not start with its picture")
	}
	s = s[i+4:]
	s = s[:strings.Index(s, "```")]
	listed, marked := map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(s, "\n") {
		if len(line) < 4 || line[3] == ' ' {
			continue // a continuation line
		}
		path, _, _ := strings.Cut(line[3:], " ")
		if _, err := os.Stat(filepath.Join(root, path)); err != nil {
			t.Errorf("the layout lists %s: %v", path, err)
		}
		path = strings.TrimSuffix(path, "/")
		listed[path] = true
		if line[:3] == "R  " {
			marked[path] = true
		}
	}

	const module = "github.com/convkit/convkit/"
	imports := map[string][]string{} // package directory -> module packages it imports
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") {
			return nil
		}
		dir, _ := filepath.Rel(root, filepath.Dir(p))
		dir = filepath.ToSlash(dir)
		if _, ok := imports[dir]; !ok {
			imports[dir] = nil
		}
		if strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, spec := range f.Imports {
			if path, ok := strings.CutPrefix(strings.Trim(spec.Path.Value, `"`), module); ok {
				imports[dir] = append(imports[dir], path)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir := range imports {
		if !listed[dir] {
			t.Errorf("the layout does not list package %s/", dir)
		}
	}
	runtime := map[string]bool{}
	var follow func(string)
	follow = func(dir string) {
		for _, p := range imports[dir] {
			if !runtime[p] && !strings.HasPrefix(p, "internal/") {
				runtime[p] = true
				follow(p)
			}
		}
	}
	follow("examples/runtime")
	runtime["chatread"] = true
	follow("chatread")
	if len(runtime) < 4 {
		t.Fatalf("a runtime imports only %v", runtime)
	}
	for p := range runtime {
		if !marked[p] {
			t.Errorf("a runtime imports %s/, which the layout does not mark R", p)
		}
	}
	for p := range marked {
		if !runtime[p] {
			t.Errorf("the layout marks %s/ R, which no runtime imports", p)
		}
	}
}
