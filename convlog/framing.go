package convlog

// A compressed log's canonical framing is the writer's: frame 1 exactly the
// header line, then one frame per append batch, each ending between two
// lines. The zstd tool writes other framings of the same text (one frame
// for the whole file, or frames cut anywhere): readers take them, since
// the plain text is what the format is; inspect --validate warns, and a
// writer appends canonical frames after them.

// Framing describes how a compressed log's frames depart from the
// canonical framing.
type Framing struct {
	// Departures counts the places it does: a header line not alone in
	// frame 1, each frame that ends inside a line.
	Departures int64
	// First describes the first one, with its position; FirstFrame and
	// FirstOffset are the frame it is in and that frame's byte offset.
	First                   string
	FirstFrame, FirstOffset int64
}

// Canonical reports whether the framing is the writer's.
func (f Framing) Canonical() bool { return f.Departures == 0 }

// alignedMark is a frame start that falls between two lines: a writer can
// cut the file there. lines counts the complete lines read since.
type alignedMark struct {
	file, plain, lines int64
}

func (r *Reader) noteFraming(what string) {
	if r.stats.Framing.Departures == 0 {
		r.stats.Framing.First = what
		r.stats.Framing.FirstFrame, r.stats.Framing.FirstOffset = r.frame.Index, r.frame.Offset
	}
	r.stats.Framing.Departures++
}

// tornAtAligned ends the read at a torn tail: the committed prefix ends at
// the last frame start between two lines, and the complete lines read since
// are recovered.
func (r *Reader) tornAtAligned() {
	r.stats.TornTail = true
	r.stats.CommittedBytes = r.aligned.file
	r.stats.RecoveredLines = r.aligned.lines
	r.carry = r.carry[:0]
	r.done = true
}
