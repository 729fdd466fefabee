package upgrade

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
)

// Options tune an upgrading Reader.
type Options struct {
	// Children are the session's subagent children, for the v3→v4 catalog.
	Children         []ChildFact
	WantType, WantID string // as in convlog.ReaderOptions
}

// stage is one step of the chain: transform maps a source event to the
// target events, finish returns what it held back; slices returned are valid
// until the next call.
type stage interface {
	transform(e *event) ([]*event, error)
	finish() ([]*event, error)
}

// srcInfo is what the stages need to know of the source header.
type srcInfo struct {
	id         string
	createdAt  int64
	parent     bool
	seeded     bool
	seedLength int64 // v0/v1: the inherited event count; -1 when unseeded
}

// Reader reads a log of any version and yields version 4 events.
type Reader struct {
	path      string
	src       *convlog.Reader
	srcHeader *convlog.Header
	header    *convlog.Header
	stages    []stage
	info      srcInfo

	pending []*event
	pi      int
	done    bool
	line    int64 // source line of the event being upgraded; 0 in finish
	err     error

	out convlog.Event
	op  convlog.SurfaceOp

	room *lineRoom // a row's lifted data's place in the frame Publish writes
}

// lineRoom lets a lifted tool result's data (often megabytes) be written in
// its place in the frame's chunk, not copied; only a row's first event may
// use it, as the lines before overwrite later ones.
type lineRoom struct {
	grow  func(n int) []byte // nil: no frame is being written
	at    *byte              // where lineBuf lent the room, nil when it did not
	off   int                // at's offset in the chunk
	start *byte              // at, once the data written there is a pending event's
}

// lineBuf returns an empty buffer of capacity n or more for e's data: in
// the room when it is free.
func (m *lineRoom) lineBuf(e *event, n int) []byte {
	if m == nil || m.grow == nil || m.at != nil {
		return make([]byte, 0, n)
	}
	var tmp [128]byte
	ev := convlog.Event{Type: e.typ, Seq: e.seq, Time: e.time, Ignorable: e.ignorable, SourceEventSeqs: e.sources}
	_, p := lineAround(&ev, tmp[:0])
	if p < 0 {
		return make([]byte, 0, n)
	}
	chunk := m.grow(n + len(tmp))
	off := len(chunk) + p
	if off+n > cap(chunk) {
		return make([]byte, 0, n)
	}
	m.at, m.off = &chunk[:off+1][off], off
	return chunk[off:off]
}

// lineAround is ev's line with null for its data, and the data's offset
// in it (-1 if not found).
func lineAround(ev *convlog.Event, dst []byte) ([]byte, int) {
	data := ev.Data
	ev.Data = nil
	line := ev.AppendJSON(dst)
	ev.Data = data
	// The type before it is a JSON string: its quotes are escaped.
	i := bytes.Index(line, []byte(`,"data":null`))
	if i < 0 {
		return line, -1
	}
	return line, i + len(`,"data":`)
}

// placed reports whether data is the data pending in the room.
func (m *lineRoom) placed(data []byte) bool {
	return m != nil && m.start != nil && len(data) > 0 && &data[0] == m.start
}

// lend records b as a pending event's data, if lineBuf put it in the room.
func (m *lineRoom) lend(b []byte) {
	if m != nil && m.start == nil && len(b) > 0 && &b[0] == m.at {
		m.start = m.at
	}
}

// reset frees the room once the row's events are all returned.
func (m *lineRoom) reset() {
	if m != nil {
		m.at, m.start, m.off = nil, nil, 0
	}
}

// Open opens the log at path read-only: a version 4 log passes as it is, an
// older one is upgraded as it is read (LowMemory: a migration holds several).
func Open(path string, opts Options) (*Reader, error) {
	src, err := convlog.Open(path, convlog.ReaderOptions{LowMemory: true,
		WantType: opts.WantType, WantID: opts.WantID})
	if err != nil {
		return nil, err
	}
	return FromReader(src, path, opts)
}

