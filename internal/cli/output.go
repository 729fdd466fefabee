package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/internal/contract"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

const schemaVersion = contract.Version

// writeJSON writes v as one line of exact JSON, HTML characters as they are.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeJSONWith is writeJSON of v, a JSON object, with the members head
// first, as a struct embedding v would write it.
func writeJSONWith(w io.Writer, head string, v any) error {
	if head == "" {
		return writeJSON(w, v)
	}
	var b bytes.Buffer
	if err := writeJSON(&b, v); err != nil {
		return err
	}
	if b.Bytes()[1] != '}' {
		head += ","
	}
	_, err := io.WriteString(w, "{"+head+b.String()[1:])
	return err
}

// result writes a command's result to w: v under --json (head first, as
// writeJSONWith), else the text render writes.
func (e *env) result(w io.Writer, head string, v any, render func()) error {
	if e.g.JSON {
		return writeJSONWith(w, head, v)
	}
	render()
	return nil
}

// versionHead is the schemaVersion member that begins a command's result.
var versionHead = fmt.Sprintf(`"schemaVersion":%d`, schemaVersion)

// text escapes s for the terminal, as every string from a log, an archive or
// the store is rendered.
func text(s string) string { return termtext.Escape(s) }

// mapJoin is f of each of list, joined by sep.
func mapJoin(list []string, f func(string) string, sep string) string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = f(s)
	}
	return strings.Join(out, sep)
}

func quoted(s string) string { return `"` + termtext.Escape(s) + `"` }

// label is a name shown when on.
type label struct {
	on   bool
	name string
}

// labels are the names of the labels on, in order.
func labels(ls ...label) []string {
	var out []string
	for _, l := range ls {
		if l.on {
			out = append(out, l.name)
		}
	}
	return out
}

// titleColumns is the most of a title text output shows.
const titleColumns = 80

func title(s string) string {
	if s == "" {
		return "(untitled)"
	}
	return termtext.ClipEscaped(s, titleColumns)
}

func quotedTitle(s string) string { return `"` + termtext.ClipEscaped(s, titleColumns) + `"` }

// libraryLines wraps w for the lines a library writes: each is escaped, and
// under --quiet only those keep accepts pass (nil keeps all).
func (e *env) libraryLines(w io.Writer, keep func(line string) bool) io.Writer {
	out := io.Writer(termtext.NewWriter(w))
	if e.g.Quiet && keep != nil {
		out = &lineFilter{w: out, keep: keep}
	}
	return out
}

// lineFilter passes on the whole lines keep accepts, from any goroutine.
type lineFilter struct {
	mu   sync.Mutex
	w    io.Writer
	keep func(string) bool
	buf  []byte
}

func (f *lineFilter) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf = append(f.buf, p...)
	for {
		i := bytes.IndexByte(f.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(f.buf[:i])
		f.buf = f.buf[i+1:]
		if f.keep(line) {
			if _, err := io.WriteString(f.w, line+"\n"); err != nil {
				return len(p), err
			}
		}
	}
}

// problemLine is what --quiet keeps of the libraries' lines: the problems.
func problemLine(line string) bool {
	for _, info := range []string{"REMOVED ", "DELETED ", progName + ": removed ", willNotOpenPrefix} {
		if strings.HasPrefix(line, info) {
			return false
		}
	}
	return true
}

// willNotOpenPrefix begins the line of a conversation that will not open
// here; --quiet drops them (a restored store would print one per
// conversation) except under reindex --strict.
const willNotOpenPrefix = "WILL NOT OPEN "

// migrateLine matches a per-input line of migrate: [i/K] "rel" ACTION...
var migrateLine = regexp.MustCompile(`^\[\d+/\d+\] "(?:[^"\\]|\\.)*" (.*)$`)

// migrateQuiet is what --quiet keeps of migrate's lines: failures, skips,
// ERROR lines, an empty root and everything from the summary on.
func migrateQuiet() func(string) bool {
	summary := false
	return func(line string) bool {
		if m := migrateLine.FindStringSubmatch(line); m != nil {
			return strings.HasPrefix(m[1], "FAILED") || strings.HasPrefix(m[1], "SKIPPED")
		}
		if strings.HasPrefix(line, "Summary: ") || strings.HasPrefix(line, "Plan: ") {
			summary = true
		}
		return summary || strings.HasPrefix(line, "ERROR ") || strings.HasPrefix(line, "The sessions root is empty")
	}
}

// refuseTerminal refuses to write an archive to a terminal (as zstd does),
// hinting at example, a pipeline, and instead, the form that writes a file.
func (e *env) refuseTerminal(c *ucli.Context, example, instead string) error {
	if !e.terminal(e.stdout) {
		return nil
	}
	return usageWithHint(c, fmt.Sprintf("redirect stdout to a file or a pipe (%s %s), or use %s %s", progName, example, progName, instead),
		"refusing to write a binary archive to a terminal")
}

// withPath is "PATH: REASON", or REASON alone when it names the path.
func withPath(path, reason string) string {
	bare := path
	if u, err := strconv.Unquote(path); err == nil {
		bare = u
	}
	if bare != "" && strings.Contains(reason, bare) {
		return reason
	}
	return path + ": " + reason
}

// itemLine is an item a library reported, as the commands print it: a word
// for its kind, its path and its reason; warned ("archived") ends a WARNING
// line with what was done.
func itemLine(it store.Item, warned string) string {
	switch it.Kind {
	case store.ItemWillNotOpen:
		return willNotOpenPrefix + it.ID + ": " + it.Reason
	case store.ItemNotLocked:
		return "WARNING runtime.lock could not be taken (" + it.Reason + "): backing up online"
	case store.ItemInvalid:
		return "INVALID " + it.Path + ": archived whole: " + it.Reason
	case store.ItemWarning:
		if warned != "" {
			return "WARNING " + it.Path + ": " + it.Reason + " (" + warned + ")"
		}
	}
	word, ok := itemWords[it.Kind]
	if !ok {
		word = strings.ToUpper(string(it.Kind))
	}
	return word + " " + it.Path + ": " + it.Reason
}

var itemWords = map[store.ItemKind]string{
	store.ItemSkipped: "SKIPPED", store.ItemIgnored: "IGNORED", store.ItemUnreadable: "UNREADABLE", store.ItemWarning: "WARNING",
	store.ItemMismatch: "MISMATCH", store.ItemTempKept: "WARNING", store.ItemTempRemoved: "REMOVED",
	store.ItemDeletionFinished: "DELETED", store.ItemEmptyRemoved: "DELETED",
}

func itemPrinter(w io.Writer, warned string) func(store.Item) {
	return func(it store.Item) { fmt.Fprintln(w, itemLine(it, warned)) }
}
