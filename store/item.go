package store

// Item is one entry of a store a command reports: its Kind, conversation,
// file and a Reason that never repeats Path. In JSON its list says its kind.
type Item struct {
	Kind   ItemKind `json:"-"`
	ID     string   `json:"id,omitempty"`
	Path   string   `json:"path"`
	Reason string   `json:"reason"`
}

func (it Item) String() string { return it.Path + ": " + it.Reason }

// ItemKind says what an Item reports.
type ItemKind string

// What the commands report of an entry.
const (
	// Found, and left as it is.
	ItemSkipped    ItemKind = "skipped"    // out of shape, or a conversation that cannot be read
	ItemIgnored    ItemKind = "ignored"    // a stray file, not a conversation
	ItemUnreadable ItemKind = "unreadable" // left out: it cannot be read
	ItemInvalid    ItemKind = "invalid"    // a log that fails its check, kept whole
	ItemWarning    ItemKind = "warning"    // out of shape: the command says what it did with it
	ItemMismatch   ItemKind = "mismatch"   // an archive's entry that disagrees with its manifest
	// ItemWillNotOpen: a conversation that will not open on this machine
	// (Reason: store.Machine's reasons, joined by "; ").
	ItemWillNotOpen ItemKind = "will-not-open"
	// ItemNotLocked: runtime.lock (Path) could not be taken though no
	// process holds it (Reason: why), so the command runs beside any.
	ItemNotLocked ItemKind = "not-locked"
	// ItemTempKept: a temporary file an interrupted run left that could
	// not be removed (Reason: whose, and why).
	ItemTempKept ItemKind = "temp-kept"

	// Changed.
	ItemTempRemoved      ItemKind = "temp-removed"      // a temporary file or directory an interrupted run left (Reason: whose), removed
	ItemDeletionFinished ItemKind = "deletion-finished" // a conversation whose log carries a delete's tombstone, removed
	ItemEmptyRemoved     ItemKind = "empty-removed"     // the empty directory an interrupted deletion left, removed
	ItemTurnClosed       ItemKind = "turn-closed"       // a turn a crash left open, closed as interrupted

	// What a rebuilt index does with a conversation (reindex.Accept), beside ItemSkipped.
	ItemIndexed ItemKind = "indexed"
	ItemDeleted ItemKind = "deleted" // its deletion is finished, never indexed
)
