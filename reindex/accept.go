package reindex

import (
	"errors"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/termtext"
)

// Outcome is what a rebuilt index does with one conversation directory.
type Outcome string

// What Accept decides.
const (
	Indexed Outcome = "indexed"
	Skipped Outcome = "skipped"
	// Deleted: the deletion is finished, the conversation never indexed
	// (its log carries the tombstone of a delete, or its directory is the
	// empty remnant of one).
	Deleted Outcome = "deleted"
)

// Found is what a read of one conversation directory's current logs
// found: what Accept decides from.
type Found struct {
	// Dir is the directory; Empty: it holds nothing at all.
	Dir   string
	Empty bool
	// ConversationLog is the path of its current conversation log ("":
	// none); ConversationErr why it could not be replayed (a
	// *convlog.IdentityError: its header names another log).
	ConversationLog string
	ConversationErr error
	// Deleting: the replay found the tombstone of a delete.
	Deleting bool
	// Sessions are its current session logs in order, each with what
	// its read found wrong (nil: read whole and admitted). A reader may
	// stop at the first that failed: the later ones do not change the
	// outcome.
	Sessions []LogFound
}

// LogFound is one session log's read.
type LogFound struct {
	Path string
	Err  error
}

// Verdict is Accept's decision; a skip says which file (Path) and why
// (Reason, which does not repeat Path).
type Verdict struct {
	Outcome Outcome
	Path    string
	Reason  string
}

// Accept decides what a rebuilt index does with a conversation from what
// a read of its logs found: Run and Update apply it to their reads, and a
// backup to the logs it archives, so that a restore drill expects of the
// rebuild what the rebuild does.
func Accept(f Found) Verdict {
	switch {
	case f.ConversationLog == "" && f.Empty:
		return Verdict{Outcome: Deleted}
	case f.ConversationLog == "":
		return Verdict{Skipped, f.Dir, "no conversation log (metadata[.vN].jsonl[.zst]): an incomplete create, or not a conversation"}
	case f.ConversationErr != nil:
		return Verdict{Skipped, f.ConversationLog, logReason("unreadable conversation log", f.ConversationLog, f.ConversationErr)}
	case f.Deleting:
		return Verdict{Outcome: Deleted}
	}
	for _, s := range f.Sessions {
		if s.Err == nil {
			continue
		}
		what := "unreadable session log"
		if errors.Is(s.Err, convlog.ErrUnsupported) {
			what = "session log this build cannot read"
		}
		return Verdict{Skipped, s.Path, logReason(what, s.Path, s.Err)}
	}
	return Verdict{Outcome: Indexed}
}

// logReason is why the log at path is refused: what its header names
// instead, or what was wrong with it.
func logReason(what, path string, err error) string {
	var ie *convlog.IdentityError
	if errors.As(err, &ie) {
		return ie.Msg
	}
	return what + ": " + termtext.Reason(path, err)
}
