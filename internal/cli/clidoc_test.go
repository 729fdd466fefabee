package cli

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	ucli "github.com/urfave/cli/v2"
)

var updateCLIDoc = flag.Bool("update-docs", false, "rewrite docs/CLI.md's command reference from the command definitions")

// docs/CLI.md's command reference lies between these lines, written from
// the command definitions as the help and the man page are.
const (
	cliDocStart = "<!-- commands: written from the command definitions by go test ./internal/cli -run TestCLIDoc -update-docs -->"
	cliDocEnd   = "<!-- end of commands -->"
)

// cliReference is the reference in Markdown: for every command its
// synopsis, summary, description, options and examples.
func cliReference(app *ucli.App) string {
	var b strings.Builder
	for _, n := range commandNodes(app) {
		c := n.cmd
		flags := ownFlags(c.Flags)
		synopsis := "convkit " + n.name()
		if len(flags) > 0 {
			synopsis += " [options]"
		}
		if u := strings.TrimSpace(c.ArgsUsage); u != "" {
			synopsis += " " + u
		}
		usage := mdText(c.Usage)
		if len(c.Aliases) > 0 {
			usage += " (alias: `" + strings.Join(c.Aliases, "`, `") + "`)"
		}
		fmt.Fprintf(&b, "\n### `convkit %s`\n\n%s: %s.\n", n.name(), mdCode(synopsis), usage)
		if d := c.Description; d != "" {
			mdParagraphs(&b, d)
		}
		if len(flags) > 0 {
			b.WriteString("\n| option | meaning |\n|---|---|\n")
			for _, fi := range flags {
				head := "`" + strings.Join(fi.spellings(), "`, `")
				if fi.takesValue {
					head += " " + fi.placeholder
				}
				fmt.Fprintf(&b, "| %s` | %s |\n", head, strings.ReplaceAll(mdText(fi.usage), "|", `\|`))
			}
		}
		if ex := commandExamples[n.name()]; len(ex) > 0 {
			b.WriteString("\n")
			for _, x := range ex {
				fmt.Fprintf(&b, "* %s: %s\n", mdCode(x.line), mdText(x.note))
			}
		}
	}
	return b.String()
}

// mdParagraphs writes a description: blank lines separate paragraphs,
// and a paragraph with an indented line is a block as it is (examples,
// lists), as the man page keeps it.
func mdParagraphs(b *strings.Builder, text string) {
	for _, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		b.WriteString("\n")
		if strings.Contains("\n"+para, "\n ") {
			fmt.Fprintf(b, "```\n%s\n```\n", para)
			continue
		}
		for _, l := range strings.Split(para, "\n") {
			l = mdText(strings.TrimSpace(l))
			if m := blockStart.FindStringSubmatchIndex(l); m != nil {
				l = l[:m[2]] + `\` + l[m[2]:]
			}
			fmt.Fprintln(b, l)
		}
	}
}

// blockStart matches what Markdown would start a list, heading or quote
// with; the backslash goes before its marker.
var blockStart = regexp.MustCompile(`^[0-9]*([-+#>.)]) `)

// mdText escapes what Markdown would take for markup: an HTML tag
// (<data-dir>), emphasis, code.
func mdText(s string) string {
	return strings.NewReplacer(`\`, `\\`, "<", `\<`, "*", `\*`, "_", `\_`, "`", "\\`").Replace(s)
}

// mdCode is s as inline code, with a fence longer than any run of
// backquotes in it.
func mdCode(s string) string {
	fence := "`"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	if len(fence) > 1 {
		return fence + " " + s + " " + fence
	}
	return fence + s + fence
}

// TestCLIDoc: docs/CLI.md's command reference is the command definitions':
// every command with its options and examples.
func TestCLIDoc(t *testing.T) {
	doc := filepath.Join("..", "..", "docs", "CLI.md")
	raw, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(raw)
	i, j := strings.Index(s, cliDocStart), strings.Index(s, cliDocEnd)
	if i < 0 || j < i {
		t.Fatalf("%s has no command reference (between %q and %q)", doc, cliDocStart, cliDocEnd)
	}
	e := &env{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, g: &globals{getenv: func(string) string { return "" }}}
	app := newApp(e)
	ref := cliReference(app)
	for _, n := range commandNodes(app) {
		if !strings.Contains(ref, "\n### `convkit "+n.name()+"`\n") {
			t.Errorf("the command reference has no section of convkit %s", n.name())
		}
	}
	want := cliDocStart + "\n" + ref + "\n"
	if got := s[i:j]; got != want {
		if *updateCLIDoc {
			if err := os.WriteFile(doc, []byte(s[:i]+want+s[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("%s's command reference is not the command definitions' (go test ./internal/cli -run %s -update-docs rewrites it)", doc, t.Name())
	}
}

// TestMarkdownText: description text reaches the reference as text, never
// as markup.
func TestMarkdownText(t *testing.T) {
	for in, want := range map[string]string{
		"a <data-dir> b":        `a \<data-dir> b`,
		"prefix* and $X_Y":      `prefix\* and $X\_Y`,
		"- not a list":          `\- not a list`,
		"1. not a list either":  `1\. not a list either`,
		"# not a heading":       `\# not a heading`,
		"--incremental updates": "--incremental updates",
		"a line\n\n  indented":  "a line\n\n```\n  indented\n```",
	} {
		var b strings.Builder
		mdParagraphs(&b, in)
		if got := strings.TrimSpace(b.String()); got != want {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
	if got := mdCode("a `b` c"); got != "`` a `b` c ``" {
		t.Errorf("mdCode: %q", got)
	}
}
