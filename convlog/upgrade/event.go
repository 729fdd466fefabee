package upgrade

import (
	"fmt"
	"sort"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/rawjson"
)

// event is an event inside the chain, in a stage's source or target seqs.
type event struct {
	typ       string
	seq       int64
	time      int64
	data      []byte // raw JSON; nil while chunk carries the payload
	ignorable bool
	op        *surfaceOp  // nil when absent
	sources   []int64     // nil when absent
	chunk     *chunkDelta // of a v0/v1 packed row's member, for v1→v2
	// srcData and srcMsg are the source row's data and data.message with
	// the members the source reader kept (nil: not kept).
	srcData, srcMsg         []byte
	dataMembers, msgMembers []member
}

// parse is parseObject(b), from the members the reader kept if it can.
func (e *event) parse(b []byte) (*object, error) {
	switch {
	case e.dataMembers != nil && sameBytes(b, e.srcData):
		return &object{m: append(make([]member, 0, len(e.dataMembers)+2), e.dataMembers...)}, nil
	case e.msgMembers != nil && sameBytes(b, e.srcMsg):
		return &object{m: append(make([]member, 0, len(e.msgMembers)+2), e.msgMembers...)}, nil
	}
	return parseObject(b)
}

// sameBytes reports whether a and b are the same bytes in memory.
func sameBytes(a, b []byte) bool {
	return len(a) > 0 && len(a) == len(b) && &a[0] == &b[0]
}

// surfaceOp is a surface event's operation, whatever its spelling.
type surfaceOp struct {
	replace    bool
	start, end int64
}

// Error is a refusal of the upgrade: Kind is convlog.ErrUnsupported (no
// preserving conversion) or convlog.ErrCorrupt (its version's rules broken).
type Error struct {
	Path string
	Line int64 // the source line; 0 when not tied to one
	Msg  string
	Kind error
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s: line %d: %s", e.Path, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.Path, e.Msg)
}

func (e *Error) Unwrap() error { return e.Kind }

// refusal and corrupt make a stage's *Error; the reader adds path and line.
func refusal(format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...), Kind: convlog.ErrUnsupported}
}

func corrupt(format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...), Kind: convlog.ErrCorrupt}
}

// seqMap maps a stage's source seqs to its target seqs as runs; a source
// seq without one was consumed.
type seqMap struct {
	runs   []seqRun
	broken bool // some seq so far did not map to itself (or was consumed)
}

type seqRun struct{ src, tgt, n int64 }

func (m *seqMap) add(src, tgt int64) {
	if src != tgt {
		m.broken = true
	}
	if k := len(m.runs); k > 0 {
		r := &m.runs[k-1]
		if r.src+r.n == src && r.tgt+r.n == tgt {
			r.n++
			return
		}
	}
	m.runs = append(m.runs, seqRun{src, tgt, 1})
}

func (m *seqMap) lookup(src int64) (int64, bool) {
	i := sort.Search(len(m.runs), func(i int) bool { return m.runs[i].src > src }) - 1
	if i < 0 {
		return 0, false
	}
	r := m.runs[i]
	if src >= r.src+r.n {
		return 0, false
	}
	return r.tgt + src - r.src, true
}

// remapRefs rewrites e's seq references to target seqs; missing words one
// to a consumed seq.
func remapRefs(e *event, m *seqMap, missing func(ref int64) error) error {
	if !m.broken { // every source seq so far maps to itself
		return nil
	}
	one := func(v int64) (int64, error) {
		if v < 0 || v >= e.seq {
			return 0, corrupt("%s at seq %d references seq %d, which is not an earlier event", e.typ, e.seq, v)
		}
		t, ok := m.lookup(v)
		if !ok {
			return 0, missing(v)
		}
		return t, nil
	}
	for i, s := range e.sources {
		t, err := one(s)
		if err != nil {
			return err
		}
		e.sources[i] = t
	}
	if e.op != nil && e.op.replace {
		var err error
		if e.op.start, err = one(e.op.start); err != nil {
			return err
		}
		if e.op.end, err = one(e.op.end); err != nil {
			return err
		}
	}
	rawOne := func(raw []byte) ([]byte, error) {
		v, ok := count(raw)
		if !ok {
			return nil, corrupt("%s at seq %d has a reference that is not a seq", e.typ, e.seq)
		}
		t, err := one(v)
		if err != nil {
			return nil, err
		}
		return rawjson.AppendInt(nil, t), nil
	}
	for _, path := range seqRefs[e.typ] {
		var err error
		if e.data, err = remapAt(e, e.data, "data", path, rawOne); err != nil {
			return err
		}
	}
	return nil
}

// seqRefs are the data members holding seqs of the log, by type ("[]": each
// element).
var seqRefs = map[string][][]string{
	"command/done":              {{"sourceEventSeq"}},
	"compaction/summary":        {{"shadowedRange", "start"}, {"shadowedRange", "end"}, {"shadowedSeqs", "[]"}},
	"compaction/prune":          {{"shadowedRange", "start"}, {"shadowedRange", "end"}, {"shadowedSeqs", "[]"}},
	"session/title":             {{"messageSeqs", "[]"}},
	"session/title-llm-request": {{"messageSeqs", "[]"}},
	"image/offload":             {{"targets", "[]", "seq"}},
}

// remapAt rewrites with one the seq at path in raw, which where names.
func remapAt(e *event, raw []byte, where string, path []string, one func([]byte) ([]byte, error)) ([]byte, error) {
	switch {
	case len(path) == 0:
		return one(raw)
	case path[0] == "[]":
		notArray := func() error { return corrupt("%s at seq %d: %s must be an array", e.typ, e.seq, where) }
		if len(path) == 1 {
			notArray = func() error { return corrupt("%s at seq %d has seq references that are not an array", e.typ, e.seq) }
		}
		b, err := mapArray(raw, notArray, func(i int, el []byte) ([]byte, error) {
			return remapAt(e, el, fmt.Sprintf("%s[%d]", where, i), path[1:], one)
		})
		if b == nil {
			b = raw
		}
		return b, err
	}
	o, err := parseObject(raw)
	if err != nil {
		return nil, corrupt("%s at seq %d: %s is not an object", e.typ, e.seq, where)
	}
	if v := o.get(path[0]); v != nil {
		if v, err = remapAt(e, v, path[0], path[1:], one); err != nil {
			return nil, err
		}
		o.set(path[0], v)
	}
	return o.bytes(), nil
}

// toConvlog fills out with e in the version 4 envelope.
func toConvlog(e *event, out *convlog.Event, op *convlog.SurfaceOp) {
	*out = convlog.Event{
		Type:            e.typ,
		Seq:             e.seq,
		Time:            e.time,
		Data:            e.data,
		Ignorable:       e.ignorable,
		SourceEventSeqs: e.sources,
		Known:           convlog.IsKnown(e.typ),
	}
	if e.op != nil {
		*op = convlog.SurfaceOp{Replace: e.op.replace, StartSeq: e.op.start, EndSeq: e.op.end}
		out.SurfaceOp = op
	}
}

// surfaceTypes are those of versions 0 to 3 (v4 adds developer/message).
var surfaceTypes = map[string]bool{
	"system/message": true, "user/message": true, "assistant/message": true, "tool/result": true,
}
