package convlog

import (
	"bytes"
	"unsafe"

	"github.com/convkit/convkit/internal/rawjson"
)

// A prefetched frame's lines are also checked on its decoder's goroutine,
// with the reader's own check, and the members' offsets kept, so the
// reader only slices them: on many short lines the check costs as much as
// decoding. A line that does not pass, or whose keys hold escapes, is left
// to the reader.

// memberSpan is one member's offsets in its line: key from ks to ke
// (quotes included), value from vs to ve.
type memberSpan struct{ ks, ke, vs, ve int32 }

// lineSpans locates a line's members in framePre.spans: top members from
// first, then data's (if found) and data.message's (if found).
type lineSpans struct {
	first          int32
	top, data, msg int16
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
	ends  []int32
	spans []memberSpan
	// the decoder goroutine's own parsing buffers
	members           []member
	nested, nestedMsg rawjson.Nested
}

// parsedBytes is what p's per-line buffers hold on to: a frame of very
// many short lines (a hostile one of newlines) grows them to many times
// the frame's size, and such a frame's buffers do not go back to the pool.
func (p *framePre) parsedBytes() int {
	return cap(p.lines)*int(unsafe.Sizeof(lineSpans{})) + cap(p.ends)*4 + cap(p.spans)*int(unsafe.Sizeof(memberSpan{}))
}

// maxSpanned bounds the members of one line kept (beyond it, the reader
// parses the line itself), and with it the offsets kept per byte of text.
const maxSpanned = 64

// parse adds to p the lines of text, a frame's plain text.
func (p *framePre) parse(text []byte) {
	if len(text) > 1<<31-1 {
		return
	}
	if p.nested.Key == "" {
		p.nested.Key, p.nestedMsg.Key, p.nested.Inner = "data", "message", &p.nestedMsg
	}
	for off := 0; ; {
		i := bytes.IndexByte(text[off:], '\n')
		if i < 0 {
			return
		}
		line := text[off : off+i]
		p.ends = append(p.ends, int32(off+i))
		off += i + 1
		ls := lineSpans{first: int32(len(p.spans))}
		var err error
		p.members, err = rawjson.ObjectNested(line, p.members, &p.nested)
		if err == nil && len(line) < 1<<31-1 {
			ls.ok = p.add(line, p.members, &ls.top)
			if ls.ok && p.nested.Found {
				ls.dataFound = true
				ls.ok = p.add(line, p.nested.Members, &ls.data)
				if ls.ok && p.nestedMsg.Found {
					ls.msgFound = true
					ls.ok = p.add(line, p.nestedMsg.Members, &ls.msg)
				}
			}
		}
		if !ls.ok {
			p.spans = p.spans[:ls.first]
			ls = lineSpans{}
		}
		p.lines = append(p.lines, ls)
	}
}

// add keeps ms's offsets; false when they cannot be rebuilt by slicing (a
// key with an escape) or are too many.
func (p *framePre) add(line []byte, ms []member, n *int16) bool {
	if len(ms) > maxSpanned {
		return false
	}
	for _, m := range ms {
		if len(m.Key) != len(m.RawKey)-2 {
			return false
		}
		vs := m.ValOff
		p.spans = append(p.spans, memberSpan{ks: int32(m.KeyOff), ke: int32(m.KeyOff + len(m.RawKey)), vs: int32(vs), ve: int32(vs + len(m.Value))})
	}
	*n = int16(len(ms))
	return true
}

// appendMembers appends the members of spans to dst, sliced out of line.
func appendMembers(dst []member, line []byte, spans []memberSpan) []member {
	for _, s := range spans {
		dst = append(dst, member{Key: line[s.ks+1 : s.ke-1], RawKey: line[s.ks:s.ke], Value: line[s.vs:s.ve], KeyOff: int(s.ks), ValOff: int(s.vs)})
	}
	return dst
}

// members rebuilds, into the parser's buffers, what ObjectNested found in
// line k of the frame, which is line; false when the reader must parse it.
func (p *framePre) restore(k int, line []byte, ep *envelopeParser) bool {
	if k >= len(p.lines) || !p.lines[k].ok {
		return false
	}
	ls := p.lines[k]
	i := int(ls.first)
	ep.members = appendMembers(ep.members[:0], line, p.spans[i:i+int(ls.top)])
	i += int(ls.top)
	ep.nested.Found, ep.nested.Members = ls.dataFound, ep.nested.Members[:0]
	if ls.dataFound {
		ep.nested.Members = appendMembers(ep.nested.Members, line, p.spans[i:i+int(ls.data)])
		i += int(ls.data)
		ep.nestedMsg.Found, ep.nestedMsg.Members = ls.msgFound, ep.nestedMsg.Members[:0]
		if ls.msgFound {
			ep.nestedMsg.Members = appendMembers(ep.nestedMsg.Members, line, p.spans[i:i+int(ls.msg)])
		}
	}
	return true
}
