package convlog

import "fmt"

// LineChecker checks event lines as a Reader reads them (envelope, type,
// seq), so that a writer of a whole log (an upgrade's successor) checks
// its lines before they reach the file; one per goroutine.
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
