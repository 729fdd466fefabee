package convlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"

	"github.com/convkit/convkit/internal/rawjson"
)

// Fuzz targets. Seed corpora live in testdata/fuzz/<FuzzName>/; run one
// with
//
//	go test -run '^$' -fuzz '^FuzzReader$' -fuzztime 60s ./convlog

// refDecoder decodes whole inputs for comparison, with a memory bound.
var refDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(1<<27),
	zstd.WithDecoderMaxMemory(64<<20))

func FuzzFrameScanner(f *testing.F) {
	f.Add([]byte{})
	f.Add(zlog([]string{lTurnStart(0)}))
	f.Fuzz(func(t *testing.T, data []byte) {
		size := int64(len(data))
		// The scan over bytes gives exactly the scan over a file.
		scan := func(src io.ReaderAt) (s string) {
			for f, err := range NewFrameScanner(src, size).Frames() {
				s += fmt.Sprint(f, err) + "\n"
			}
			return s
		}
		if got, want := scan(Bytes(data)), scan(bytes.NewReader(data)); got != want {
			t.Fatalf("frames over bytes:\n%s\nover a file:\n%s", got, want)
		}
		var end int64
		var frames []Frame
		var scanErr error
		i, torn := int64(0), false
		sc := NewFrameScanner(bytes.NewReader(data), size)
		for fr, err := range sc.Frames() {
			if i++; i > size+2 || scanErr != nil || torn {
				t.Fatalf("frame %d (%+v, %v) after %d bytes, error %v, torn %v", i, fr, err, size, scanErr, torn)
			}
			if err != nil {
				var fe *FrameError
				if !errors.As(err, &fe) {
					t.Fatalf("error %T %v is not a *FrameError", err, err)
				}
				if fe.Frame != i || fe.Offset < end || fe.Offset >= size {
					t.Fatalf("frame error %+v, frame %d starts at %d of %d", fe, i, end, size)
				}
				scanErr = err
				continue
			}
			if fr.Index != i || fr.Offset != end || fr.Size <= 0 || fr.Offset+fr.Size > size {
				t.Fatalf("frame %+v: want index %d at %d, within %d bytes", fr, i, end, size)
			}
			end = fr.Offset + fr.Size
			frames = append(frames, fr)
			if torn = fr.Torn; torn {
				if end != size {
					t.Fatalf("torn frame %+v does not reach the end (%d)", fr, size)
				}
				// The best-effort reader of a torn frame never panics.
				if r, ok := fr.completeBlocks(bytes.NewReader(data)); ok {
					io.Copy(io.Discard, io.LimitReader(r, 1<<20))
				}
			}
		}
		if scanErr == nil && end != size {
			t.Fatalf("EOF at byte %d of %d", end, size)
		}
		// A scanner at its end or past an error yields nothing more.
		for fr, err := range sc.Frames() {
			t.Fatalf("after the end (error %v): frame %+v, %v", scanErr, fr, err)
		}
		// A stream the reference decoder accepts is one the scanner walks,
		// unless it uses what a log may not: skippable frames, the unused
		// descriptor bit.
		if len(data) > 0 && len(data) < 1<<16 {
			if _, err := refDecoder.DecodeAll(data, nil); err == nil {
				if scanErr != nil && !strings.Contains(scanErr.Error(), "skippable") &&
					!strings.Contains(scanErr.Error(), "reserved frame-header bit") {
					t.Fatalf("zstd decodes the input, the scanner refuses it: %v", scanErr)
				}
				if scanErr == nil && len(frames) > 0 && frames[len(frames)-1].Torn {
					t.Fatalf("zstd decodes the input, the scanner finds a torn frame %+v", frames[len(frames)-1])
				}
			}
		}
	})
}

