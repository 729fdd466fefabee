package convlog

import "fmt"

// LineChecker checks event lines one at a time as a Reader reads them: the
// envelope, the type's rules, the seq expected. A writer
// that produces a log's lines itself (an upgrade's successor) checks what
// it writes with it, before the bytes reach the file, instead of reading
// the file back. It is not safe for concurrent use: one per goroutine.
type LineChecker struct {
	path   string
	parser envelopeParser
	ev     Event
}

// NewLineChecker checks the event lines of a log of header h (path names
// it in errors).
func NewLineChecker(path string, h *Header) *LineChecker {
	c := &LineChecker{path: path}
	c.parser.version = h.Version
	return c
}

// Check checks one event line (without its newline), which must carry
// seq, and returns its event, valid until the next Check. line is the
// log's line number, for the error.
func (c *LineChecker) Check(text []byte, seq, line int64) (*Event, error) {
	if prob := c.parser.parse(text, seq, &c.ev); prob != nil {
		return nil, &FormatError{Path: c.path, Pos: Position{Line: line, Column: int64(prob.col) + 1}, Msg: prob.msg, Kind: prob.kind}
	}
	if c.ev.Packed > 0 {
		return nil, &FormatError{Path: c.path, Pos: Position{Line: line}, Kind: ErrCorrupt,
			Msg: fmt.Sprintf("a packed %s row: one event per line from version 2 on", c.ev.Type)}
	}
	return &c.ev, nil
}
