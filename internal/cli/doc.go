// Package cli is the convkit command line: argument parsing, rendering of
// results, exit codes and progress bars. It is the only package, with
// cmd/convkit, that imports urfave/cli and progressbar; the work itself is
// done by library packages that know nothing of flags or terminals.
//
// # Adding a command
//
// Each command lives in its own file with one constructor,
//
//	func newXCommand(e *env) *ucli.Command
//
// listed in commandGroups (app.go). The constructor declares the
// command's own flags (never a global flag name: --data-dir, --json,
// --quiet, --lock-timeout belong to the root only) and an Action that
//
//  1. checks its positional arguments with checkArgs,
//  2. builds the library's options from the flags and e.g (the global flags;
//     e.g.dataDir() resolves the data directory),
//  3. calls the library with c.Context, and
//  4. renders the result to e.stdout (text, or one JSON document under
//     e.g.JSON via writeJSON).
//
// Actions never print errors and never exit: they return the error, and Main
// prints it once and maps it to the exit code (exit.go). Errors a user can
// fix carry a hint (a Hint() string method); bad invocations are usageErrors
// (usagef), and jobs that finished but skipped items return a partialError
// (partialf). Logs, warnings and progress go to e.stderr; progress bars come
// from newProgress, which shows them only on a terminal.
//
// Text renderings escape every string that comes from a log, an archive or
// the store with text or quoted (termtext.Escape); library lines are passed
// through e.libraryLines, which escapes them and, under --quiet, keeps the
// problems only. JSON is never escaped. Progress counts something named:
// e.newProgress("migrate", "logs", total).
//
// app.go completes every command after construction: it appends the EXIT
// STATUS table to the Description, installs the usage-error handler, and
// gives command groups (commands with Subcommands) an Action that refuses a
// missing or unknown subcommand. Main puts every command line into the
// order urfave/cli parses before it parses (grammar.go): global flags
// anywhere, options before or after arguments, "--" ends them. The help,
// the completion scripts (completion.go) and the man page (help.go) come
// from the same definitions.
package cli
