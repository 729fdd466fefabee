package store

import (
	"fmt"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/termtext"
)

// A Replayer replays a conversation log from the events of a read its
// caller makes for its own ends (import's strict read of every log it
// extracts), so the log is not read a second time: given the reader of
// Log.Open and every event it returns, it finds what Log.ReadConversation
// finds, the same errors included.
type Replayer struct {
	st   *convState
	path string
	err  error
}

// Replayer starts the replay of the conversation log from r, a read of
// it opened with its ReaderOptions.
func (l Log) Replayer(r *convlog.Reader) *Replayer { return newReplayer(r, l.Path) }

func newReplayer(r *convlog.Reader, path string) *Replayer {
	h := r.Header()
	if h.Type != convlog.ConversationLog {
		return &Replayer{path: path, err: fmt.Errorf("%s: not a conversation log (header type %s)", path, termtext.Quote(h.Type))}
	}
	return &Replayer{st: newConvState(h, path), path: path}
}

// Add replays one event. After an error nothing more is replayed.
func (p *Replayer) Add(e *convlog.Event) {
	if p.err != nil {
		return
	}
	if err := p.st.apply(e); err != nil {
		p.err = fmt.Errorf("%s: %w", p.path, err)
	}
}

// Finish ends the replay once r returned io.EOF.
func (p *Replayer) Finish(r *convlog.Reader) (*ConversationInfo, error) {
	if p.err != nil {
		return nil, p.err
	}
	stats := r.Stats()
	p.st.info.TornTail = stats.TornTail
	p.st.info.LogBytes, p.st.info.LogModTime = stats.FileBytes, r.ModTime()
	return &p.st.info, nil
}