// FuzzCommittedPrefix: any bytes are either refused with a FormatError or
// given a prefix the reader agrees with (where it reads the log strictly),
// the same over a file and over bytes; a copy of the prefix is a log with
// no torn tail holding the same events, and Len long.
func FuzzCommittedPrefix(f *testing.F) {
	rows := []string{lTurnStart(0), lStepStart(1), lUser(2, "u1")}
	full := zlog(rows[:1], rows[1:])
	f.Add(full, true)
	f.Add(full[:len(full)-2], true)
	f.Add(full[:len(full)-9], true)
	f.Add(plainLog(append([]string{hdrV4}, rows...)...), false)
	f.Add(append(plainLog(hdrV4, rows[0]), rows[1][:9]...), false)
	f.Add([]byte{}, false)
	f.Fuzz(func(t *testing.T, data []byte, compressed bool) {
		comp := Plain
		if compressed {
			comp = Zstd
		}
		p, err := CommittedPrefix(Bytes(data), int64(len(data)), comp, "f.v4.jsonl")
		pf, errf := CommittedPrefix(bytes.NewReader(data), int64(len(data)), comp, "f.v4.jsonl")
		if fmt.Sprint(p, err) != fmt.Sprint(pf, errf) {
			t.Fatalf("over bytes %+v, %v; over a file %+v, %v", p, err, pf, errf)
		}
		if err != nil {
			checkFormatError(t, err, "f.v4.jsonl")
			return
		}
		if p.Bytes < 0 || p.Len() <= 0 || p.Bytes > int64(len(data)) || p.Torn != (p.Bytes < int64(len(data))) || (p.RecoveredBytes > 0) != (p.RecoveredLines > 0) {
			t.Fatalf("prefix %+v of %d bytes", p, len(data))
		}
		evs, st, rerr := readBytes(t, data, comp)
		if rerr != nil {
			if p.RecoveredLines != 0 {
				t.Fatalf("prefix %+v recovers lines of a log the reader refuses: %v", p, rerr)
			}
			return
		}
		if p.Bytes != st.CommittedBytes || p.RecoveredLines != st.RecoveredLines {
			t.Fatalf("prefix %+v, reader stats %+v", p, st)
		}
		out, err := io.ReadAll(p.Reader(bytes.NewReader(data)))
		if err != nil || int64(len(out)) != p.Len() {
			t.Fatalf("copy of %d bytes (Len %d): %v", len(out), p.Len(), err)
		}
		got, cst, err := readBytes(t, out, comp)
		if err != nil || cst.TornTail || len(got) != len(evs) {
			t.Fatalf("copy reads %d events of %d, stats %+v, %v", len(got), len(evs), cst, err)
		}
		for i := range got {
			if !bytes.Equal(got[i].Raw, evs[i].Raw) {
				t.Fatalf("event %d differs in the copy", i)
			}
		}
	})
}

