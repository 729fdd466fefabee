// Package store owns the convkit data directory: where it is, its layout and
// the names in it, runtime.lock, and the conversation log. The runtime server,
// every convkit command, fixtures and tests get at a store through Open, the
// one place runtime.lock is taken, and read and write it through the Store
// handle it returns; a directory that is not a store is refused unless the
// caller asks Open to create one.
//
// This doc is the runtime's manual: how the runtime server writes the
// store, from start to stop. Example shows the whole path in code;
// docs/FORMAT.md is the authority on what each step records.
//
// # Opening the store
//
// The runtime opens its data directory once, exclusively, and holds
// runtime.lock for its whole run:
//
//	st, err := store.Open(ctx, dataDir, store.OpenOptions{
//		Lock:        store.LockOptions{Mode: store.LockExclusive, Command: "runtime"},
//		Create:      store.CreateAlways, // its first run makes the store
//		Compression: convlog.Zstd,
//	})
//	defer st.Close()
//
// While it holds the lock, convkit's writing commands fail naming it (or
// wait, --lock-timeout) and its read-only commands go on beside it. Close
// closes every open log and releases the lock; the kernel drops the lock if
// the process dies, and what a crash leaves is closed at the next open (see
// "After a crash").
//
// # Conversations and sessions
//
// A conversation is kept from its first message. NewConversation writes
// nothing; the first BeginTurn writes the conversation (its root session's
// log, then its conversation log); a conversation opened and left without a
// message leaves nothing behind:
//
//	se, err := st.NewConversation(store.NewConversation{ID: id, Cwd: "/home/dev/src/app",
//		SessionID: rootID, Agent: "coder", Model: "deepseek-pro"})
//
// A conversation already on disk is resumed, session by session, with one
// call:
//
//	se, err := st.OpenSession(convID, sessionID)
//
// OpenSession opens the session's log for appending as the runtime's next
// write does: a log of an older format version is upgraded first, its
// version 4 successor published beside the untouched original (the lazy
// upgrade; package upgrade); and a turn a crash left open is closed as
// interrupted (Session.Repaired says what was closed). A session is open
// once per Store. Subagents are sessions of the same conversation:
//
//	child, err := se.Spawn(childID, "reviewer", "deepseek-flash")
//
// # A turn
//
// A Session is the recorder of one agent session: each stage of a turn is
// one typed call that fills in the seqs, times (the store's clock, Open's
// Now), turn and step numbers, surface operations and the payloads of
// docs/FORMAT.md, and refuses a call out of place, or a value the format
// cannot hold, with a *RecordError before anything is written
// (docs/FORMAT.md, "What a turn records"; Example shows each):
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
// Each call is one durable append (fsynced before it returns); Batch
// groups the calls of its function into one. Message ids come from the
// caller (NewMessageID makes them); the ids the recorder makes itself are
// documented with the call that makes them. Compact records a compaction,
// SubagentReport a subagent's report, Interrupt the user's interrupt
// (keeping what the call in flight had streamed), History the history the
// model reads with the interrupted marks, Fork and Rewind take message
// ids. Append remains for event types the format does not define (a
// plugin's); it refuses what breaks a rule with a *convlog.RuleError.
//
// # The index
//
// metadata.db is derived: every change is in a log before the index hears
// of it. The runtime gives the store a keeper once, after Open, and the
// store updates the index itself from then on:
//
//	k, _, err := reindex.NewKeeper(ctx, st, reindex.KeeperOptions{Machine: m})
//	defer k.Close()
//
// NewKeeper brings the index up to date (an incremental reindex, a rebuild
// when it is missing or older); the store then tells it every change of a
// conversation log (a conversation kept, a turn started or ended, a title,
// a subagent, a rename, a fork, a delete) and every change between turns,
// and it writes only what changed (IndexKeeper). The appends of a running
// turn reach the index with the turn's end: list reads the index all the
// while, and reindex --check reports the turn in flight as such.
//
// # Forks, edits and deletes
//
// Fork and Rewind copy a root session into a new conversation (after a
// compaction, the fork reads its older history from its source, and the
// dependency is recorded). Rename, Archive, Unarchive and MapCwd record
// their changes. Delete removes a conversation for good through its
// tombstone, refused while a turn runs (ErrTurnRunning) and while a fork
// made after a compaction reads older history from it (a *DependentsError
// wrapping ErrHasDependents: the dependents guard; CheckDelete is the guard
// alone, DeleteAll deletes a set together).
//
// # After a crash
//
// A crash leaves at most a torn tail (cut before the next append), a turn
// open, a deletion half done or a temporary file. OpenSession closes a
// session's open turn when the runtime resumes it; Repair (convkit repair)
// closes every one in the store, finishes deletions and removes temporary
// files, by appending only.
//
// # Whether a conversation opens here
//
// A Machine (LoadMachine) says whether a conversation will open on this
// machine: the working directory it records must exist here, the agents
// and models it used must be in the runtime's configuration (config.toml,
// RuntimeConfig), and the conversations it reads older history from (its
// fork sources) must be in the store. import checks the conversations of
// an archive with it, reindex and list those of the store (after a move by
// hand), and metadata.db records what it found.
//
// # Reading
//
// A store's files are reached through the handle only: Walk and
// WalkConversation list them, and each log is a Log value (FindLog, LogAt)
// that opens, checks and replays itself; LooseLog is for a file outside
// any store. PlaceConversation and ReplaceWith put a staged conversation,
// or a whole restored store, in place, moving what was there aside.
//
// ReadConversation replays a conversation log (title, sessions, turns,
// running or idle, fork lineage); package chatread reads what clients
// show of a session (ReadTranscript) and is the read-only chat-reading API
// a deployment may give its agents. Readers take no lock: Open with
// LockNone never blocks the runtime.
package store