// FromReader upgrades the log src reads, as Open does; it takes src over.
func FromReader(src *convlog.Reader, path string, opts Options) (*Reader, error) {
	r := &Reader{path: path, src: src, srcHeader: src.Header()}
	h := r.srcHeader
	if h.Version >= convlog.CurrentVersion {
		r.header = h
		return r, nil
	}
	if h.Type != convlog.SessionLog {
		src.Close()
		return nil, &Error{Path: path, Line: 1, Kind: convlog.ErrUnsupported,
			Msg: fmt.Sprintf("a %s log of format v%d has no upgrade path: only session logs have versions older than v%d", h.Type, h.Version, convlog.CurrentVersion)}
	}
	r.info = srcInfo{id: h.ID, createdAt: h.CreatedAt, parent: h.ParentSession != "", seeded: h.IsSeeded, seedLength: -1}
	if h.Version <= 1 {
		r.info.seeded = h.SeedLength != nil
		if h.SeedLength != nil {
			r.info.seedLength = *h.SeedLength
		}
	}
	if h.Version == 0 {
		r.stages = append(r.stages, &v0v1{info: r.info, retryIDs: map[string]string{}, messageIDs: map[int64][]byte{}})
	}
	if h.Version <= 1 {
		r.stages = append(r.stages, &v1v2{info: r.info, groups: map[gkey]*group{}})
	}
	if h.Version <= 2 {
		r.stages = append(r.stages, &v2v3{info: r.info, head: -1, sourceCut: -1, foreignDelivery: -1})
	}
	r.room = &lineRoom{}
	children := slices.Clone(opts.Children)
	slices.SortStableFunc(children, byCreation)
	r.stages = append(r.stages, &v3v4{info: r.info, children: children, time: h.CreatedAt, foreign: -1, srcCut: -1, room: r.room})
	r.header = upgradeHeader(h)
	return r, nil
}

// upgradeHeader returns an older session header's version 4 header.
func upgradeHeader(h *convlog.Header) *convlog.Header {
	n := *h
	n.Raw = nil
	n.Version = convlog.CurrentVersion
	if h.Version <= 1 {
		n.IsSeeded = h.SeedLength != nil
		n.SeedLength = nil
	}
	if h.Version <= 2 && n.AgentPreset == "code" {
		n.AgentPreset = "ptc"
	}
	return &n
}

func (r *Reader) Header() *convlog.Header { return r.header }

func (r *Reader) SourceVersion() int { return r.srcHeader.Version }

func (r *Reader) Compression() convlog.Compression { return r.src.Compression() }

// SourceStats reports what has been read of the source so far.
func (r *Reader) SourceStats() convlog.Stats { return r.src.Stats() }

// Close releases the source.
func (r *Reader) Close() error { return r.src.Close() }

// Events yields the version 4 events, each valid until the loop body returns.
func (r *Reader) Events() iter.Seq2[*convlog.Event, error] {
	return func(yield func(*convlog.Event, error) bool) {
		if r.stages == nil {
			r.src.Events()(yield)
			return
		}
		if r.err != nil {
			yield(nil, r.err)
			return
		}
		// First the events of a row a loop left early did not take.
		if !r.yieldPending(yield) || r.done {
			return
		}
		for ce, err := range r.src.Events() {
			if err == nil {
				err = r.step(ce)
			}
			if err != nil {
				r.err = r.wrap(err)
				yield(nil, r.err)
				return
			}
			if !r.yieldPending(yield) {
				return
			}
		}
		if err := r.finish(); err != nil {
			r.err = r.wrap(err)
			yield(nil, r.err)
			return
		}
		r.yieldPending(yield)
	}
}

// yieldPending yields the last row's events, then takes back their data.
func (r *Reader) yieldPending(yield func(*convlog.Event, error) bool) bool {
	for r.pi < len(r.pending) {
		e := r.pending[r.pi]
		r.pending[r.pi] = nil
		r.pi++
		toConvlog(e, &r.out, &r.op)
		if !yield(&r.out, nil) {
			return false
		}
	}
	r.pending, r.pi = r.pending[:0], 0
	r.room.reset()
	return true
}

// RuleProblem places err, a rule the event yielded last breaks: at its line
// and byte in a version 4 source, else at the line it was upgraded from.
func (r *Reader) RuleProblem(err error) error {
	if r.stages == nil {
		return r.src.RuleProblem(err)
	}
	kind := convlog.ErrCorrupt
	var re *convlog.RuleError
	if errors.As(err, &re) {
		kind = re.Kind
	}
	where := fmt.Sprintf("upgraded to format v%d", convlog.CurrentVersion)
	if r.line == 0 {
		where = fmt.Sprintf("appended by the upgrade to format v%d", convlog.CurrentVersion)
	}
	return &Error{Path: r.path, Line: r.line, Msg: where + ": " + err.Error(), Kind: kind}
}