// fuzzRead reads data as a log with the given compression and checks the
// reader's promises; it returns the events and whether the log was
// accepted.
func fuzzRead(t *testing.T, data []byte, comp Compression, onProblem bool) {
	const path = "fuzz.log"
	var problems int64
	opts := ReaderOptions{Version: -1, MaxLineBytes: 1 << 12, Compression: &comp}
	if onProblem {
		opts.OnProblem = func(fe *FormatError) {
			problems++
			checkFormatError(t, fe, path)
		}
	}
	r, err := NewReader(bytes.NewReader(data), int64(len(data)), path, opts)
	if err != nil {
		checkFormatError(t, err, path)
		return
	}
	defer r.Close()
	var plain bytes.Buffer
	plain.Write(r.Header().Raw)
	plain.WriteByte('\n')
	var events int64
	var hist History
	rules := NewValidator(r.Header())
	for e, err := range r.Events() {
		if events+problems > 1<<20 {
			if comp == Plain {
				t.Fatalf("%d events and problems from %d bytes", events+problems, len(data))
			}
			return // a decompression bomb: bounded, just long
		}
		if err != nil {
			checkFormatError(t, err, path)
			again := 0
			for _, err2 := range r.Events() {
				if again++; err2 != err {
					t.Fatalf("Events after error %v yields %v", err, err2)
				}
			}
			if again != 1 {
				t.Fatalf("Events after error %v yields %d times, want the error once", err, again)
			}
			return
		}
		events++
		if e.Seq < 0 || len(e.Raw) > 1<<12 {
			t.Fatalf("event %+v", e)
		}
		c := e.Clone()
		if !bytes.Equal(c.AppendJSON(nil), e.Raw) {
			t.Fatalf("clone re-encodes differently")
		}
		plain.Write(e.Raw)
		plain.WriteByte('\n')
		// The derived history and the text helpers take any accepted
		// event without panicking (they may refuse it).
		hist.Apply(e)
		if m := MessageOf(e); m != nil {
			MessageText(m)
			ReadableText(m)
		}
		// So does the validator; what it refuses is a *RuleError at the
		// event's line.
		if rerr := rules.Check(e); rerr != nil {
			var re *RuleError
			fe := r.RuleProblem(rerr)
			if !errors.As(fe, &re) || !errors.Is(fe, ErrCorrupt) || fe.(*FormatError).Pos.Line < 2 {
				t.Fatalf("rule problem %v", fe)
			}
		}
		if m := rules.Message(); m != nil {
			// The text from the members the line's check kept is the
			// text of a scan of the message.
			r1, t1 := EventMessageText(e, m)
			if r2, t2 := MessageText(m); r1 != r2 || t1 != t2 {
				t.Fatalf("EventMessageText = %q, %q; MessageText = %q, %q", r1, t1, r2, t2)
			}
		}
		ts := rules.Turn()
		CloseTurn(ts, e.Seq+1, e.Time, "interrupted")
	}
	rules.Finish()
	hist.Messages()
	for e, err := range r.Events() {
		t.Fatalf("Events after the end yields %v, %v", e, err)
	}
	st := r.Stats()
	if st.Events != events || st.CommittedBytes > st.FileBytes || st.TornBytes != st.FileBytes-st.CommittedBytes ||
		st.FileBytes != int64(len(data)) || (st.TornBytes > 0) != st.TornTail {
		t.Fatalf("stats %+v after %d events", st, events)
	}
	if onProblem {
		return
	}
	if st.Lines != events+1 || st.PlainBytes != int64(plain.Len()) {
		t.Fatalf("stats %+v, %d events, %d plain bytes", st, events, plain.Len())
	}
	// Nothing accepted is skipped: the lines read are the content.
	switch comp {
	case Plain:
		if !bytes.Equal(plain.Bytes(), data[:st.CommittedBytes]) {
			t.Fatalf("lines read differ from the committed bytes")
		}
		if bytes.IndexByte(data[st.CommittedBytes:], '\n') >= 0 {
			t.Fatalf("the torn tail holds a newline")
		}
	case Zstd:
		if st.TornTail {
			return
		}
		want, err := refDecoder.DecodeAll(data, nil)
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return
		}
		if err != nil {
			t.Fatalf("the reader accepted what zstd refuses: %v", err)
		}
		if !bytes.Equal(plain.Bytes(), want) {
			t.Fatalf("lines read differ from the decoded content:\n%q\n%q", plain.Bytes(), want)
		}
	}
}

func checkFormatError(t *testing.T, err error, path string) {
	t.Helper()
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("error %T %v is not a *FormatError", err, err)
	}
	if errors.Is(err, ErrCorrupt) == errors.Is(err, ErrUnsupported) {
		t.Fatalf("error %v: kind %v", err, fe.Kind)
	}
	if !strings.HasPrefix(err.Error(), path+": ") || fe.Msg == "" {
		t.Fatalf("error %q does not name the file", err)
	}
}

func FuzzReader(f *testing.F) {
	f.Add(plainLog(hdrV4, lTurnStart(0)))
	f.Add(zlog([]string{lTurnStart(0)}))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRead(t, data, Plain, false)
		fuzzRead(t, data, Plain, true)
		fuzzRead(t, data, Zstd, false)
		fuzzRead(t, data, Zstd, true)
	})
}

