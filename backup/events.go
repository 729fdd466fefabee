package backup

import "github.com/convkit/convkit/reindex"

// EventKind says what an Event reports.
type EventKind string

// What Write, Verify and Restore report as they go.
const (
	// EventOnline: runtime.lock could not be taken though nobody holds it
	// (Reason says why: a read-only file system, say); the backup goes on
	// online.
	EventOnline EventKind = "online"
	// EventUnreadable: a file left out of the backup, Reason why.
	EventUnreadable EventKind = "unreadable"
	// EventInvalid: a log that failed its check, archived whole.
	EventInvalid EventKind = "invalid"
	// EventWarning: an entry out of shape that was archived all the same.
	EventWarning EventKind = "warning"
	// EventMismatch: the archive disagrees with its manifest (Path is the
	// entry's name).
	EventMismatch EventKind = "mismatch"
	// EventRemovedStaging: a staging directory a killed restore left in
	// the store, removed.
	EventRemovedStaging EventKind = "removed-staging"
	// EventReindex: what the rebuild of a restored store reported.
	EventReindex EventKind = "reindex"
)

// Event is one thing a backup, a verification or a restore reports as it
// happens.
type Event struct {
	Kind   EventKind
	Path   string
	Reason string
	// Reindex is the rebuild's event (EventReindex).
	Reindex *reindex.Event
}

// emitter hands events to fn, or drops them when fn is nil.
func emitter(fn func(Event)) func(Event) {
	if fn == nil {
		return func(Event) {}
	}
	return fn
}

// reindexEvents forwards a rebuild's events as EventReindex.
func reindexEvents(fn func(Event)) func(reindex.Event) {
	return func(ev reindex.Event) { fn(Event{Kind: EventReindex, Path: ev.Path, Reason: ev.Reason, Reindex: &ev}) }
}
