package upgrade

import (
	"bytes"
	"slices"
	"testing"

	"github.com/convkit/convkit/convlog"
)

// TestLineInPlace: a line written around data already in the chunk is
// the line AppendJSON writes, wherever in the chunk's spare room the data
// was put; data that does not fit where its line puts it is left as it
// was, and the chunk too.
func TestLineInPlace(t *testing.T) {
	ev := convlog.Event{Type: "tool/result", Seq: 12, Time: 34, Ignorable: true, SourceEventSeqs: []int64{1, 2, 3, 9},
		SurfaceOp: &convlog.SurfaceOp{Replace: true, StartSeq: 4, EndSeq: 7}}
	data := []byte(`{"message":{"role":"tool","content":[{"type":"text","text":"out"}],"id":"r1"}}`)
	prev := []byte(`{"type":"x","seq":11,"time":1,"data":{}}` + "\n")
	ev.Data = data
	want := ev.AppendJSON(bytes.Clone(prev))
	_, p := lineAround(&ev, nil)
	if p <= 0 {
		t.Fatalf("data offset %d", p)
	}
	for _, shift := range []int{0, -5, 7, -p} {
		chunk := make([]byte, 0, 1<<10)
		chunk = append(chunk, prev...)
		off := len(chunk) + p + shift
		copy(chunk[off:cap(chunk)], data)
		e := ev
		e.Data = chunk[off : off+len(data)]
		got, ok := lineInPlace(chunk, &e, off, nil)
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("data shifted by %d: ok %v, line\n%s\nwant\n%s", shift, ok, got, want)
		}
		if !bytes.Equal(e.Data, data) {
			t.Fatalf("data shifted by %d: the event's data is %q after", shift, e.Data)
		}
	}
	// Data put 5 bytes early at the end of the chunk's capacity: where
	// the line puts it, it would not fit.
	chunk := append(make([]byte, 0, len(prev)+p-5+len(data)), prev...)
	off := len(chunk) + p - 5
	copy(chunk[off:cap(chunk)], data)
	e := ev
	e.Data = chunk[off : off+len(data)]
	if got, ok := lineInPlace(chunk, &e, off, nil); ok || !bytes.Equal(got, prev) || !bytes.Equal(e.Data, data) {
		t.Fatalf("data that does not fit where its line puts it: ok %v, chunk %q", ok, got)
	}
}

// TestLineRoomOneRow: of one row's events only the first keeps its data
// in the frame's chunk; one lent the room after another is moved out
// before the lines before it are written there, and a second lifted
// result of the row gets a buffer of its own.
func TestLineRoomOneRow(t *testing.T) {
	chunk := make([]byte, 0, 64)
	room := &lineRoom{grow: func(n int) []byte {
		chunk = slices.Grow(chunk, n)
		return chunk
	}}
	lift := func(e *event, s string) {
		b := append(room.lineBuf(e, len(s)), s...)
		room.lend(b)
		e.data = b
	}
	e1 := &event{typ: "tool/result", seq: 5, time: 6}
	e2 := &event{typ: "tool/result", seq: 7, time: 8}
	lift(e1, `{"lifted":1}`)
	lift(e2, `{"lifted":2}`)
	if !room.placed(e1.data) || room.placed(e2.data) {
		t.Fatalf("in the room: first %v, second %v; want only the first", room.placed(e1.data), room.placed(e2.data))
	}
	ev := convlog.Event{Type: e1.typ, Seq: e1.seq, Time: e1.time}
	_, p := lineAround(&ev, nil)
	if room.off != len(chunk)+p {
		t.Fatalf("the room is at %d, the line puts the data at %d", room.off, len(chunk)+p)
	}

	// The lent event second in its row: moved out.
	r := &Reader{room: room, pending: []*event{e2, e1}}
	r.keepRoom()
	if room.placed(e1.data) {
		t.Fatal("the second event of the row kept its data in the room")
	}
	for i := range chunk[:cap(chunk)] {
		chunk[:cap(chunk)][i] = 'x'
	}
	if string(e1.data) != `{"lifted":1}` || string(e2.data) != `{"lifted":2}` {
		t.Fatalf("data after the chunk was overwritten: %q, %q", e1.data, e2.data)
	}

	// The next row: the room is free again, and kept by a first event.
	room.reset()
	e3 := &event{typ: "tool/result", seq: 9, time: 10}
	lift(e3, `{"lifted":3}`)
	r.pending = []*event{e3, e2}
	r.keepRoom()
	if !room.placed(e3.data) {
		t.Fatal("the first event of the row lost its place in the room")
	}
}