// roundTripEvents builds a valid v4 event sequence from fuzzed values: its
// turns follow their path and its replacements name spans of the history.
func roundTripEvents(text, typ string, n uint8, seed int64) [][]Event {
	rng := rand.New(rand.NewPCG(uint64(seed), 7))
	q := func(s string) string { return string(rawjson.AppendString(nil, s)) }
	plugin := "plugin:" + typ
	var all []Event
	var nodes []int64    // the history's surface nodes
	var pending []string // tool calls without a result
	var unstarted []int  // indexes in pending of calls no tool/call recorded
	turn, step := int64(0), int64(0)
	turnOpen, stepOpen := false, false
	user := func(seq int64) Event {
		return Event{Type: TypeUserMessage, SurfaceOp: &SurfaceOp{},
			Data: fmt.Appendf(nil, `{"role":"user","content":[{"type":"text","text":%s}],"source":{"kind":%s},"id":"u%d"}`, q(text), q("acme-"+typ), seq)}
	}
	for seq := range int64(n) {
		tm := rng.Int64N(2*rawjson.MaxSafeInt+1) - rawjson.MaxSafeInt
		if rng.IntN(4) > 0 {
			tm = 1790000000000 + seq
		}
		var e Event
		k := rng.IntN(9)
		if (k == 2 || k == 3 || k == 4) && !stepOpen {
			k = 0 // a model call, a tool call or a result needs a step
		}
		switch {
		case seq == 0 || (k == 0 && !turnOpen):
			turn, step, turnOpen, stepOpen, pending, unstarted = turn+1, 0, true, false, nil, nil
			e = Event{Type: "turn/start", Data: fmt.Appendf(nil, `{"turn":%d}`, turn)}
		case k == 0 && !stepOpen:
			step, stepOpen = step+1, true
			e = Event{Type: "step/start", Data: fmt.Appendf(nil, `{"turn":%d,"step":%d}`, turn, step)}
		case k == 0 && len(pending) == 0:
			stepOpen = false
			e = Event{Type: "step/end", Data: fmt.Appendf(nil, `{"turn":%d,"step":%d}`, turn, step)}
		case k == 0 || (k == 4 && len(pending) > 0):
			var seqs []int64
			for s := range seq {
				if rng.IntN(3) == 0 {
					seqs = append(seqs, s)
				}
			}
			if rng.IntN(4) == 0 {
				rng.Shuffle(len(seqs), func(i, j int) { seqs[i], seqs[j] = seqs[j], seqs[i] })
			}
			call := pending[0]
			pending = pending[1:]
			unstarted = slices.DeleteFunc(unstarted, func(i int) bool { return i == 0 })
			for i := range unstarted {
				unstarted[i]--
			}
			e = Event{Type: TypeToolResult, SurfaceOp: &SurfaceOp{}, SourceEventSeqs: seqs,
				Data: fmt.Appendf(nil, `{"turn":%d,"step":%d,"message":{"role":"tool","source":{"kind":"tool","callId":%q},"toolCallId":%q,"content":[{"type":"text","text":%s}],"id":"r%d"}}`, turn, step, call, call, q(text), seq)}
		case k == 1 || k == 4:
			e = user(seq)
		case k == 2:
			content := "[]"
			if rng.IntN(2) == 0 {
				content = fmt.Sprintf(`[{"type":"text","text":%s}]`, q(text))
			}
			e = Event{Type: TypeAssistantMessage, SurfaceOp: &SurfaceOp{},
				Data: fmt.Appendf(nil, `{"turn":%d,"step":%d,"message":{"role":"assistant","content":%s,"source":{"kind":"model","provider":"p","model":"m"},"id":"a%d"},"stream":[]}`, turn, step, content, seq)}
		case k == 3 && len(unstarted) > 0:
			// The answer's call starts.
			call := pending[unstarted[0]]
			unstarted = unstarted[1:]
			e = Event{Type: "tool/call", Data: fmt.Appendf(nil, `{"turn":%d,"step":%d,"callId":%q,"name":"x%s,"arguments":%s}`, turn, step, call, q(typ)[1:], q(text))}
		case k == 3:
			// An answer asks for a call.
			unstarted = append(unstarted, len(pending))
			pending = append(pending, fmt.Sprintf("c%d", seq))
			e = Event{Type: TypeAssistantMessage, SurfaceOp: &SurfaceOp{},
				Data: fmt.Appendf(nil, `{"turn":%d,"step":%d,"message":{"role":"assistant","content":[{"type":"tool-call","id":"c%d","name":"x%s,"arguments":%s}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a%d"},"stream":[]}`,
					turn, step, seq, q(typ)[1:], q(text), seq)}
		case k == 5:
			e = Event{Type: plugin, Ignorable: true, Data: fmt.Appendf(nil, `{"v":%s,"n":%d}`, q(text), rng.Int64())}
		case k == 6 && len(nodes) > 0:
			i := rng.IntN(len(nodes))
			j := i + rng.IntN(len(nodes)-i)
			e = Event{Type: TypeUserMessage, SurfaceOp: &SurfaceOp{Replace: true, StartSeq: nodes[i], EndSeq: nodes[j]},
				SourceEventSeqs: slices.Sorted(slices.Values(nodes[i : j+1])),
				Data:            fmt.Appendf(nil, `{"role":"user","content":[],"source":{"kind":"acme-summary"},"id":"k%d"}`, seq)}
			nodes = append(nodes[:i:i], append([]int64{seq}, nodes[j+1:]...)...)
		case k == 7 && turnOpen && !stepOpen:
			turnOpen = false
			reason := fmt.Sprintf(`{"kind":%q}`, TurnEndKinds[rng.IntN(len(TurnEndKinds))])
			switch reason {
			case `{"kind":"aborted"}`:
				reason = `{"kind":"aborted","reason":{"kind":"user"}}`
			case `{"kind":"error"}`:
				reason = `{"kind":"error","error":{"code":"E","message":"failed"}}`
			}
			e = Event{Type: TypeTurnEnd, Data: fmt.Appendf(nil, `{"turn":%d,"reason":%s}`, turn, reason)}
		default:
			e = Event{Type: "session/title", Data: fmt.Appendf(nil, `{"title":%s,"messageSeqs":[],"source":{"kind":"user"}}`, q(text))}
		}
		if e.SurfaceOp != nil && !e.SurfaceOp.Replace {
			nodes = append(nodes, seq)
		}
		e.Time = tm
		all = append(all, e)
	}
	var batches [][]Event
	for len(all) > 0 {
		k := 1 + rng.IntN(len(all))
		batches = append(batches, all[:k])
		all = all[k:]
	}
	return batches
}

