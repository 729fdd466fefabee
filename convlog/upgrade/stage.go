package upgrade

import (
	"bytes"
	"fmt"
	"os"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/rawjson"
)

const (
	// tailFrameMin is the length past which a successor's last line gets a
	// frame of its own: copiers and appenders decode the last frame.
	tailFrameMin = 64 << 10
	// writebackBytes is written before its writeback starts: the final
	// fsync waits for the last megabytes only.
	writebackBytes = 4 << 20
	// stageEncoders is how many frames of one log are compressed at once:
	// a second core.
	stageEncoders = 2
)

// Test hooks: stageWritten gets the stage's path before its fsync;
// linesTampered changes a chunk before its check.
var (
	stageWritten  func(path string)
	linesTampered func(lines []byte, j *lineChunk)
)

// lineChunk is a frame of event lines, with the events it was made of.
type lineChunk struct {
	plain                       []byte
	firstSeq, firstLine, events int64
	msgs                        []byte // their message ids (noteMessage)
}

// stageCheck checks a successor's chunks, one at a time, in order.
type stageCheck struct {
	lines *convlog.LineChecker
	rules *convlog.Validator
	src   string // named in refusals
	ids   []byte // the message ids of the lines checked (noteMessage)
}

// writeStage writes the header line and the upgraded events to f in frames of
// about 1 MiB of whole lines, each checked as a read-back would check it; the
// MAC tags of the read-back prove the file holds exactly the checked frames.
func writeStage(f *os.File, r *Reader, comp convlog.Compression) (*staged, error) {
	st, err := newStaged()
	if err != nil {
		return nil, err
	}
	wb := durable.NewWriteback(f, writebackBytes)
	defer wb.Close()
	write := func(b []byte) error {
		if _, err := wb.Write(b); err != nil {
			return fmt.Errorf("write %s: %w", f.Name(), err)
		}
		st.add(b)
		return nil
	}
	header := r.Header()
	fw, err := convlog.NewFrameWriter(write, f.Name(), header, convlog.FrameWriterOptions{Compress: comp == convlog.Zstd, Parallel: stageEncoders})
	if err != nil {
		return nil, fmt.Errorf("staged successor failed verification: %w", err)
	}
	defer fw.Close()
	sc := &stageCheck{lines: convlog.NewLineChecker(f.Name(), header), rules: convlog.NewValidator(header), src: r.path}
	job := &lineChunk{firstLine: 2}
	emit := func() error {
		j, lines := job, job.plain
		job, j.plain = &lineChunk{firstSeq: j.firstSeq + j.events, firstLine: j.firstLine + j.events}, nil // the writer's now
		return fw.Add(lines, j.firstLine, func(b []byte) error { return sc.check(j, b) })
	}
	// A lifted tool result's data is written where its line puts it.
	room := r.room
	if room != nil {
		room.grow = func(n int) []byte {
			job.plain = fw.Grow(job.plain, n)
			return job.plain
		}
		defer func() { room.grow = nil }()
	}
	var around [256]byte
	// Where the chunk's last line and its message ids start (tailFrameMin).
	var lastLine, lastMsgs int
	for ev, err := range r.Events() {
		if err != nil {
			return nil, err
		}
		lastLine, lastMsgs = len(job.plain), len(job.msgs)
		inPlace := false
		if room.placed(ev.Data) {
			room.start = nil
			if ev.Raw == nil {
				job.plain, inPlace = lineInPlace(job.plain, ev, room.off, around[:0])
			}
			if !inPlace {
				// Out of the spare room the line is appended to.
				ev.Data = bytes.Clone(ev.Data)
			}
		}
		if !inPlace {
			job.plain = ev.AppendJSON(fw.Grow(job.plain, eventSize(ev)+1))
		}
		job.plain = append(job.plain, '\n')
		job.events++
		job.msgs = noteMessage(job.msgs, ev)
		if len(job.plain) >= convlog.FrameBytes {
			if err := emit(); err != nil {
				return nil, err
			}
		}
	}
	if comp == convlog.Zstd && job.events > 1 && len(job.plain) > tailFrameMin {
		// The last line in a frame of its own, after the rest.
		line, msgs := bytes.Clone(job.plain[lastLine:]), bytes.Clone(job.msgs[lastMsgs:])
		job.plain, job.msgs, job.events = job.plain[:lastLine], job.msgs[:lastMsgs], job.events-1
		if err := emit(); err != nil {
			return nil, err
		}
		job.plain, job.msgs, job.events = line, msgs, 1
	}
	if len(job.plain) > 0 {
		if err := emit(); err != nil {
			return nil, err
		}
	}
	if err := fw.Close(); err != nil {
		return nil, err
	}
	if err := sc.rules.Finish(); err != nil {
		return nil, sc.refuse(err)
	}
	return st, nil
}

