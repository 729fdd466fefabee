package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"regexp"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/display"
	"github.com/convkit/convkit/store"
)

// Exit codes, the same for every command. Keep exitStatusText, README.md and
// docs/CLI.md in step with them.
const (
	exitOK          = 0
	exitFailure     = 1   // failure, including any item that failed
	exitUsage       = 2   // bad flags or arguments, before any data is touched
	exitPartial     = 3   // finished, but some items were skipped or unreadable
	exitLocked      = 11  // runtime.lock is held by another process
	exitInterrupted = 130 // SIGINT or SIGTERM
)

// exitStatusText ends every command's Description.
const exitStatusText = `EXIT STATUS:
  0    success
  1    failure, including any item that failed
  2    usage error (bad flags or arguments); nothing was touched
  3    finished, but some items were skipped or unreadable
  11   runtime.lock is held by another process
  130  interrupted`

// lockedHint is shown with an error that wraps store.ErrLocked and brings no
// hint of its own.
const lockedHint = "'convkit lock status' shows the holder; --lock-timeout DURATION waits for it"

// noStoreHint is shown with an error that wraps store.ErrNoStore and brings
// no hint of its own: the data directory is likely mistyped.
const noStoreHint = "name the store's data directory with --data-dir DIR or $CONVKIT_DATA_DIR"

// usageError is a bad invocation: unknown command or flag, bad flag value,
// wrong arguments. It is found before any data is touched (exit 2).
type usageError struct {
	msg     string
	hint    string // optional
	command string // "convkit lock status": whose --help shows the usage
}

func (e *usageError) Error() string { return e.msg }

// Hint returns the hint given when the error was made, if any.
func (e *usageError) Hint() string { return e.hint }

// usagef returns a usage error of the command running in c.
func usagef(c *ucli.Context, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), command: helpName(c)}
}

// usageWithHint is usagef with a hint.
func usageWithHint(c *ucli.Context, hint, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), hint: hint, command: helpName(c)}
}

// partialError reports a job that finished but skipped some items or could
// not read them (exit 3): reindex skipped a conversation, backup met an
// unreadable file. The message says how many and where the details are.
type partialError struct {
	msg string
}

func (e *partialError) Error() string { return e.msg }

// partialf returns a partialError.
func partialf(format string, args ...any) error {
	return &partialError{msg: fmt.Sprintf(format, args...)}
}

// errDone stops a run that has already done what was asked (--version
// printed the version): exit 0, nothing more printed.
var errDone = errors.New("done")

// exitCode maps an error to the process exit code. It is the only place
// that does: an interruption wins over everything, then usage errors, a held
// lock, partial success; anything else is a failure.
func exitCode(err error) int {
	var usage *usageError
	var partial *partialError
	switch {
	case err == nil, err == errDone:
		return exitOK
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.As(err, &usage):
		return exitUsage
	case errors.Is(err, store.ErrLocked):
		return exitLocked
	case errors.As(err, &partial):
		return exitPartial
	default:
		return exitFailure
	}
}

// report prints err to w and returns its exit code. It prints one line
//
//	convkit: error: <message>
//
// then a line "convkit: hint: <hint>" for a hint the error carries (a
// Hint() string method anywhere in its chain), and for a usage error a line
// naming the command's --help. Under --json a final exit_error object
// follows (docs/JSON.md). A nil err prints nothing.
func report(w io.Writer, err error, asJSON bool) int {
	code := exitCode(err)
	if err == nil || err == errDone {
		return code
	}
	msg := onePath(err)
	if err == context.Canceled { // bare: nothing more to say than this
		msg = "interrupted"
	}
	var hints []string
	var h interface{ Hint() string }
	if errors.As(err, &h) && h.Hint() != "" {
		hints = append(hints, h.Hint())
	} else if code == exitLocked {
		hints = append(hints, lockedHint)
	} else if errors.Is(err, store.ErrNoStore) {
		hints = append(hints, noStoreHint)
	}
	var usage *usageError
	if errors.As(err, &usage) {
		hints = append(hints, fmt.Sprintf("run '%s --help' for usage", usage.command))
	}

	// The message may quote a log or an archive (an entry name, an id):
	// escaped for the terminal, once, here. The JSON object keeps it exact.
	fmt.Fprintf(w, "%s: error: %s\n", progName, display.Escape(msg))
	for _, hint := range hints {
		fmt.Fprintf(w, "%s: hint: %s\n", progName, display.Escape(hint))
	}
	if asJSON {
		_ = writeJSON(w, exitErrorMessage{MessageType: "exit_error", Code: code, Message: msg})
	}
	return code
}

// onePath is err's message with each file named once. A system call's
// error names its file ("write F: no space left on device"), and the
// callers that wrap it often name the file too ("write F: write F: no
// space left on device"): a *fs.PathError or *os.LinkError whose file the
// message names before it loses its own mention ("write F: write: no
// space left on device").
func onePath(err error) string {
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
	return collapsePaths(msg)
}

// repeatedPath matches "P: OP P: " with an absolute path P on both sides
// (checked equal by collapsePaths): a message that went through a string
// (a summary's failure text) keeps the shape of the wrapped error.
var repeatedPath = regexp.MustCompile(`(/[^\s:"]+): ([a-z]+) (/[^\s:"]+): `)

// collapsePaths rewrites "OP1 P: OP2 P: cause" as "OP1 P: OP2: cause".
func collapsePaths(msg string) string {
	for start := 0; start < len(msg); {
		m := repeatedPath.FindStringSubmatchIndex(msg[start:])
		if m == nil {
			break
		}
		p1, op, p2 := msg[start+m[2]:start+m[3]], msg[start+m[4]:start+m[5]], msg[start+m[6]:start+m[7]]
		if p1 != p2 {
			start += m[3]
			continue
		}
		repl := p1 + ": " + op + ": "
		msg = msg[:start+m[0]] + repl + msg[start+m[1]:]
		start += m[0] + len(repl)
	}
	return msg
}

// exitErrorMessage is the last thing printed on stderr under --json when a
// command fails.
type exitErrorMessage struct {
	MessageType string `json:"message_type"`
	Code        int    `json:"code"`
	Message     string `json:"message"`
}

// hintErr carries a hint for the operator beside an error.
type hintErr struct {
	err  error
	hint string
}

func (e *hintErr) Error() string { return e.err.Error() }
func (e *hintErr) Unwrap() error { return e.err }
func (e *hintErr) Hint() string  { return e.hint }

// withHint attaches a hint to err.
func withHint(err error, hint string) error { return &hintErr{err: err, hint: hint} }