// keepRoom moves data lent the room out of it, but for the row's first event.
func (r *Reader) keepRoom() {
	for i, e := range r.pending {
		if i > 0 && r.room.placed(e.data) {
			e.data = bytes.Clone(e.data)
			r.room.start = nil
		}
	}
}

// step runs one source row through the chain.
func (r *Reader) step(ce *convlog.Event) error {
	r.line = r.src.Stats().Lines
	evs, err := r.decode(ce)
	if err != nil {
		return err
	}
	if err := r.push(0, evs); err != nil {
		return err
	}
	r.keepRoom()
	return nil
}

// finish finishes the chain at the end of the source.
func (r *Reader) finish() error {
	r.done, r.line = true, 0
	for i, s := range r.stages {
		outs, err := s.finish()
		if err != nil {
			return err
		}
		if err := r.push(i+1, outs); err != nil {
			return err
		}
	}
	r.keepRoom()
	return nil
}

func (r *Reader) push(i int, evs []*event) error {
	for _, e := range evs {
		if i == len(r.stages) {
			r.pending = append(r.pending, e)
			continue
		}
		outs, err := r.stages[i].transform(e)
		if err != nil {
			return err
		}
		if err := r.push(i+1, outs); err != nil {
			return err
		}
	}
	return nil
}

func (r *Reader) wrap(err error) error {
	var e *Error
	if errors.As(err, &e) && e.Path == "" {
		e.Path, e.Line = r.path, r.line
	}
	return err
}

// decode turns a source row into chain events: a v0/v1 packed row into its
// members, any other into one event.
func (r *Reader) decode(ce *convlog.Event) ([]*event, error) {
	v := r.srcHeader.Version
	if ce.Packed > 0 {
		return expandPacked(ce)
	}
	// Only v1→v2 holds events across rows: from v2 data may share the buffer.
	data := ce.Data
	if v <= 1 {
		data = bytes.Clone(data)
	}
	e := &event{typ: ce.Type, seq: ce.Seq, time: ce.Time, data: data, ignorable: ce.Ignorable}
	if v >= 2 {
		// The members the reader kept as it checked the row.
		if dm, ok := ce.CheckedMembers(false); ok {
			e.srcData, e.dataMembers = ce.Data, dm
			if mm, ok := ce.CheckedMembers(true); ok {
				e.msgMembers = mm
				e.srcMsg, _ = ce.CheckedMember(false, "message")
			}
		}
	}
	if ce.SourceEventSeqs != nil {
		e.sources = append([]int64(nil), ce.SourceEventSeqs...)
	}
	if v >= 3 {
		if ce.SurfaceOp != nil {
			e.op = &surfaceOp{replace: ce.SurfaceOp.Replace, start: ce.SurfaceOp.StartSeq, end: ce.SurfaceOp.EndSeq}
		}
		return []*event{e}, nil
	}
	// Before v3 the reader checks only the envelope: surfaceOp (and before
	// v2 sourceEventSeqs) are read here.
	var opRaw, srcRaw []byte
	rawjson.EachMember(ce.Raw, func(m rawjson.Member) bool {
		switch string(m.Key) {
		case "surfaceOp":
			opRaw = m.Value
		case "sourceEventSeqs":
			srcRaw = m.Value
		}
		return true
	})
	if opRaw != nil {
		op, err := parseOldSurfaceOp(opRaw, e)
		if err != nil {
			return nil, err
		}
		e.op = op
	}
	if v < 2 && srcRaw != nil {
		s, err := parseSeqList(srcRaw, e)
		if err != nil {
			return nil, err
		}
		e.sources = s
	}
	return []*event{e}, nil
}

// parseOldSurfaceOp reads "append" or a replacement, spelled {op,start,end}
// (v0-v2) or {op,startSeq,endSeq}.
func parseOldSurfaceOp(raw []byte, e *event) (*surfaceOp, error) {
	if rawjson.StringIs(raw, "append") {
		return &surfaceOp{}, nil
	}
	bad := func() error {
		return corrupt(`%s at seq %d: surfaceOp must be "append" or {"op":"replace","start":N,"end":M}`, e.typ, e.seq)
	}
	o, err := parseObject(raw)
	if err != nil || len(o.m) != 3 || !rawjson.StringIs(o.get("op"), "replace") {
		return nil, bad()
	}
	s, e2 := o.get("start"), o.get("end")
	if s == nil && e2 == nil {
		s, e2 = o.get("startSeq"), o.get("endSeq")
	}
	start, ok1 := count(s)
	end, ok2 := count(e2)
	if !ok1 || !ok2 {
		return nil, bad()
	}
	if start > end || end >= e.seq {
		return nil, corrupt("%s at seq %d replaces %d..%d, which is not an earlier span", e.typ, e.seq, start, end)
	}
	return &surfaceOp{replace: true, start: start, end: end}, nil
}

