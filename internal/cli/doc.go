// Package cli is the convkit command line: argument parsing, rendering of
// results, exit codes and progress bars. With cmd/convkit it is the only
// package that imports urfave/cli and progressbar.
//
// # Adding a command
//
// A command is one constructor, func newXCommand(e *env) *ucli.Command,
// listed in commandGroups (app.go). It declares its own flags (never a
// global one's name) and an Action that checks its arguments (withArgs),
// builds the library's options from the flags and e.g, calls the library
// with c.Context and renders the result to e.stdout (text, or one JSON
// document via writeJSON under e.g.JSON).
//
// Actions never print errors and never exit: Main prints the error once and
// maps it to the exit code (exit.go). A fixable error carries a hint
// (withHint); bad invocations are usagef, jobs that skipped items partialf.
// Logs, warnings and progress (newProgress: on a terminal only) go to
// e.stderr. Text escapes every string from a log, an archive or the store
// (text, quoted; library lines through e.libraryLines); JSON is exact.
//
// complete (app.go) gives command groups an Action that refuses a missing
// subcommand; every help ends with its examples and the EXIT STATUS table
// (help.go). Main reorders every command line into what urfave/cli parses
// (grammar.go): global flags anywhere, options before or after arguments,
// "--" ends them. The help, completion scripts and man page come from the
// same definitions.
package cli
