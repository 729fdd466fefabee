package convlog

// EventPosition is where the event yielded last begins: its line, the
// line's byte offset in the plain text and, for a compressed log, the frame
// its last byte came from. Problems a Validator finds are reported there.
func (r *Reader) EventPosition() Position {
	p := Position{Line: r.line, Offset: r.plainOff - int64(len(r.ev.Raw)) - 1}
	if r.comp == Zstd {
		p.Frame, p.FrameOffset = r.frame.Index, r.frame.Offset
	}
	return p
}

// RuleProblem is a Validator's refusal of the event yielded last, as
// a *FormatError at its position (ErrCorrupt: the bytes are read, but they
// break the format's rules). Other errors are returned as they are.
func (r *Reader) RuleProblem(err error) error {
	re, ok := err.(*RuleError)
	if !ok {
		return err
	}
	return &FormatError{Path: r.path, Pos: r.EventPosition(), Msg: re.Error(), Kind: ErrCorrupt, cause: re}
}

// Path is the file the writer appends to.
func (w *Writer) Path() string { return w.path }
