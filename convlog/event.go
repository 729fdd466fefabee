package convlog

import (
	"bytes"
	"cmp"
	"fmt"
	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
)

// SurfaceOp says how a surface event changes the derived history.
type SurfaceOp struct {
	Replace bool
	// StartSeq and EndSeq bound, inclusively, the span of current history
	// nodes a replacement takes the place of.
	StartSeq, EndSeq int64
}

// Event is one line of a log after the header.
type Event struct {
	Type string
	Seq  int64
	Time int64 // Unix milliseconds
	// Data is the raw JSON of the data member, exactly as stored.
	Data      []byte
	Ignorable bool
	// SurfaceOp is set on surface events.
	SurfaceOp *SurfaceOp
	// SourceEventSeqs is the expanded list of cited earlier events.
	SourceEventSeqs []int64
	// Known is false for an ignorable event of a type this reader does not
	// know: it is kept as an opaque record.
	Known bool
	// Packed is the number of events a version 0/1 packed row stands for
	// (seq0 .. seq0+Packed-1); 0 for an ordinary row.
	Packed int64
	// Raw is the line as stored (without newline). Writers copy it verbatim
	// when set, so a log read and rewritten is byte-identical.
	Raw []byte

	// The members of data and of data.message, kept as the line was
	// checked (rules.go reads them); scanned says they are set.
	dataMembers, msgMembers []member
	scanned, msgScanned     bool
	// info is the type the reader found (nil: unknown).
	info *eventType
}

// CheckedMember is the value of key in CheckedMembers(inMessage).
func (e *Event) CheckedMember(inMessage bool, key string) (v []byte, ok bool) {
	ms, ok := e.CheckedMembers(inMessage)
	if !ok {
		return nil, false
	}
	return memberValue(ms, key), true
}

// CheckedMembers returns the members of data, or of data.message when
// inMessage is set, as the line's check kept them (offsets from the line's
// start), valid until the next line; ok is false when they were not kept.
func (e *Event) CheckedMembers(inMessage bool) (ms []rawjson.Member, ok bool) {
	if inMessage {
		return e.msgMembers, e.msgScanned
	}
	return e.dataMembers, e.scanned
}

// dataMember is the value of data's member key, from the kept members if any.
func (e *Event) dataMember(key string) []byte {
	if e.scanned {
		return memberValue(e.dataMembers, key)
	}
	return rawjson.Get(e.Data, key)
}

// Clone returns a copy that does not share memory with the reader's buffers.
func (e *Event) Clone() Event {
	c := *e
	c.dataMembers, c.msgMembers, c.scanned, c.msgScanned, c.info = nil, nil, false, false, nil
	c.Data = bytes.Clone(e.Data)
	c.Raw = bytes.Clone(e.Raw)
	c.SourceEventSeqs = append([]int64(nil), e.SourceEventSeqs...)
	if e.SurfaceOp != nil {
		op := *e.SurfaceOp
		c.SurfaceOp = &op
	}
	return c
}

// lineProblem is a refusal of a line (an event's envelope or the header)
// with its column.
type lineProblem struct {
	col  int
	msg  string
	kind error
}

func (p *lineProblem) Error() string { return p.msg }

func corrupt(col int, format string, args ...any) *lineProblem {
	return &lineProblem{col: col, msg: fmt.Sprintf(format, args...), kind: ErrCorrupt}
}

// envelopeParser parses event lines of one log, reusing its buffers.
type envelopeParser struct {
	version int
	members []member
	seqs    []int64
	op      SurfaceOp
	// seqKnown: the last row parsed had a readable seq, even if it was
	// refused for another reason.
	seqKnown bool
	// inner is parsePacked's buffer.
	inner []member
	// nested keeps the members of data and data.message as the line is
	// checked: the rules beyond a line read them without a second scan.
	nested, nestedMsg rawjson.Nested
	// pre, when set, holds the line about to be parsed (its line preK)
	// as a prefetcher parsed it with the same check (preparse.go); parse
	// clears it.
	pre  *framePre
	preK int
	own  [3][]member // members, nested's and nestedMsg's own storage
}

