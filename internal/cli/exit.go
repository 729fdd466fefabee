package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	ucli "github.com/urfave/cli/v2"

	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// Exit codes, the same for every command. Keep exitStatuses, README.md and
// docs/CLI.md in step with them.
const (
	exitOK          = 0
	exitFailure     = 1   // failure, including any item that failed
	exitUsage       = 2   // bad flags or arguments, before any data is touched
	exitPartial     = 3   // finished, but some items were skipped or unreadable
	exitLocked      = 11  // runtime.lock is held by another process
	exitInterrupted = 130 // SIGINT or SIGTERM
)

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

func (e *usageError) Hint() string { return e.hint }

// usagef returns a usage error of the command running in c.
func usagef(c *ucli.Context, format string, args ...any) error {
	return usageWithHint(c, "", format, args...)
}

func usageWithHint(c *ucli.Context, hint, format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...), hint: hint, command: helpName(c)}
}

// partialError reports a job that finished but skipped some items or could
// not read them (exit 3); the message says how many and where the details are.
type partialError struct {
	msg string
}

func (e *partialError) Error() string { return e.msg }

func partialf(format string, args ...any) error {
	return &partialError{msg: fmt.Sprintf(format, args...)}
}

// errDone stops a run that has already done what was asked (--version
// printed the version): exit 0, nothing more printed.
var errDone = errors.New("done")

// silentExit ends a run with its exit code and prints nothing: what went
// wrong was printed already (help runs the command line again for the
// help it prints).
type silentExit int

func (e silentExit) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// exitCode maps an error to the process exit code. It is the only place
// that does: an interruption wins over everything, then usage errors, a held
// lock, partial success; anything else is a failure.
func exitCode(err error) int {
	var usage *usageError
	var partial *partialError
	var silent silentExit
	switch {
	case err == nil, err == errDone:
		return exitOK
	case errors.As(err, &silent):
		return int(silent)
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

// report prints err to w as "convkit: error: <message>", a "convkit: hint:"
// line for a hint in its chain (a Hint() string method) and, for a usage
// error, one naming the command's --help; under --json an exit_error object
// follows (docs/JSON.md). It returns the exit code.
func report(w io.Writer, err error, asJSON bool) int {
	code := exitCode(err)
	var silent silentExit
	if err == nil || err == errDone || errors.As(err, &silent) {
		return code
	}
	// A system call's error wrapped by a message naming its file already
	// is worded from the chain (termtext), so a file is named once.
	msg := termtext.Text(err)
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
	// Escaped once, here; the JSON object keeps it exact.
	fmt.Fprintf(w, "%s: error: %s\n", progName, termtext.Escape(msg))
	for _, hint := range hints {
		fmt.Fprintf(w, "%s: hint: %s\n", progName, termtext.Escape(hint))
	}
	if asJSON {
		_ = writeJSON(w, exitErrorMessage{MessageType: "exit_error", Code: code, Message: msg})
	}
	return code
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

func withHint(err error, hint string) error { return &hintErr{err: err, hint: hint} }
