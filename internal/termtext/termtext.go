// Package termtext words what convkit shows on a terminal.
//
// Text that comes from logs and archives (titles, message text, ids,
// working directories, file names, error messages that quote them) is
// prepared for a terminal: control characters are escaped visibly, so
// that a log cannot clear the screen, set the clipboard (OSC 52), change
// the window title or reorder what is shown (bidi overrides); widths are
// measured in terminal columns, so that tables align with wide characters;
// sizes read as people read them (Size).
//
// Renderers escape as they render: the data itself is never changed, and
// JSON output, which is exact, never goes through this package, except
// for the names a message quotes (Quote), quoted the same in every line.
//
// Errors about files name each file once (the project's rule for every
// error and report line): Text drops a system call's own mention of a file
// the message names already, and Reason words an error as a reason printed
// beside its path, without naming the path again.
package termtext

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// needsEscape reports whether r is shown escaped: the C0 controls (tab,
// newline and carriage return included), DEL, the C1 controls, the bidi
// embeddings, overrides, isolates and marks (U+061C, U+200E, U+200F,
// U+202A–U+202E, U+2066–U+2069), and the line and paragraph separators
// U+2028 and U+2029.
func needsEscape(r rune) bool {
	switch {
	case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r == 0x2028, r == 0x2029:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// Escape returns s with every character needsEscape reports written as a
// visible escape: \t, \n, \r, \xNN for the other C0 controls and DEL
// (ESC is \x1b), \uNNNN for the C1 controls and the bidi and separator
// characters, and \xNN for each byte of invalid UTF-8. Everything else,
// backslashes included, is left as it is.
func Escape(s string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n <= 1) || needsEscape(r) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s // the common case: nothing to do
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case needsEscape(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// EscapeLines is Escape for text of several lines: each line is escaped,
// the newlines between them are kept.
func EscapeLines(s string) string {
	if !strings.Contains(s, "\n") {
		return Escape(s)
	}
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Escape(l)
	}
	return strings.Join(lines, "\n")
}

// Width is the number of terminal columns s takes: a CJK character or an
// emoji takes two, a combining mark none.
func Width(s string) int { return uniseg.StringWidth(s) }

// Pad returns s followed by spaces to fill width columns (s as it is when
// it is wider).
func Pad(s string, width int) string {
	if w := Width(s); w < width {
		return s + strings.Repeat(" ", width-w)
	}
	return s
}

// Clip shortens s to at most width columns, ending it with "…" when it was
// cut; it never cuts inside a character made of several code points.
func Clip(s string, width int) string {
	if Width(s) <= width {
		return s
	}
	var b strings.Builder
	w := 0
	state := -1
	rest := s
	for len(rest) > 0 {
		var cluster string
		var cw int
		cluster, rest, cw, state = uniseg.FirstGraphemeClusterInString(rest, state)
		if w+cw > width-1 {
			break
		}
		b.WriteString(cluster)
		w += cw
	}
	return b.String() + "…"
}

// ClipEscaped is Clip(Escape(s), width), reading no more of s than width
// columns show: a title of megabytes costs what its first columns cost.
// Bytes that show nothing count too: past 16 bytes a column, or at a
// character of more than 256 bytes (a base with endless combining
// marks), s is cut there.
func ClipEscaped(s string, width int) string {
	var b strings.Builder
	w, state, rest := 0, -1, s
	for len(rest) > 0 && w <= width {
		var cluster string
		cluster, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
		if len(cluster) > 256 || b.Len()+len(cluster) > 16*width+64 {
			out := b.String()
			if w < width {
				return out + "…"
			}
			return Clip(out, width-1)
		}
		e := Escape(cluster)
		b.WriteString(e)
		w += Width(e)
	}
	return Clip(b.String(), width)
}

// Table writes rows whose columns are aligned by display width, two spaces
// apart; the last column is not padded. Cells are written as given: escape
// them first.
type Table struct {
	w    io.Writer
	rows [][]string
}

// NewTable starts a table with its header row.
func NewTable(w io.Writer, header ...string) *Table {
	return &Table{w: w, rows: [][]string{header}}
}

// Row adds a row.
func (t *Table) Row(cells ...string) { t.rows = append(t.rows, cells) }

// Flush writes the table.
func (t *Table) Flush() error {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], Width(c))
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		b.Reset()
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(Pad(c, widths[i]))
			b.WriteString("  ")
		}
		b.WriteByte('\n')
		if _, err := io.WriteString(t.w, strings.TrimRight(b.String(), " \n")+"\n"); err != nil {
			return err
		}
	}
	return nil
}

// Writer escapes the lines written through it: each line's text goes
// through Escape, the newline that ends it is kept. It is for text a
// library writes line by line (its report and warning lines), which may
// quote names and messages from logs and archives. A write should hold
// whole lines: a character split between two writes is escaped as bytes.
type Writer struct{ w io.Writer }

// NewWriter returns a Writer writing to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

func (e *Writer) Write(p []byte) (int, error) {
	if _, err := io.WriteString(e.w, EscapeLines(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Quote is s between double quotes, escaped as Escape escapes it: how a
// message quotes a name, an id or a path that may hold anything (Go's %q
// would show other escapes, \a and \\, than the renderers do).
func Quote(s string) string { return `"` + Escape(s) + `"` }

// QuoteList is each of ss quoted as Quote quotes it, between brackets and
// separated by spaces.
func QuoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = Quote(s)
	}
	return "[" + strings.Join(q, " ") + "]"
}