var packedTypes = map[string]bool{"text-chunks": true, "reasoning-chunks": true, "tool-call-chunks": true}

// eventType decodes the raw type member and looks it up; a known type costs
// no allocation.
func (p *envelopeParser) eventType(raw []byte) (string, *eventType, bool) {
	if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 {
		name := raw[1 : len(raw)-1]
		if t := eventTypes[string(name)]; t != nil {
			return t.name, t, true
		}
		return string(name), nil, true
	}
	s, ok := rawjson.String(raw)
	if !ok {
		return "", nil, false
	}
	return s, eventTypes[s], true
}

// parse fills e from line. expectSeq is the seq the row must carry, or -1
// to accept any (re-anchoring after a damaged row).
func (p *envelopeParser) parse(line []byte, expectSeq int64, e *Event) *lineProblem {
	*e = Event{Raw: line}
	p.seqKnown = false
	var err error
	if p.nested.Key == "" {
		p.nested.Key, p.nestedMsg.Key, p.nested.Inner = "data", "message", &p.nestedMsg
	}
	if pre := p.pre; pre == nil || !pre.restore(p.preK, p) {
		// Into its own buffers: a restored line's are the prefetcher's.
		p.nested.Members, p.nestedMsg.Members = p.own[1], p.own[2]
		p.members, err = rawjson.ObjectNested(line, p.own[0], &p.nested)
		p.own = [3][]member{p.members, p.nested.Members, p.nestedMsg.Members}
	}
	p.pre = nil
	if err != nil {
		se := err.(*rawjson.SyntaxError)
		return corrupt(se.Offset, "event is not valid JSON: %s", se.Msg)
	}
	if p.nested.Found {
		e.dataMembers, e.scanned = p.nested.Members, true
		if p.nestedMsg.Found {
			e.msgMembers, e.msgScanned = p.nestedMsg.Members, true
		}
	}
	var typ, seq, tim, data, ign, sop, ses, seq0, time0, other *member
	for i := range p.members {
		m := &p.members[i]
		switch string(m.Key) {
		case "type":
			typ = m
		case "seq":
			seq = m
		case "time":
			tim = m
		case "data":
			data = m
		case "ignorable":
			ign = m
		case "surfaceOp":
			sop = m
		case "sourceEventSeqs":
			ses = m
		case "seq0":
			seq0, other = m, cmp.Or(other, m)
		case "time0":
			time0, other = m, cmp.Or(other, m)
		default:
			other = cmp.Or(other, m)
		}
	}
	if typ == nil {
		return corrupt(0, "event has no \"type\"")
	}
	var ok bool
	var info *eventType
	if e.Type, info, ok = p.eventType(typ.Value); !ok || e.Type == "" {
		return corrupt(typ.ValOff, "event type must be a non-empty string")
	}
	if p.version <= 1 && packedTypes[e.Type] && seq0 != nil {
		return p.parsePacked(e, seq0, time0, data, expectSeq)
	}
	if other != nil {
		// The first member beyond the envelope.
		return corrupt(other.KeyOff, "%s event has unexpected member %s", e.Type, termtext.Quote(string(other.Key)))
	}
	if seq == nil {
		return corrupt(0, "%s event has no \"seq\"", e.Type)
	}
	if e.Seq, ok = rawjson.Int(seq.Value); !ok || e.Seq < 0 {
		return corrupt(seq.ValOff, "seq must be a non-negative safe integer")
	}
	p.seqKnown = true
	if expectSeq >= 0 && e.Seq < expectSeq {
		return corrupt(seq.ValOff, "seq repeats or goes back (expected %d, got %d)", expectSeq, e.Seq)
	}
	if expectSeq >= 0 && e.Seq != expectSeq {
		return corrupt(seq.ValOff, "seq gap (expected %d, got %d)", expectSeq, e.Seq)
	}
	if tim == nil {
		return corrupt(0, "%s event at seq %d has no \"time\"", e.Type, e.Seq)
	}
	if e.Time, ok = rawjson.Int(tim.Value); !ok {
		return corrupt(tim.ValOff, "time must be a safe integer (Unix milliseconds)")
	}
	if data == nil {
		return corrupt(0, "%s event at seq %d has no \"data\"", e.Type, e.Seq)
	}
	e.Data = data.Value
	if ign != nil {
		if string(ign.Value) != "true" {
			return corrupt(ign.ValOff, "ignorable must be exactly true when present")
		}
		e.Ignorable = true
	}
	e.Known, e.info = info != nil, info
	switch {
	case p.version >= CurrentVersion && info == nil && !e.Ignorable:
		return &lineProblem{col: typ.ValOff, kind: ErrUnsupported,
			msg: fmt.Sprintf("unknown event type %s at seq %d is not marked ignorable", termtext.Quote(e.Type), e.Seq)}
	case p.version == 3 && !releasedV3(info):
		e.Known = false
		if !e.Ignorable {
			return &lineProblem{col: typ.ValOff, kind: ErrUnsupported,
				msg: fmt.Sprintf("format v3 contains unknown event type %s at seq %d", termtext.Quote(e.Type), e.Seq)}
		}
	case p.version < 3:
		// Versions 0-2 have their own vocabularies; the upgrade chain
		// checks them. Here only the envelope is read.
		e.Known = info != nil
	}
	surface := info != nil && info.surface
	if p.version >= 3 && e.Known {
		if surface && sop == nil {
			return corrupt(0, "surface event %s at seq %d has no surfaceOp", e.Type, e.Seq)
		}
		if !surface && sop != nil {
			return corrupt(sop.KeyOff, "log-only event %s at seq %d may not carry surfaceOp", e.Type, e.Seq)
		}
		if ses != nil && (!surface || e.Type == TypeAssistantMessage) {
			return corrupt(ses.KeyOff, "%s event at seq %d may not carry sourceEventSeqs", e.Type, e.Seq)
		}
	}
	if sop != nil && p.version >= 3 {
		if prob := p.parseSurfaceOp(sop, e); prob != nil {
			return prob
		}
		e.SurfaceOp = &p.op
	}
	if ses != nil && p.version >= 2 {
		if prob := p.parseSourceSeqs(ses, e); prob != nil {
			return prob
		}
		e.SourceEventSeqs = p.seqs
	}
	return nil
}

