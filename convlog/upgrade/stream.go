package upgrade

import (
	"bytes"

	"github.com/convkit/convkit/internal/rawjson"
)

// chunkDelta is a v0/v1 text, reasoning or tool-call delta, raw members.
type chunkDelta struct {
	turn, step []byte
	kind       byte // 't' text, 'r' reasoning, 'c' tool call
	index      []byte
	text       []byte // text (text, reasoning) or argumentsDelta (tool call): a raw JSON string
	id, name   []byte // tool call; name nil when absent
}

const (
	kindText      = 't'
	kindReasoning = 'r'
	kindToolCall  = 'c'
)

// runTypes are the stream record types of a run of deltas of each kind.
var runTypes = map[byte]string{kindText: "text-chunks", kindReasoning: "reasoning-chunks", kindToolCall: "tool-call-chunks"}

// parseDelta reads a chunk of exactly a delta's members (ok false: keep raw).
func parseDelta(chunk []byte) (*chunkDelta, bool) {
	o, err := parseObject(chunk)
	if err != nil {
		return nil, false
	}
	d := &chunkDelta{index: o.get("index"), id: o.get("id"), name: o.get("name")}
	typ, text, args, n := o.get("type"), o.get("text"), o.get("argumentsDelta"), len(o.m)
	for _, m := range o.m {
		switch string(m.Key) {
		case "type", "index", "text", "argumentsDelta", "id", "name":
		default:
			return nil, false
		}
	}
	if d.index == nil {
		return nil, false
	}
	switch {
	case rawjson.StringIs(typ, "text-delta") && n == 3 && isStr(text):
		d.kind, d.text = kindText, text
	case rawjson.StringIs(typ, "reasoning-delta") && n == 3 && isStr(text):
		d.kind, d.text = kindReasoning, text
	case rawjson.StringIs(typ, "tool-call-delta") && text == nil && isStr(args) && d.id != nil &&
		(n == 4 && d.name == nil || n == 5 && d.name != nil):
		d.kind, d.text = kindToolCall, args
	default:
		return nil, false
	}
	return d, true
}

// streamBuilder compacts timed chunks into v2 stream records: a run of
// same-kind deltas into one *-chunks record with time0 and gaps dt (texts
// not joined: token boundaries stay), others into {"type":"chunk"} records.
type streamBuilder struct {
	buf     []byte // records so far, comma separated
	records int

	run         *chunkDelta // the open run's first delta; nil when none
	time0, last int64
	dt, texts   []byte
}

func (b *streamBuilder) sep() {
	if b.records > 0 {
		b.buf = append(b.buf, ',')
	}
	b.records++
}

func (b *streamBuilder) closeRun() {
	r := b.run
	if r == nil {
		return
	}
	b.run = nil
	b.sep()
	b.buf = append(b.buf, `{"type":"`...)
	b.buf = append(b.buf, runTypes[r.kind]...)
	b.buf = append(b.buf, `","time0":`...)
	b.buf = rawjson.AppendInt(b.buf, b.time0)
	b.buf = append(b.buf, `,"index":`...)
	b.buf = append(b.buf, r.index...)
	b.buf = append(b.buf, `,"dt":[`...)
	b.buf = append(b.buf, b.dt...)
	b.buf = append(b.buf, ']')
	if r.kind == kindToolCall {
		b.buf = append(b.buf, `,"id":`...)
		b.buf = append(b.buf, r.id...)
		if r.name != nil {
			b.buf = append(b.buf, `,"name":`...)
			b.buf = append(b.buf, r.name...)
		}
		b.buf = append(b.buf, `,"args":[`...)
	} else {
		b.buf = append(b.buf, `,"texts":[`...)
	}
	b.buf = append(b.buf, b.texts...)
	b.buf = append(b.buf, "]}"...)
	b.dt, b.texts = b.dt[:0], b.texts[:0]
}

func (b *streamBuilder) addDelta(t int64, d *chunkDelta) {
	if r := b.run; r != nil && r.kind == d.kind && bytes.Equal(r.index, d.index) &&
		(d.kind != kindToolCall || bytes.Equal(r.id, d.id) && (r.name == nil) == (d.name == nil) && bytes.Equal(r.name, d.name)) {
		if len(b.dt) > 0 {
			b.dt = append(b.dt, ',')
		}
		b.dt = rawjson.AppendInt(b.dt, t-b.last)
		b.texts = append(b.texts, ',')
		b.texts = append(b.texts, d.text...)
		b.last = t
		return
	}
	b.closeRun()
	b.run = d
	b.time0, b.last = t, t
	b.texts = append(b.texts[:0], d.text...)
	b.dt = b.dt[:0]
}

func (b *streamBuilder) addRaw(t int64, chunk []byte) {
	b.closeRun()
	b.sep()
	b.buf = append(b.buf, `{"type":"chunk","time":`...)
	b.buf = rawjson.AppendInt(b.buf, t)
	b.buf = append(b.buf, `,"chunk":`...)
	b.buf = append(b.buf, chunk...)
	b.buf = append(b.buf, '}')
}

// bytes returns the stream as a JSON array.
func (b *streamBuilder) bytes() []byte {
	b.closeRun()
	out := make([]byte, 0, len(b.buf)+2)
	out = append(out, '[')
	out = append(out, b.buf...)
	return append(out, ']')
}
