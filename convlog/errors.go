package convlog

import (
	"errors"
	"fmt"
	"strings"
)

// ErrCorrupt is wrapped by every error that reports a log whose bytes break
// the format. ErrUnsupported is wrapped when the bytes are intact but this
// build cannot interpret them (a newer version, an unknown required event).
var (
	ErrCorrupt     = errors.New("corrupt log")
	ErrUnsupported = errors.New("unsupported log")
)

// Position locates a problem in a log. Line is 1-based (0 when unknown).
// Offset is the byte offset of the line in the log's plain text (of a
// problem with a whole frame: where the frame's text begins); for a
// compressed log Frame (1-based) and FrameOffset (the frame's byte offset in
// the file) say where its compressed bytes are. A negative Offset is not
// known (a frame found damaged before the frames ahead of it were decoded).
type Position struct {
	Line        int64
	Offset      int64
	Frame       int64
	FrameOffset int64
	Column      int64 // 1-based column within the line, when known
}

func (p Position) String() string {
	var parts []string
	if p.Line > 0 {
		s := fmt.Sprintf("line %d", p.Line)
		if p.Column > 0 {
			s += fmt.Sprintf(" column %d", p.Column)
		}
		parts = append(parts, s)
	}
	if p.Frame > 0 {
		parts = append(parts, fmt.Sprintf("frame %d at file byte %d", p.Frame, p.FrameOffset))
		if p.Offset >= 0 {
			parts = append(parts, fmt.Sprintf("plain byte %d", p.Offset))
		}
	} else {
		parts = append(parts, fmt.Sprintf("byte %d", p.Offset))
	}
	return strings.Join(parts, ", ")
}

// FormatError is a problem with a log's content, naming the file and where.
type FormatError struct {
	Path string
	Pos  Position
	Msg  string
	// Kind is ErrCorrupt or ErrUnsupported.
	Kind error

	tooLong bool  // an over-long line: the reader can go on after it
	cause   error // what else the error is (durable.ErrSymlink, ...), or nil
}

func (e *FormatError) Error() string {
	return fmt.Sprintf("%s: %s: %s", e.Path, e.Pos, e.Msg)
}

func (e *FormatError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.Kind, e.cause}
	}
	return []error{e.Kind}
}
