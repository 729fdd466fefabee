package cli

import (
	"fmt"
	"slices"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/internal/termtext"
)

// closest returns the candidates nearest to word, as git and restic hint
// them: within one edit of a word of up to four letters, two of a longer
// one, else the one candidate word is a prefix of. Order is kept.
func closest(word string, candidates []string) []string {
	if slices.Contains(candidates, word) {
		return nil
	}
	limit := 1
	if len([]rune(word)) > 4 {
		limit = 2
	}
	best := limit + 1
	var out, prefixed []string
	seen := map[string]bool{}
	for _, c := range candidates {
		if seen[c] {
			continue
		}
		seen[c] = true
		d := editDistance(word, c)
		switch {
		case d < best:
			best, out = d, []string{c}
		case d == best:
			out = append(out, c)
		}
		if strings.HasPrefix(c, word) {
			prefixed = append(prefixed, c)
		}
	}
	if len(out) == 0 && len(prefixed) == 1 && len([]rune(word)) >= 2 {
		return prefixed
	}
	return out
}

// editDistance is the optimal string alignment distance between a and b
// (Levenshtein, a swap of neighbours one edit), by runes.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev2 := make([]int, len(rb)+1)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}

// didYouMean is the hint `did you mean "list"?`, or "" without suggestions.
func didYouMean(suggestions []string, spell func(string) string) string {
	if len(suggestions) == 0 {
		return ""
	}
	s := make([]string, len(suggestions))
	for i, w := range suggestions {
		s[i] = spell(w)
	}
	if len(s) == 1 {
		return "did you mean " + s[0] + "?"
	}
	return "did you mean " + strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1] + "?"
}

func commandNames(cmds []*ucli.Command) []string {
	var out []string
	for _, c := range cmds {
		if !c.Hidden {
			out = append(out, c.Names()...)
		}
	}
	return out
}

// suggestCommand is the hint for name, unknown among parent's cmds.
func suggestCommand(parent, name string, cmds []*ucli.Command) string {
	return didYouMean(closest(name, commandNames(cmds)), func(s string) string {
		return termtext.Quote(strings.TrimSpace(parent + " " + s))
	})
}

// commandPath is the running command after the program's name ("lock").
func commandPath(c *ucli.Context) string {
	return strings.TrimSpace(strings.TrimPrefix(helpName(c), progName))
}

// suggestFlag is the hint for the unknown option name of the command in c.
// A one-letter name gets none: too many are one edit away.
func suggestFlag(c *ucli.Context, name string) string {
	if len([]rune(name)) < 2 {
		return ""
	}
	var names []string
	add := func(flags []ucli.Flag) {
		for _, f := range flags {
			for _, n := range f.Names() {
				if len(n) > 1 {
					names = append(names, n)
				}
			}
		}
	}
	if c.Command != nil {
		add(c.Command.Flags)
	}
	if c.App != nil {
		add(c.App.Flags)
	}
	names = append(names, "help")
	return didYouMean(closest(name, names), dashed)
}

func unknownCommand(c *ucli.Context, name string) error {
	cmds := c.App.Commands
	if c.Command != nil && len(c.Command.Subcommands) > 0 && c.Command.HelpName != progName {
		cmds = c.Command.Subcommands
	}
	msg := fmt.Sprintf("unknown command %s", termtext.Quote(strings.TrimSpace(commandPath(c)+" "+name)))
	if hint := suggestCommand(commandPath(c), name, cmds); hint != "" {
		return usageWithHint(c, hint, "%s", msg)
	}
	return usagef(c, "%s", msg)
}
