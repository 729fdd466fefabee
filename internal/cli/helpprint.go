package cli

import (
	"bytes"
	"io"
	"strings"

	ucli "github.com/urfave/cli/v2"
)

// Every command's help ends with its EXAMPLES, then its EXIT STATUS table
// (docs/CLI.md): urfave renders the Description, which carries the table,
// before the options, so the printer moves the table after them and puts
// the examples (examples.go) before it. The program's help lists the
// commands by group (appHelpTemplate).
func init() {
	render := ucli.HelpPrinterCustom
	ucli.HelpPrinterCustom = func(w io.Writer, templ string, data interface{}, funcs map[string]interface{}) {
		all := map[string]interface{}{"commandGroups": groupsOf}
		for k, v := range funcs {
			all[k] = v
		}
		var b bytes.Buffer
		render(&b, templ, data, all)
		path, ok := "", true
		switch d := data.(type) {
		case *ucli.App:
		case *ucli.Command:
			path = strings.TrimSpace(strings.TrimPrefix(d.HelpName, progName))
		default:
			ok = false
		}
		var ex bytes.Buffer
		if ok {
			writeExamples(&ex, path)
		}
		help := exitStatusLast(b.String(), ex.String())
		// The group lines of the program's help end in tabwriter's padding.
		lines := strings.Split(help, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimRight(l, " ")
		}
		io.WriteString(w, strings.Join(lines, "\n"))
	}
}

// exitStatusLast moves the EXIT STATUS table out of a rendered help's
// DESCRIPTION section to the end, as a section of its own, with the
// sections before (EXAMPLES) ahead of it.
func exitStatusLast(help, before string) string {
	lines := strings.Split(strings.TrimRight(help, "\n"), "\n")
	start := -1
	for i, l := range lines {
		if strings.TrimSpace(l) == "EXIT STATUS:" && strings.HasPrefix(l, " ") {
			start = i
			break
		}
	}
	if start < 0 {
		return strings.TrimRight(help, "\n") + "\n" + before
	}
	end := start + 1
	for end < len(lines) && strings.TrimSpace(lines[end]) != "" && strings.HasPrefix(lines[end], " ") {
		end++
	}
	table := []string{"", "EXIT STATUS:"}
	for _, l := range lines[start+1 : end] {
		table = append(table, "   "+strings.TrimSpace(l))
	}
	// The table's lines are "CODE  meaning": keep the columns.
	for i := 2; i < len(table); i++ {
		if code, rest, ok := strings.Cut(strings.TrimSpace(table[i]), " "); ok {
			table[i] = "   " + code + strings.Repeat(" ", max(1, 5-len(code))) + strings.TrimSpace(rest)
		}
	}
	rest := append([]string{}, lines[:start]...)
	// The blank line before the table goes with it.
	if n := len(rest); n > 0 && strings.TrimSpace(rest[n-1]) == "" {
		rest = rest[:n-1]
	}
	rest = append(rest, lines[end:]...)
	return strings.Join(rest, "\n") + "\n" + before + strings.Join(table, "\n") + "\n"
}