// decodeString is what a reader makes of s after the writer encoded it.
func decodeString(s string) string {
	d, _ := rawjson.String(rawjson.AppendString(nil, s))
	return d
}

func FuzzRoundTrip(f *testing.F) {
	f.Add("s1", "home/u", "hello", "thing", uint8(12), int64(1), false)
	f.Add("s1", "home/u", "hello", "thing", uint8(12), int64(1), true)
	f.Fuzz(func(t *testing.T, id, cwd, text, typ string, n uint8, seed int64, zst bool) {
		if id == "" {
			id = "s"
		}
		n %= 64
		comp := Plain
		if zst {
			comp = Zstd
		}
		h := &Header{Type: SessionLog, Version: CurrentVersion, ID: id, CreatedAt: seed & rawjson.MaxSafeInt, Cwd: "/" + cwd,
			ParentSession: typ, AgentPreset: text, IsSeeded: seed < 0, DelegationDepth: int64(n)}
		if seed%3 == 0 {
			h.Origin = "subagent"
		}
		batches := roundTripEvents(text, typ, n, seed)
		dir := t.TempDir()
		path1 := filepath.Join(dir, FileName("a", CurrentVersion, comp))
		var first []Event
		if len(batches) > 0 {
			first = batches[0]
		}
		w, err := Create(path1, h, first, WriterOptions{Compression: comp})
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		for _, b := range batches[min(1, len(batches)):] {
			if err := w.Append(b); err != nil {
				t.Fatalf("Append: %v", err)
			}
		}
		w.Close()

		r, err := Open(path1, ReaderOptions{})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		hdr := r.Header()
		if hdr.ID != decodeString(id) || hdr.Cwd != decodeString("/"+cwd) || hdr.AgentPreset != decodeString(text) ||
			hdr.IsSeeded != h.IsSeeded || hdr.DelegationDepth != h.DelegationDepth || hdr.Origin != h.Origin {
			t.Fatalf("header read back as %+v, wrote %+v", hdr, h)
		}
		var evs []Event
		for e, err := range r.Events() {
			if err != nil {
				t.Fatalf("reading what Create and Append wrote: %v", err)
			}
			evs = append(evs, e.Clone())
		}
		st := r.Stats()
		r.Close()
		var wrote []Event
		for _, b := range batches {
			wrote = append(wrote, b...)
		}
		if len(evs) != len(wrote) || st.TornTail || (comp == Zstd && st.Frames != int64(len(batches))+1) {
			t.Fatalf("read %d events of %d, stats %+v", len(evs), len(wrote), st)
		}
		for i, e := range evs {
			w := wrote[i]
			if e.Seq != int64(i) || e.Type != decodeString(w.Type) || e.Time != w.Time || !bytes.Equal(e.Data, w.Data) ||
				e.Ignorable != w.Ignorable || fmt.Sprint(e.SourceEventSeqs) != fmt.Sprint(w.SourceEventSeqs) ||
				(e.SurfaceOp == nil) != (w.SurfaceOp == nil) || (e.SurfaceOp != nil && *e.SurfaceOp != *w.SurfaceOp) {
				t.Fatalf("event %d read back as %+v, wrote %+v", i, e, w)
			}
		}

		// Rewrite through a second Create with what was read.
		path2 := filepath.Join(dir, FileName("b", CurrentVersion, comp))
		w2, err := Create(path2, hdr, evs, WriterOptions{Compression: comp})
		if err != nil {
			t.Fatalf("second Create: %v", err)
		}
		w2.Close()
		b1, b2 := mustRead(t, path1), mustRead(t, path2)
		if comp == Zstd {
			if b1, err = refDecoder.DecodeAll(b1, nil); err != nil {
				t.Fatal(err)
			}
			if b2, err = refDecoder.DecodeAll(b2, nil); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(b1, b2) {
			t.Fatalf("rewritten log differs:\n%s\n---\n%s", b1, b2)
		}
	})
}

func fuzzHeader(ver uint8) string {
	switch ver {
	case 0, 1:
		return fmt.Sprintf(`{"type":"session","version":%d,"id":"s1","createdAt":1,"delegationDepth":0}`, ver)
	case 2, 3:
		return fmt.Sprintf(`{"type":"session","version":%d,"id":"s1","createdAt":1,"isSeeded":false,"delegationDepth":0}`, ver)
	case 5:
		return `{"type":"conversation","version":4,"id":"c1","createdAt":1}`
	}
	return hdrV4
}

func FuzzEnvelope(f *testing.F) {
	f.Add(uint8(4), []byte(lTurnStart(0)))
	f.Fuzz(func(t *testing.T, ver uint8, line []byte) {
		ver %= 6
		// An event built in memory is not validated before Apply: any data
		// is refused or taken, never a panic or a hang.
		for _, typ := range []string{TypeUserMessage, TypeAssistantMessage} {
			var h History
			h.Apply(&Event{Type: typ, Data: line, SurfaceOp: &SurfaceOp{}})
			h.Apply(&Event{Type: typ, Seq: 1, Data: line, SurfaceOp: &SurfaceOp{Replace: true}})
		}
		data := append([]byte(fuzzHeader(ver)+"\n"), line...)
		data = append(data, '\n')
		r, err := NewReader(bytes.NewReader(data), int64(len(data)), "env.log", ReaderOptions{Version: -1, MaxLineBytes: 1 << 16})
		if err != nil {
			t.Fatalf("header refused: %v", err)
		}
		defer r.Close()
		var e *Event
		for e, err = range r.Events() {
			break
		}
		if err != nil {
			checkFormatError(t, err, "env.log")
			return
		}
		if e == nil {
			t.Fatal("no event from the line")
		}
		oneLine := bytes.IndexByte(line, '\n') < 0
		var h History
		h.Apply(e)
		if m := MessageOf(e); m != nil {
			MessageText(m)
			ReadableText(m)
		}
		c := e.Clone()
		if oneLine && !bytes.Equal(c.AppendJSON(nil), line) {
			t.Fatalf("accepted line re-encodes as %q, want %q", c.AppendJSON(nil), line)
		}
		if !oneLine || ver != 4 {
			return
		}
		for e, err := range r.Events() {
			t.Fatalf("a second event from one line: %v, %v", e, err)
		}
		// Encoded afresh from its fields, the event reads back the same.
		c.Raw = nil
		again := c.AppendJSON(nil)
		data2 := append([]byte(fuzzHeader(ver)+"\n"), again...)
		data2 = append(data2, '\n')
		r2, err := NewReader(bytes.NewReader(data2), int64(len(data2)), "env2.log", ReaderOptions{Version: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer r2.Close()
		var e2 *Event
		for e2, err = range r2.Events() {
			break
		}
		if err != nil || e2 == nil {
			t.Fatalf("re-encoded line %q refused: %v", again, err)
		}
		if e2.Type != c.Type || e2.Seq != c.Seq || e2.Time != c.Time || !bytes.Equal(e2.Data, c.Data) ||
			e2.Ignorable != c.Ignorable || e2.Known != c.Known || fmt.Sprint(e2.SourceEventSeqs) != fmt.Sprint(c.SourceEventSeqs) ||
			(e2.SurfaceOp == nil) != (c.SurfaceOp == nil) || (e2.SurfaceOp != nil && *e2.SurfaceOp != *c.SurfaceOp) {
			t.Fatalf("re-encoded %q reads as %+v, original %+v", again, e2, c)
		}
	})
}

// The seed corpora are committed files; this check keeps them in place.
func TestFuzzSeedCorpora(t *testing.T) {
	for _, name := range []string{"FuzzFrameScanner", "FuzzReader", "FuzzRoundTrip", "FuzzEnvelope", "FuzzHeader", "FuzzCommittedPrefix", "FuzzAppendAfterTail"} {
		ents, err := os.ReadDir(filepath.Join("testdata", "fuzz", name))
		if err != nil || len(ents) < 8 {
			t.Errorf("%s: %d seed files, %v", name, len(ents), err)
		}
	}
}

// FuzzHeader checks header validation on its own: any line is either refused
// with a FormatError on line 1 whose column lies within the line, or accepted
// as a header of a known type whose canonical re-encoding is valid JSON and
// parses back to the same fields.
func FuzzHeader(f *testing.F) {
	for ver := uint8(0); ver < 6; ver++ {
		f.Add(int8(-1), []byte(fuzzHeader(ver)))
	}
	f.Add(int8(4), []byte(hdrV4))
	f.Add(int8(3), []byte(`{"type":"session","version":4,"id":"s1","createdAt":1,"isSeeded":false,"delegationDepth":0}`))
	f.Add(int8(1), []byte(`{"type":"session","version":1,"id":"s1","createdAt":1,"seedLength":3,"delegationDepth":0,"cwd":"/w\u00e9"}`))
	f.Add(int8(-1), []byte(`{"type":"session","version":2,"id":"s1","id":"s2","createdAt":1,"isSeeded":true,"delegationDepth":0}`))
	f.Add(int8(-1), []byte("{\"type\":\"session\",\"version\":2,\"id\":\"\xff\"}"))
	f.Fuzz(func(t *testing.T, want int8, line []byte) {
		wantVersion := int(want)
		if wantVersion < -1 || wantVersion > 9 {
			wantVersion = -1
		}
		h, err := ParseHeader("h.log", line, wantVersion)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("refusal is %T, not a FormatError: %v", err, err)
			}
			if fe.Pos.Line != 1 || fe.Pos.Column < 1 || fe.Pos.Column > int64(len(line))+1 {
				t.Fatalf("refusal position %+v outside a %d-byte line: %v", fe.Pos, len(line), err)
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("refusal of no known kind: %v", err)
			}
			return
		}
		if h.Type != SessionLog && h.Type != ConversationLog {
			t.Fatalf("accepted header of type %q", h.Type)
		}
		if wantVersion >= 0 && h.Version != wantVersion {
			t.Fatalf("accepted version %d where the name says %d", h.Version, wantVersion)
		}
		if !utf8.Valid(line) || !json.Valid(line) {
			t.Fatalf("accepted a header that is not valid UTF-8 JSON: %q", line)
		}
		canon := *h
		canon.Raw = nil
		enc := canon.AppendJSON(nil)
		if !json.Valid(enc) {
			t.Fatalf("canonical header is not JSON: %s", enc)
		}
		back, err := ParseHeader("h.log", enc, wantVersion)
		if err != nil {
			t.Fatalf("canonical header %s refused: %v", enc, err)
		}
		back.Raw = nil
		if !reflect.DeepEqual(&canon, back) {
			t.Fatalf("header changed through its canonical form:\n got %+v\nwant %+v", back, &canon)
		}
	})
}