func (p *envelopeParser) parseSurfaceOp(m *member, e *Event) *lineProblem {
	bad := func() *lineProblem {
		return corrupt(m.ValOff, `surfaceOp of %s at seq %d must be "append" or {"op":"replace","startSeq":N,"endSeq":M}`, e.Type, e.Seq)
	}
	if string(m.Value) == `"append"` {
		p.op = SurfaceOp{}
		return nil
	}
	// The line is validated: the members are only found.
	var buf [4]member
	inner, err := rawjson.Members(m.Value, buf[:0])
	if err != nil || len(inner) != 3 {
		return bad()
	}
	p.op = SurfaceOp{Replace: true}
	var haveOp, haveStart, haveEnd bool
	for _, im := range inner {
		switch string(im.Key) {
		case "op":
			haveOp = string(im.Value) == `"replace"`
		case "startSeq":
			p.op.StartSeq, haveStart = rawjson.Int(im.Value)
		case "endSeq":
			p.op.EndSeq, haveEnd = rawjson.Int(im.Value)
		}
	}
	if !haveOp || !haveStart || !haveEnd {
		return bad()
	}
	// The span is in surface order, which after an earlier replacement is
	// not seq order: only "both earlier" is checked here; the history
	// checks that start does not come after end.
	if p.op.StartSeq < 0 || p.op.EndSeq < 0 || p.op.StartSeq >= e.Seq || p.op.EndSeq >= e.Seq {
		return corrupt(m.ValOff, "surfaceOp of %s at seq %d replaces %d..%d, which is not an earlier span", e.Type, e.Seq, p.op.StartSeq, p.op.EndSeq)
	}
	return nil
}

