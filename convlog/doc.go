// Package convlog is the chat log format: one log file of JSON Lines (a
// header, then one event per line), plain or as checksummed zstd frames, of
// every format version 0 to 4; docs/FORMAT.md is its authority.
//
// The runtime does not open logs itself: the store package is where it
// starts (its doc is the runtime's manual: store.Open, Store.NewConversation
// and Store.OpenSession, then the typed calls from Session.BeginTurn through
// Session.BeginStep, Session.BeginModelCall and Session.ToolResult to
// Session.EndTurn), and store writes through this package. What this
// package provides, for the store, the commands and the runtime's own
// checks:
//
//   - Reading: Open (never through a link, a regular file only) or
//     NewReader (any io.ReaderAt; Bytes for a log in memory), then a
//     range over Reader.Events, one event at a time with memory bounded
//     by the longest line, a torn tail tolerated and never touched, every
//     zstd framing of the same text read (Stats.Framing says how it
//     departs from the writer's), and FrameScanner and CommittedPrefix for
//     copies of a live log.
//   - Writing: Create publishes a new version 4 log without overwriting;
//     OpenAppend and Writer.Append add durable batches (one zstd frame
//     each), cutting a torn tail before the first; FrameWriter writes a
//     whole log at once (an upgrade's successor), frames compressed in
//     parallel and each decoded again.
//   - The rules beyond one line: every payload's schema (one per event
//     type, schemas.go), a stored message's identity and source
//     (StoredMessage, NewStoredMessage), the turn's path, the history's
//     replacements and the relationships between events. Validator checks
//     them event by event for the writer (a batch that breaks one is
//     refused with a *RuleError naming the event and the member before
//     anything is written); Admit runs it over a whole log, as a version 4
//     reader admits it, for inspect --validate and --history, migrate and
//     reindex alike. Writer.Turn says where a turn stands, and CloseTurn
//     builds the events that close an interrupted one.
//   - The history a model reads: History, with one interpreter per surface
//     type (schemas.go).
//
// Older versions are read as they are; the upgrade package turns them
// into version 4 events.
package convlog
