// Package hostile holds the catalogue of hostile inputs that convkit is
// tested against at the command-line level. It has no code of its own: the
// catalogue is its tests (catalogue_test.go and the files beside it).
//
// Each case builds a store, a log or an archive with one hostile thing in
// it (a corrupt zstd frame, a seq gap, a 100 MB line, a FIFO where a log
// should be, an archive entry with "..", a decompression bomb, a full or
// read-only file system, ...) in a temporary directory, snapshots the whole
// tree (paths, types, modes and content hashes, runtime.lock included),
// runs one convkit command through cli.Main with injected stdout and stderr,
// and asserts:
//
//   - the exit code (docs/CLI.md: 0, 1, 3, ...);
//   - that stderr names the file, the position the error kind has (line,
//     byte offset, frame, tar entry) and what was expected;
//   - that nothing changed on disk except the command's documented outputs,
//     listed per case (a rebuilt metadata.db, migrate's report folder, a
//     v4 successor of a good log, runtime.lock's holder record);
//   - that stdout carries results only, never error text.
//
// The table of cases, the command each runs and the exit code it expects
// are in docs/HOSTILE.md.
package hostile
