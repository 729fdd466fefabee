package upgrade

import (
	"fmt"
	"sort"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/rawjson"
)

// event is one event inside the chain. Each stage receives events in its
// source version's coordinates (dense seqs) and emits them in its target
// version's coordinates (dense again).
type event struct {
	typ       string
	seq       int64
	time      int64
	data      []byte // raw JSON; nil while chunk carries the payload
	ignorable bool
	op        *surfaceOp // nil when absent
	sources   []int64    // nil when absent
	// chunk is set on assistant/chunk events expanded from a v0/v1 packed
	// row: the delta is kept unencoded, since the v1→v2 stage consumes every
	// chunk before anything reads its data.
	chunk *chunkDelta
	// srcData and srcMsg are the source row's data and data.message as the
	// source reader checked them, with the members it kept (nil: not kept), so
	// parse need not scan them again; valid while the row is.
	srcData, srcMsg         []byte
	dataMembers, msgMembers []member
}

// parse is parseObject(b), from the members the source reader kept when
// b is the row's data or data.message as it was read: a stage that has
// not replaced them need not scan them again.
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

// surfaceOp is a surface event's operation, whatever its spelling in the
// source version ({op,start,end} before v3, {op,startSeq,endSeq} from v3).
type surfaceOp struct {
	replace    bool
	start, end int64
}

// Error is a refusal or problem found while upgrading a log, naming the file
// and the source line when there is one. It wraps convlog.ErrUnsupported for
// an intact log with no preserving conversion and convlog.ErrCorrupt for one
// that breaks its version's rules.
type Error struct {
	Path string
	Line int64 // 1-based line of the source event being read; 0 when not tied to one
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

// refusal: the log is well formed, but no preserving conversion exists. A
// stage's *Error names no file: the reader adds the path and line.
func refusal(format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...), Kind: convlog.ErrUnsupported}
}

// corrupt: the log breaks the rules of its version.
func corrupt(format string, args ...any) error {
	return &Error{Msg: fmt.Sprintf(format, args...), Kind: convlog.ErrCorrupt}
}

// seqMap maps a stage's source seqs to its target seqs. It is monotone and
// stored as runs of consecutive seqs, so it costs one entry per insertion or
// removal, not one per event. A source seq without an entry was consumed.
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

// remapRefs rewrites e's same-log seq references into target coordinates;
// missing names a reference to a consumed source seq.
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

// seqRefs are the data members that hold seqs of the same log, by event
// type: paths of member names, "[]" for each element of an array.
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
		return orSame(raw)(mapArray(raw, notArray, func(i int, el []byte) ([]byte, error) {
			return remapAt(e, el, fmt.Sprintf("%s[%d]", where, i), path[1:], one)
		}))
	}
	o, err := parseObject(raw)
	if err != nil {
		return nil, corrupt("%s at seq %d: %s is not an object", e.typ, e.seq, where)
	}
	if err := o.convert(path[0], func(v []byte) ([]byte, error) { return remapAt(e, v, path[0], path[1:], one) }); err != nil {
		return nil, err
	}
	return o.bytes(), nil
}

// orSame returns mapArray's result as a value: the array it read when
// nothing was replaced.
func orSame(arr []byte) func([]byte, error) ([]byte, error) {
	return func(b []byte, err error) ([]byte, error) {
		if b == nil {
			b = arr
		}
		return b, err
	}
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
		Known:           convlog.DefaultRegistry.Lookup(e.typ) != nil,
	}
	if e.op != nil {
		*op = convlog.SurfaceOp{Replace: e.op.replace, StartSeq: e.op.start, EndSeq: e.op.end}
		out.SurfaceOp = op
	}
}

// surfaceTypes are the surface event types of versions 0 to 3 (v4 adds
// developer/message).
var surfaceTypes = map[string]bool{
	"system/message": true, "user/message": true, "assistant/message": true, "tool/result": true,
}
