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

// lockedHint is the hint of a held lock, unless the error brings its own.
const lockedHint = "'convkit lock status' shows the holder; --lock-timeout DURATION waits for it"

// noStoreHint is the hint of a missing store: the directory is likely mistyped.
const noStoreHint = "name the store's data directory with --data-dir DIR or $CONVKIT_DATA_DIR"

// exitError is an error that sets the exit code, brings a hint for the
// operator, or both; silent: its failure was printed already.
type exitError struct {
	err     error
	code    int    // 0: the rest of the chain decides
	hint    string // optional
	command string // of a usage error, "convkit lock status": whose --help shows the usage
	silent  bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
func (e *exitError) Hint() string  { return e.hint }

// usagef returns a usage error of the command running in c.
func usagef(c *ucli.Context, format string, args ...any) error {
	return usageWithHint(c, "", format, args...)
}

func usageWithHint(c *ucli.Context, hint, format string, args ...any) error {
	return &exitError{err: fmt.Errorf(format, args...), code: exitUsage, hint: hint, command: helpName(c)}
}

func partialf(format string, args ...any) error {
	return &exitError{err: fmt.Errorf(format, args...), code: exitPartial}
}

func withHint(err error, hint string) error { return &exitError{err: err, hint: hint} }

// errDone stops a run that has done what was asked (--version): exit 0.
var errDone = errors.New("done")

// exitCode maps an error to the exit code, the only place that does: an
// interruption wins, then usage errors, a held lock, partial success.
func exitCode(err error) int {
	var ee *exitError
	coded := errors.As(err, &ee) && ee.code != 0
	switch {
	case err == nil, err == errDone:
		return exitOK
	case coded && ee.silent:
		return ee.code
	case errors.Is(err, context.Canceled):
		return exitInterrupted
	case coded && ee.code == exitUsage:
		return exitUsage
	case errors.Is(err, store.ErrLocked):
		return exitLocked
	case coded:
		return ee.code
	}
	return exitFailure
}

// report prints err to w as "convkit: error: <message>", a "convkit: hint:"
// line for each hint (a Hint() string method in its chain; a usage error's
// --help) and, under --json, an exit_error object (docs/JSON.md).
func report(w io.Writer, err error, asJSON bool) int {
	code := exitCode(err)
	var ee *exitError
	if err == nil || err == errDone || errors.As(err, &ee) && ee.silent {
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
	if code == exitUsage && errors.As(err, &ee) {
		hints = append(hints, fmt.Sprintf("run '%s --help' for usage", ee.command))
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

// exitErrorMessage ends stderr under --json when a command fails.
type exitErrorMessage struct {
	MessageType string `json:"message_type"`
	Code        int    `json:"code"`
	Message     string `json:"message"`
}
