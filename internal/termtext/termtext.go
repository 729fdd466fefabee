// Package termtext words what convkit shows on a terminal.
//
// Text from logs and archives is escaped visibly (Escape, Quote), so a log
// cannot clear the screen, set the clipboard or reorder what is shown;
// widths are measured in terminal columns (Pad, ClipEscaped, Table); sizes
// read as people read them (Size). Renderers escape as they render; JSON
// output never goes through this package, except names a message quotes.
//
// Errors name each file once: Text drops a system call's own mention of a
// file the message names already, and Reason words an error as a reason
// printed beside its path.
package termtext

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// needsEscape reports whether r is shown escaped: the C0 and C1 controls,
// DEL, the bidi marks, embeddings, overrides and isolates, and the line and
// paragraph separators.
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
// visible escape (\t, \n, \r, \xNN for other C0 controls, DEL and
// invalid UTF-8, \uNNNN for the rest); backslashes are left as they are.
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

// columns is the number of terminal columns s takes (a CJK character two).
func columns(s string) int { return uniseg.StringWidth(s) }

// Pad returns s followed by spaces to fill width columns.
func Pad(s string, width int) string {
	if w := columns(s); w < width {
		return s + strings.Repeat(" ", width-w)
	}
	return s
}

// clip shortens s to at most width columns, ending it with "…" when it was
// cut; it never cuts inside a character made of several code points.
func clip(s string, width int) string {
	if columns(s) <= width {
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

// ClipEscaped is clip(Escape(s), width), reading no more of s than width
// columns show: past 16 bytes a column, or at a character of more than 256
// bytes (endless combining marks), s is cut there.
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
			return clip(out, width-1)
		}
		e := Escape(cluster)
		b.WriteString(e)
		w += columns(e)
	}
	return clip(b.String(), width)
}

// Table writes rows whose columns are aligned by display width, two spaces
// apart; the last column is not padded. Cells are written as given: escape
// them first.
type Table struct {
	w    io.Writer
	rows [][]string
}

func NewTable(w io.Writer, header ...string) *Table {
	return &Table{w: w, rows: [][]string{header}}
}

func (t *Table) Row(cells ...string) { t.rows = append(t.rows, cells) }

func (t *Table) Flush() error {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], columns(c))
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

// Writer escapes the lines a library writes through it, keeping their
// newlines. A write should hold whole lines: a character split between two
// writes is escaped as bytes.
type Writer struct{ w io.Writer }

func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

func (e *Writer) Write(p []byte) (int, error) {
	lines := strings.Split(string(p), "\n")
	for i, l := range lines {
		lines[i] = Escape(l)
	}
	if _, err := io.WriteString(e.w, strings.Join(lines, "\n")); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Quote is s escaped and between double quotes: how a message quotes a name
// that may hold anything (%q would escape otherwise than the renderers).
func Quote(s string) string { return `"` + Escape(s) + `"` }

// QuoteList is each of ss quoted, between brackets, space-separated.
func QuoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = Quote(s)
	}
	return "[" + strings.Join(q, " ") + "]"
}

// Size is n bytes as people read a size: "812 bytes", else three
// significant figures in binary units ("12.3 KiB", "123 GiB").
func Size(n int64) string {
	if n < 0 {
		return "-" + Size(-n)
	}
	if n < 1024 {
		if n == 1 {
			return "1 byte"
		}
		return strconv.FormatInt(n, 10) + " bytes"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	v := float64(n) / 1024
	u := 0
	for v >= 1023.995 && u < len(units)-1 {
		v /= 1024
		u++
	}
	switch {
	case v >= 99.95:
		return fmt.Sprintf("%.0f %s", v, units[u])
	case v >= 9.995:
		return fmt.Sprintf("%.1f %s", v, units[u])
	}
	return fmt.Sprintf("%.2f %s", v, units[u])
}

// Text is err's message with each file named once: a *fs.PathError or
// *os.LinkError in err's chain whose file the message names before it
// loses its own mention ("write F: write F: no space" becomes "write F:
// write: no space"). It works on the chain, never on the text alone.
func Text(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	var visit func(error)
	visit = func(e error) {
		for e != nil {
			var full, short string
			var paths []string
			switch pe := e.(type) {
			case *fs.PathError:
				full, short, paths = pe.Error(), pe.Op+": "+pe.Err.Error(), []string{pe.Path}
			case *os.LinkError:
				full, short, paths = pe.Error(), pe.Op+": "+pe.Err.Error(), []string{pe.Old, pe.New}
			}
			if full != "" {
				if i := strings.LastIndex(msg, full); i > 0 {
					before := msg[:i]
					named := true
					for _, p := range paths {
						named = named && p != "" && strings.Contains(before, p)
					}
					if named {
						msg = before + short + msg[i+len(full):]
					}
				}
			}
			switch u := e.(type) {
			case interface{ Unwrap() []error }:
				for _, inner := range u.Unwrap() {
					visit(inner)
				}
				return
			case interface{ Unwrap() error }:
				e = u.Unwrap()
			default:
				return
			}
		}
	}
	visit(err)
	return msg
}

// Bare is the error an *fs.PathError in err's chain wraps (else err), for a
// caller whose message names the file already.
func Bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Reason is err's message (as Text words it) as a reason beside path
// ("SKIPPED <path>: <reason>"): a leading "<path>: " or `"<path>": ` is
// dropped, else the first whole mention of path is cut out with the space
// before it. Other files the message names stay.
func Reason(path string, err error) string {
	msg := Text(err)
	if path == "" {
		return msg
	}
	for _, lead := range []string{path + ": ", `"` + path + `": `} {
		if strings.HasPrefix(msg, lead) {
			return msg[len(lead):]
		}
	}
	for _, mention := range []string{` "` + path + `"`, " " + path} {
		for from := 0; ; {
			i := strings.Index(msg[from:], mention)
			if i < 0 {
				break
			}
			i += from
			end := i + len(mention)
			// Not a longer path that begins with it.
			if end == len(msg) || strings.ContainsRune(":) ,;", rune(msg[end])) {
				return msg[:i] + msg[end:]
			}
			from = end
		}
	}
	return msg
}