// parseSourceSeqs expands the stored form of sourceEventSeqs: numbers, and
// [start,end] pairs for runs of three or more.
func (p *envelopeParser) parseSourceSeqs(m *member, e *Event) *lineProblem {
	bad := func(format string, args ...any) *lineProblem {
		return corrupt(m.ValOff, "sourceEventSeqs of %s at seq %d: %s", e.Type, e.Seq, fmt.Sprintf(format, args...))
	}
	b := m.Value
	if len(b) == 0 || b[0] != '[' {
		return bad("must be an array")
	}
	p.seqs = p.seqs[:0]
	usedRange, increasing := false, true
	n := 0
	// The line is validated: elements are only found.
	for it := rawjson.Array(b); ; {
		v, ok := it.Next()
		if !ok {
			break
		}
		n++
		if v[0] == '[' {
			var pair [3][]byte
			ends, err := rawjson.Elements(v, pair[:0])
			if err != nil || len(ends) != 2 {
				return bad("a range must be [start,end]")
			}
			start, ok1 := rawjson.Int(ends[0])
			stop, ok2 := rawjson.Int(ends[1])
			switch {
			case !ok1 || !ok2:
				return bad("a range must be [start,end]")
			case start < 0 || start > stop || stop >= e.Seq:
				return bad("range [%d,%d] must satisfy start <= end < %d", start, stop, e.Seq)
			case stop-start > maxSourceSeqs:
				return bad("range [%d,%d] is implausibly long", start, stop)
			case len(p.seqs) > 0 && (!increasing || start <= p.seqs[len(p.seqs)-1]):
				// The order and the count are checked before expanding,
				// so a short line cannot expand into an unbounded list.
				return bad("must be strictly increasing when ranges are used")
			case int64(len(p.seqs))+stop-start+1 > maxSourceSeqs:
				return bad("cites implausibly many seqs (more than %d)", maxSourceSeqs)
			}
			usedRange = true
			for s := start; s <= stop; s++ {
				p.seqs = append(p.seqs, s)
			}
			continue
		}
		if v[0] != '-' && (v[0] < '0' || v[0] > '9') {
			return bad("entries must be integers or [start,end] ranges")
		}
		s, ok := rawjson.Int(v)
		switch {
		case !ok || s < 0 || s >= e.Seq:
			return bad("%s is not an earlier seq", v)
		case len(p.seqs) >= maxSourceSeqs:
			return bad("cites implausibly many seqs (more than %d)", maxSourceSeqs)
		}
		if k := len(p.seqs); k > 0 && s <= p.seqs[k-1] {
			increasing = false
		}
		p.seqs = append(p.seqs, s)
	}
	if n == 0 {
		return bad("must not be empty")
	}
	if !increasing {
		if usedRange {
			return bad("must be strictly increasing when ranges are used")
		}
		seen := make(map[int64]bool, len(p.seqs))
		for _, s := range p.seqs {
			if seen[s] {
				return bad("seq %d is cited twice", s)
			}
			seen[s] = true
		}
	}
	return nil
}

// maxSourceSeqs bounds the expanded sourceEventSeqs of one event.
const maxSourceSeqs = 1 << 20