// parseSeqList reads a v0/v1 sourceEventSeqs list ([start,end] expanded).
func parseSeqList(raw []byte, e *event) ([]int64, error) {
	out := []int64{}
	var bad error
	err := rawjson.EachElement(raw, func(_ int, v []byte) bool {
		if isArr(v) {
			pair, err := rawjson.Elements(v, nil)
			if err != nil || len(pair) != 2 {
				bad = corrupt("%s at seq %d: sourceEventSeqs has a malformed range", e.typ, e.seq)
				return false
			}
			a, ok1 := count(pair[0])
			b, ok2 := count(pair[1])
			if !ok1 || !ok2 || a > b || b >= e.seq || b-a > 1<<20 {
				bad = corrupt("%s at seq %d: sourceEventSeqs has a malformed range", e.typ, e.seq)
				return false
			}
			for s := a; s <= b; s++ {
				out = append(out, s)
			}
			return true
		}
		s, ok := count(v)
		if !ok || s >= e.seq {
			bad = corrupt("%s at seq %d: sourceEventSeqs must be earlier seqs", e.typ, e.seq)
			return false
		}
		out = append(out, s)
		return true
	})
	if bad != nil {
		return nil, bad
	}
	if err != nil {
		return nil, corrupt("%s at seq %d: sourceEventSeqs must be an array", e.typ, e.seq)
	}
	return out, nil
}

// expandPacked turns a v0/v1 packed row into its members: member k is an
// assistant/chunk at seq seq0+k, time time0+dt[0]+…+dt[k-1].
func expandPacked(ce *convlog.Event) ([]*event, error) {
	bad := func(format string, args ...any) error {
		return corrupt("packed %s row at seq %d: %s", ce.Type, ce.Seq, fmt.Sprintf(format, args...))
	}
	kind, keys := byte(kindToolCall), []string{"turn", "step", "index", "dt", "args", "id", "name"}
	switch ce.Type {
	case "text-chunks":
		kind, keys = kindText, []string{"turn", "step", "index", "dt", "texts"}
	case "reasoning-chunks":
		kind, keys = kindReasoning, []string{"turn", "step", "index", "dt", "texts"}
	}
	o, err := parseObject(bytes.Clone(ce.Data))
	if err != nil {
		return nil, bad("data is not an object")
	}
	for _, m := range o.m {
		if !slices.Contains(keys, string(m.Key)) {
			return nil, bad("data has unexpected member %s", termtext.Quote(string(m.Key)))
		}
	}
	turn, step, index, dt, id, name := o.get("turn"), o.get("step"), o.get("index"), o.get("dt"), o.get("id"), o.get("name")
	texts := o.get(keys[4])
	if turn == nil || step == nil || index == nil || dt == nil || texts == nil || kind == kindToolCall && id == nil {
		return nil, bad("data lacks a required member")
	}
	gaps, err := rawjson.Elements(dt, nil)
	if err != nil {
		return nil, bad("dt must be an array")
	}
	members, err := rawjson.Elements(texts, nil)
	if err != nil {
		return nil, bad("members must be an array")
	}
	if len(members) != len(gaps)+1 {
		return nil, bad("%d members but %d time gaps", len(members), len(gaps))
	}
	out := make([]*event, len(members))
	t := ce.Time
	for k, m := range members {
		if !isStr(m) {
			return nil, bad("member %d is not a string", k)
		}
		if k > 0 {
			g, ok := rawjson.Int(gaps[k-1])
			if !ok {
				return nil, bad("dt[%d] is not an integer", k-1)
			}
			t += g
		}
		out[k] = &event{typ: "assistant/chunk", seq: ce.Seq + int64(k), time: t,
			chunk: &chunkDelta{turn: turn, step: step, kind: kind, index: index, text: m, id: id, name: name}}
	}
	return out, nil
}
