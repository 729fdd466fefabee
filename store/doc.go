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
// Each stage of a turn is recorded as it happens, and nothing written is
// rewritten (docs/FORMAT.md, "What a turn records"):
//
//	prompt, _ := convlog.NewStoredMessage(msgID, "user", convlog.Source{Kind: convlog.SourceUser}, content)
//	turn, err := se.BeginTurn(prompt) // admitted; the chat reads as running; the turn starts
//	err = se.Append(stepStart, systemMessage, userMessage, requestHeader)
//	err = se.Append(answer)           // every successful model call, an empty one too
//	err = se.Append(toolCall, toolResult, stepEnd)
//	err = se.Steer(msg)               // a message sent while the turn runs
//	err = se.EndTurn("completed")     // the turn ends; the chat reads as idle
//
// Append writes one durable batch (fsynced before it returns). Every
// stored message needs an identity and a source (convlog.StoredMessage: a
// request-only convlog.RequestMessage cannot be passed for one), and the
// turn's events keep their path (a step inside a turn; requests, answers,
// tool calls and results inside a step; a result answers a call of its
// turn). The writer checks both before anything is written and refuses a
// batch that breaks them with a *convlog.RuleError (errors.Is
// convlog.ErrMessageIdentity, convlog.ErrTurnPath, convlog.ErrHistory): what
// the runtime can write, convkit reads as valid. A model call that fails
// with a temporary error is recorded as assistant/attempt, then llm/retry,
// before the next attempt; a turn whose model call fails for good ends with
// EndTurn("error").
//
// When the user interrupts, Interrupt ends the turn keeping what was
// produced: the partial answer the runtime passes is recorded marked
// interrupted, every tool call without a result gets an interrupted
// result, the step and the turn end (reason interrupted).
//
// # The index
//
// metadata.db is derived: every change is in a log before the index hears
// of it. After a flushed change listing cares about (a turn started or
// ended, a title, a new session), the runtime updates the conversation's
// rows with one incremental call:
//
//	db, err := index.Open(st.IndexPath())
//	_, err = reindex.Update(ctx, db, st, convID, reindex.UpdateOptions{})
//
// A missing or unusable index is rebuilt from the logs by reindex.Run (the
// runtime holds the lock it needs), as convkit reindex does.
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
// # Reading
//
// ReadConversation replays a conversation log (title, sessions, turns,
// running or idle, fork lineage); package transcript reads what clients
// show of a session; package chatread is the read-only chat-reading API a
// deployment may give its agents. Readers take no lock: Open with
// LockNone never blocks the runtime.
package store
