// Package store owns the convkit data directory: its place, layout and
// names, runtime.lock, and the conversation log. The runtime, every command,
// fixtures and tests get at a store only through Open, the one place
// runtime.lock is taken, and the Store handle it returns.
//
// This doc is the runtime's manual, from start to stop; Example shows the
// whole path in code and docs/FORMAT.md is the authority on what each step
// records.
//
// # Opening the store
//
// The runtime opens its data directory once and holds runtime.lock for its
// whole run, so convkit's writing commands fail naming it (or wait,
// --lock-timeout) while read-only commands go on beside it:
//
//	st, err := store.Open(ctx, dataDir, store.OpenOptions{
//		Lock:        store.LockOptions{Mode: store.LockExclusive, Command: "runtime"},
//		Create:      store.CreateAlways, // its first run makes the store
//		Compression: convlog.Zstd,
//	})
//	defer st.Close()
//
// # Conversations and sessions
//
// A conversation is kept from its first message: NewConversation writes
// nothing and the first BeginTurn writes its logs. OpenSession resumes a
// session on disk, upgrading an older log first (package upgrade) and
// closing a turn a crash left open (Session.Repaired). Subagents are
// sessions of the same conversation:
//
//	se, err := st.NewConversation(store.NewConversation{ID: id, Cwd: "/home/dev/src/app",
//		SessionID: rootID, Agent: "coder", Model: "deepseek-pro"})
//	se, err := st.OpenSession(convID, sessionID)
//	child, err := se.Spawn(childID, "reviewer", "deepseek-flash")
//
// # A turn
//
// A Session records one agent session: each stage of a turn is one typed
// call that fills in seqs, times (Open's Now), numbers and payloads, and
// refuses a call out of place with a *RecordError before anything is
// written:
//
//	prompt, _ := convlog.NewUserMessage(msgID, convlog.TextBlock(text))
//	turn, err := se.BeginTurn(prompt)   // admitted; running; turn/start
//	step, err := se.BeginStep()         // step/start
//	err = se.Request(req)               // system prompt, waiting input, request header
//	call, err := se.BeginModelCall()    // the answer as it streams in
//	call.Text(0, delta); call.Usage(u); call.Finish(reason)
//	err = call.Complete(answerID)       // every successful call, an empty one too
//	err = call.Retry(retry)             // or: a temporary failure, tried again
//	err = se.ToolCall(callID); err = se.ToolResult(result)
//	err = se.EndStep()
//	err = se.Steer(msg)                 // input sent while the turn runs
//	err = se.EndTurn(store.OutcomeCompleted, nil) // or OutcomeFailed with its error
//
// Each call is one durable append; Batch groups the calls of its function
// into one. Compact, Prune, Offload, SubagentReport, Interrupt, History,
// Fork and Rewind cover the rest, naming messages by id; Append is for
// event types no call records (a plugin's).
//
// # The index
//
// metadata.db is derived: every change is in a log before the index hears
// of it. The runtime sets a keeper once and the store updates the index
// from then on (IndexKeeper); a running turn reaches the index at its end:
//
//	k, _, err := reindex.NewKeeper(ctx, st, reindex.KeeperOptions{Machine: m})
//	defer k.Close()
//
// # Forks, edits and deletes
//
// Session.Fork and Session.Rewind copy a root session into a new
// conversation (after a compaction the fork reads older history from its
// source). Rename, Archive, Unarchive and MapCwd record their changes.
// DeleteAll removes a set of conversations, each through its tombstone, as
// one command; it is refused while a turn runs (ErrTurnRunning) or a fork
// depends on one (ErrHasDependents).
//
// # After a crash
//
// A crash leaves at most a torn tail, an open turn, a half-done deletion or
// a temporary file. OpenSession closes a session's open turn; Repair
// (convkit repair) closes every one, finishes deletions and removes
// temporary files, by appending only.
//
// # Whether a conversation opens here
//
// A Machine (LoadMachine) checks a conversation's working directory, its
// agents and models against config.toml, and its fork sources against the
// store; import, reindex and list use it.
//
// # Reading
//
// A store's files are reached through the handle only: Walk and
// WalkConversation list them, and each log is a Log value (FindLog, LogAt)
// that opens, checks and replays itself; LooseLog is for a file outside
// any store. PlaceConversation and ReplaceWith put a staged conversation,
// or a whole restored store, in place, moving what was there aside.
//
// ReadConversation replays a conversation log; package chatread is the
// read-only chat API. Readers open with LockNone and never block the
// runtime.
package store
