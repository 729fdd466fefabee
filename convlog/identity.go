package convlog

import (
	"errors"
	"fmt"

	"github.com/convkit/convkit/internal/termtext"
)

// ErrIdentity is wrapped by an IdentityError: the log's header names
// another log than its place in the store does.
var ErrIdentity = errors.New("log header names another log than its place")

// IdentityError refuses a log whose header names another log than its path
// (one copied or renamed): its events belong elsewhere.
type IdentityError struct {
	Path string // "" from CheckIdentity
	// Msg says what is wrong, without the path.
	Msg string
	// ID and Version are the header's.
	ID      string
	Version int
}

func (e *IdentityError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

func (e *IdentityError) Unwrap() error { return ErrIdentity }

// CheckIdentity refuses a header that is not of the log of type typ
// (SessionLog when "") and id, with an *IdentityError naming no path.
func CheckIdentity(h *Header, typ, id string) error { return checkIdentity(h, typ, id, "") }

func checkIdentity(h *Header, typ, id, path string) error {
	if typ == "" {
		typ = SessionLog
	}
	e := &IdentityError{Path: path, ID: h.ID, Version: h.Version}
	switch {
	case typ == SessionLog && h.Type != SessionLog:
		e.Msg = fmt.Sprintf("header (line 1) is not a session header (type %s); its file name is session %s", termtext.Quote(h.Type), termtext.Quote(id))
	case typ == SessionLog && h.ID != id:
		e.Msg = fmt.Sprintf("session log header (line 1) names id %s, but its file name is session %s", termtext.Quote(h.ID), termtext.Quote(id))
	case typ == ConversationLog && h.Type != ConversationLog:
		e.Msg = fmt.Sprintf("not a conversation log (header type %s)", termtext.Quote(h.Type))
	case typ == ConversationLog && h.ID != id:
		e.Msg = fmt.Sprintf("conversation log names id %s, but its directory is %s", termtext.Quote(h.ID), termtext.Quote(id))
	case typ != SessionLog && typ != ConversationLog:
		e.Msg = fmt.Sprintf("no log type %s", termtext.Quote(typ))
	default:
		return nil
	}
	return e
}