// parsePacked reads a version 0/1 packed assistant delta row: seq0, time0
// and data.dt holding N-1 time gaps for N members.
func (p *envelopeParser) parsePacked(e *Event, seq0, time0, data *member, expectSeq int64) *lineProblem {
	for _, m := range p.members {
		switch string(m.Key) {
		case "type", "seq0", "time0", "data":
		default:
			return corrupt(m.KeyOff, "packed %s row has unexpected member %s", e.Type, termtext.Quote(string(m.Key)))
		}
	}
	var ok bool
	if e.Seq, ok = rawjson.Int(seq0.Value); !ok || e.Seq < 0 {
		return corrupt(seq0.ValOff, "seq0 must be a non-negative safe integer")
	}
	if expectSeq >= 0 && e.Seq != expectSeq {
		return corrupt(seq0.ValOff, "seq gap (expected %d, got %d)", expectSeq, e.Seq)
	}
	if time0 == nil {
		return corrupt(0, "packed %s row has no \"time0\"", e.Type)
	}
	if e.Time, ok = rawjson.Int(time0.Value); !ok {
		return corrupt(time0.ValOff, "time0 must be a safe integer")
	}
	if data == nil {
		return corrupt(0, "packed %s row has no \"data\"", e.Type)
	}
	e.Data = data.Value
	var err error
	p.inner, err = rawjson.Members(data.Value, p.inner[:0])
	inner := p.inner
	if err != nil {
		return corrupt(data.ValOff, "packed %s row data must be an object", e.Type)
	}
	e.Packed = 1
	for _, im := range inner {
		if string(im.Key) == "dt" {
			n, ok := countArray(im.Value)
			if !ok {
				return corrupt(data.ValOff+im.ValOff, "packed %s row data.dt must be an array", e.Type)
			}
			e.Packed = int64(n) + 1
		}
	}
	e.Known = true
	return nil
}

// countArray counts the elements of a raw JSON array of a validated line.
func countArray(b []byte) (int, bool) {
	n := 0
	it := rawjson.Array(b)
	for _, ok := it.Next(); ok; _, ok = it.Next() {
		n++
	}
	return n, it.Err() == nil
}

// AppendJSON appends the event line (without newline): as read, or compact
// in the order type, seq, time, data, ignorable, sourceEventSeqs, surfaceOp.
func (e *Event) AppendJSON(dst []byte) []byte {
	if e.Raw != nil {
		return append(dst, e.Raw...)
	}
	dst = rawjson.AppendString(append(dst, `{"type":`...), e.Type)
	dst = rawjson.AppendInt(append(dst, `,"seq":`...), e.Seq)
	dst = rawjson.AppendInt(append(dst, `,"time":`...), e.Time)
	dst = append(dst, `,"data":`...)
	if len(e.Data) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, e.Data...)
	}
	if e.Ignorable {
		dst = append(dst, `,"ignorable":true`...)
	}
	if len(e.SourceEventSeqs) > 0 {
		dst = appendSeqs(append(dst, `,"sourceEventSeqs":`...), e.SourceEventSeqs)
	}
	if e.SurfaceOp != nil {
		dst = append(dst, `,"surfaceOp":`...)
		if e.SurfaceOp.Replace {
			dst = rawjson.AppendInt(append(dst, `{"op":"replace","startSeq":`...), e.SurfaceOp.StartSeq)
			dst = append(rawjson.AppendInt(append(dst, `,"endSeq":`...), e.SurfaceOp.EndSeq), '}')
		} else {
			dst = append(dst, `"append"`...)
		}
	}
	return append(dst, '}')
}

// appendSeqs writes runs of three or more consecutive seqs as [start,end];
// a list that is not strictly increasing is written verbatim.
func appendSeqs(dst []byte, seqs []int64) []byte {
	dst = append(dst, '[')
	increasing := true
	for k := 1; k < len(seqs); k++ {
		if seqs[k] <= seqs[k-1] {
			increasing = false
		}
	}
	for i := 0; i < len(seqs); {
		if i > 0 {
			dst = append(dst, ',')
		}
		j := i
		if increasing {
			for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
				j++
			}
		}
		if j-i >= 2 {
			dst = rawjson.AppendInt(append(dst, '['), seqs[i])
			dst = append(rawjson.AppendInt(append(dst, ','), seqs[j]), ']')
			i = j + 1
			continue
		}
		dst = rawjson.AppendInt(dst, seqs[i])
		i++
	}
	return append(dst, ']')
}
