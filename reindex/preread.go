package reindex

import (
	"bytes"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/index"
)

// A Preread is what indexing one session log takes from it, found by a
// strict read another job did anyway (import), so the log is not read again
// while it keeps the stat identity it had before that read.
type Preread struct {
	ident  []byte
	Events int64
	Bytes  int64
	Parent string
	// Msgs are the messages Run indexes; Load, when set, gives them instead.
	Msgs []index.Message
	Load func() ([]index.Message, error)
}

// Prereads looks up the Preread of the session log at path in the store.
type Prereads func(path string) *Preread

// SessionIndexer collects a session log's Preread from a strict read: Begin
// once the log is open, Add with every event, Finish at io.EOF.
type SessionIndexer struct {
	sessionID string
	ident     []byte
	rules     *convlog.Validator
	msgs      []index.Message
	refused   bool
}

// NewSessionIndexer takes the identity of the log at path: call it before opening it.
func NewSessionIndexer(path, sessionID string) *SessionIndexer {
	return &SessionIndexer{sessionID: sessionID, ident: identity(path)}
}

// Begin takes the rules from the log's header.
func (x *SessionIndexer) Begin(r *convlog.Reader) {
	x.rules = convlog.NewValidator(r.Header())
}

// Add takes one event; after one the rules refuse, Finish gives no Preread.
func (x *SessionIndexer) Add(e *convlog.Event) {
	if x.refused || x.rules == nil {
		x.refused = true
		return
	}
	if err := x.rules.Check(e); err != nil {
		x.refused, x.msgs = true, nil
		return
	}
	if m, ok := indexedMessage(e, x.rules.Message(), x.sessionID); ok {
		x.msgs = append(x.msgs, m)
	}
}

// Finish is the log's Preread, nil when the rules refused it.
func (x *SessionIndexer) Finish(r *convlog.Reader) *Preread {
	if x.refused || x.rules == nil || x.rules.Finish() != nil || x.ident == nil {
		return nil
	}
	st := r.Stats()
	return &Preread{ident: x.ident, Events: st.Events, Bytes: st.FileBytes, Parent: r.Header().ParentSession, Msgs: x.msgs}
}

// identity is the log's line of the fingerprint, nil when it cannot be stated.
func identity(path string) []byte {
	var b bytes.Buffer
	fingerprint(&b, nil, path)
	if bytes.IndexByte(b.Bytes(), 0) < 0 {
		return nil
	}
	return b.Bytes()
}

// preread is the Preread still standing for the log at path, with its messages.
func (env readEnv) preread(path string) (pr *Preread, msgs []index.Message, ok bool) {
	if env.prereads == nil {
		return nil, nil, false
	}
	pr = env.prereads(path)
	if pr == nil || pr.ident == nil || !bytes.Equal(pr.ident, identity(path)) {
		return nil, nil, false
	}
	msgs = pr.Msgs
	if pr.Load != nil {
		m, err := pr.Load()
		if err != nil {
			return nil, nil, false
		}
		msgs = m
	}
	if !env.withText {
		msgs = nil
	}
	return pr, msgs, true
}