// refuse words a rule the successor would break: a reader would refuse it.
func (sc *stageCheck) refuse(err error) error {
	return fmt.Errorf("%s: not converted: its successor would break a rule that reindex and inspect --validate check: %w (inspect --validate lists the source's problems)", sc.src, err)
}

// lineInPlace writes ev's line into chunk around its data, already at off in
// the spare room; ok is false, chunk unchanged, when it does not fit.
func lineInPlace(chunk []byte, ev *convlog.Event, off int, tmp []byte) (_ []byte, ok bool) {
	around, p := lineAround(ev, tmp)
	n0 := len(chunk)
	at := n0 + p
	if p < 0 || at+len(ev.Data) > cap(chunk) {
		return chunk, false
	}
	line := chunk[:at+len(ev.Data)]
	if at != off {
		copy(line[at:], ev.Data)
		ev.Data = line[at:]
	}
	copy(line[n0:at], around[:p])
	return append(line, around[p+len("null"):]...), true
}

// eventSize is about the length of ev's line (exactly for one read).
func eventSize(ev *convlog.Event) int {
	if ev.Raw != nil {
		return len(ev.Raw)
	}
	return len(ev.Type) + len(ev.Data) + 96 + 12*len(ev.SourceEventSeqs)
}

// check checks j's lines as a reader would and against the rules, and
// their count and message ids against the events produced.
func (sc *stageCheck) check(j *lineChunk, lines []byte) error {
	if linesTampered != nil {
		linesTampered(lines, j)
	}
	sc.ids = sc.ids[:0]
	rest := lines
	seq, line := j.firstSeq, j.firstLine
	for len(rest) > 0 {
		k := bytes.IndexByte(rest, '\n') // a frame's lines end with one (Add)
		ev, err := sc.lines.Check(rest[:k], seq, line)
		if err != nil {
			return fmt.Errorf("staged successor failed verification: %w", err)
		}
		if err := sc.rules.Check(ev); err != nil {
			return sc.refuse(err)
		}
		sc.ids = noteMessage(sc.ids, ev)
		rest = rest[k+1:]
		seq++
		line++
	}
	if n := seq - j.firstSeq; n != j.events {
		return fmt.Errorf("staged successor failed verification: current session generation contains %d events from line %d, expected %d", n, j.firstLine, j.events)
	}
	if !bytes.Equal(sc.ids, j.msgs) {
		return fmt.Errorf("staged successor failed verification: the message ids of lines %d to %d differ from the events produced", j.firstLine, line-1)
	}
	return nil
}

// noteMessage appends a surface event's type and message id to b (stageCheck.check).
func noteMessage(b []byte, ev *convlog.Event) []byte {
	typ, id, ok := messageID(ev)
	if !ok {
		return b
	}
	b = append(b, typ...)
	b = append(b, 0)
	b = append(b, id...)
	return append(b, '\n')
}

// messageID is a surface event's message id (ok false: not one), from the
// members a LineChecker kept.
func messageID(ev *convlog.Event) (typ string, id []byte, ok bool) {
	inMsg := true
	switch ev.Type {
	case convlog.TypeUserMessage:
		inMsg = false
	case convlog.TypeSystemMessage, convlog.TypeDeveloperMessage, convlog.TypeAssistantMessage, convlog.TypeToolResult:
	default:
		return "", nil, false
	}
	if id, ok = ev.CheckedMember(inMsg, "id"); !ok {
		msg := ev.Data
		if inMsg {
			msg = rawjson.GetFrom(msg, "message")
		}
		id = rawjson.Get(msg, "id")
	}
	return ev.Type, id, true
}
