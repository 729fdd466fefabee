package convlog

import (
	"bytes"
	"unsafe"

	"github.com/convkit/convkit/internal/rawjson"
)

// A prefetched frame's lines are also checked on its decoder's goroutine,
// with the reader's own check, and the members kept, so the reader only
// takes them: on many short lines the check costs as much as decoding. A
// line that does not pass, or whose keys hold escapes, is left to the
// reader.

// lineSpans is a line's members as the check found them: the top ones,
// data's (if found) and data.message's (if found).
type lineSpans struct {
	top, data, msg []member
	ok             bool
	dataFound      bool
	msgFound       bool
}

// framePre is what the decoder's goroutine found in a frame's lines: one
// lineSpans per line ended by '\n', in order.
type framePre struct {
	lines []lineSpans
	// ends are where the lines end: the offset of each '\n' in the text,
	// so that the reader does not look for them again.
	ends []int32
	// top, data and msg are where the check appends the members kept
	// (earlier lines' stay where they were put); kept counts them.
	top, data, msg    []member
	kept              int
	nested, nestedMsg rawjson.Nested
}

// maxSpanned bounds the members of one line kept (beyond it, the reader
// parses the line itself); maxKept those of a run, and maxLines its lines
// (a frame of very many short lines, a hostile one of newlines, would keep
// many times its size): the reader finds and checks the rest itself.
const (
	maxSpanned = 64
	maxKept    = 1 << 15
	maxLines   = 1 << 16
)

// reset empties p for a run's lines, keeping its buffers.
func (p *framePre) reset() {
	clear(p.lines) // they hold text no longer wanted
	p.lines, p.ends, p.kept = p.lines[:0], p.ends[:0], 0
	p.top, p.data, p.msg = p.top[:0], p.data[:0], p.msg[:0]
}

// parsedBytes is what p's per-line buffers hold on to.
func (p *framePre) parsedBytes() int {
	return cap(p.lines)*int(unsafe.Sizeof(lineSpans{})) + cap(p.ends)*4 +
		(cap(p.top)+cap(p.data)+cap(p.msg))*int(unsafe.Sizeof(member{}))
}

// parse adds to p the lines of text, a frame's plain text.
func (p *framePre) parse(text []byte) {
	if len(text) > 1<<31-1 {
		return
	}
	if p.nested.Key == "" {
		p.nested.Key, p.nestedMsg.Key, p.nested.Inner = "data", "message", &p.nestedMsg
	}
	for off := 0; len(p.lines) < maxLines; {
		i := bytes.IndexByte(text[off:], '\n')
		if i < 0 {
			return
		}
		line := text[off : off+i]
		p.ends = append(p.ends, int32(off+i))
		off += i + 1
		var ls lineSpans
		if p.kept < maxKept {
			ls = p.check(line)
		}
		p.lines = append(p.lines, ls)
	}
}

// check checks line, keeping its members at the ends of p's buffers.
func (p *framePre) check(line []byte) lineSpans {
	p.top, p.data, p.msg = room(p.top), room(p.data), room(p.msg)
	p.nested.Members, p.nestedMsg.Members = p.data[len(p.data):], p.msg[len(p.msg):]
	top, err := rawjson.ObjectNested(line, p.top[len(p.top):], &p.nested)
	ls := lineSpans{top: top, ok: err == nil && plainKeys(top)}
	if ls.ok && p.nested.Found {
		ls.dataFound, ls.data = true, p.nested.Members
		ls.ok = plainKeys(ls.data)
		if ls.ok && p.nestedMsg.Found {
			ls.msgFound, ls.msg = true, p.nestedMsg.Members
			ls.ok = plainKeys(ls.msg)
		}
	}
	if !ls.ok {
		return lineSpans{}
	}
	// Capacity-limited: the reader's own check appends to them.
	ls.top, ls.data, ls.msg = take(&p.top, ls.top), take(&p.data, ls.data), take(&p.msg, ls.msg)
	p.kept += len(ls.top) + len(ls.data) + len(ls.msg)
	return ls
}

// room is buf with room for a line's members past its end; a new buffer
// when not (the old one stays with the lines kept in it).
func room(buf []member) []member {
	if cap(buf)-len(buf) > maxSpanned {
		return buf
	}
	return make([]member, 0, max(2*cap(buf), 4<<10))
}

// take is ms, which the check appended at buf's end, and moves buf's end
// past it.
func take(buf *[]member, ms []member) []member {
	n := len(*buf)
	if len(ms) > 0 && cap(*buf)-n >= len(ms) && &(*buf)[n : n+1][0] == &ms[0] {
		*buf = (*buf)[:n+len(ms)]
	}
	return ms[:len(ms):len(ms)]
}

// plainKeys reports whether ms are few enough to keep and their keys, free
// of escapes, alias the line (an unescaped key lives in a reused buffer).
func plainKeys(ms []member) bool {
	if len(ms) > maxSpanned {
		return false
	}
	for _, m := range ms {
		if len(m.Key) != len(m.RawKey)-2 {
			return false
		}
	}
	return true
}

// restore sets ep's members to what the check found in line k of the
// frame; false when the reader must check the line itself.
func (p *framePre) restore(k int, ep *envelopeParser) bool {
	if k >= len(p.lines) || !p.lines[k].ok {
		return false
	}
	ls := &p.lines[k]
	ep.members = ls.top
	ep.nested.Found, ep.nested.Members = ls.dataFound, ls.data
	ep.nestedMsg.Found, ep.nestedMsg.Members = ls.msgFound, ls.msg
	return true
}
