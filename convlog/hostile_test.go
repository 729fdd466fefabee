package convlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/convkit/convkit/internal/rawjson"
)

// Hostile input: every bad log gets a *FormatError naming the file, a
// position and what is wrong, wrapping ErrCorrupt or ErrUnsupported, and the
// file is left exactly as it was.

const hdrV4 = `{"type":"session","version":4,"id":"s1","createdAt":1790000000000,"cwd":"/home/u/proj","isSeeded":false,"delegationDepth":0}`

// Event lines used to build hostile logs.
func lTurnStart(seq int) string {
	return fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":1,"data":{"turn":1}}`, seq)
}

func lStepStart(seq int) string {
	return fmt.Sprintf(`{"type":"step/start","seq":%d,"time":2,"data":{"turn":1,"step":1}}`, seq)
}

func lUser(seq int, id string) string {
	return fmt.Sprintf(`{"type":"user/message","seq":%d,"time":3,"data":%s,"surfaceOp":"append"}`, seq, userMsg(id, "hello"))
}

func lAssistant(seq int, id, text string) string {
	return fmt.Sprintf(`{"type":"assistant/message","seq":%d,"time":4,"data":%s,"surfaceOp":"append"}`, seq, assistantData(id, text))
}

func toolResultData(id, callID, text string) string {
	return fmt.Sprintf(`{"turn":1,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":%q},"toolCallId":%q,"content":[{"type":"text","text":%q}],"id":%q}}`,
		callID, callID, text, id)
}

// plainLog joins lines into a plain log, each with its newline.
func plainLog(lines ...string) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// zframe is one checksummed zstd frame holding s.
func zframe(s string) []byte { return encodeFrame(nil, []byte(s)) }

// zlog builds a compressed log: the header frame, then one frame per batch.
func zlog(batches ...[]string) []byte {
	out := zframe(hdrV4 + "\n")
	for _, b := range batches {
		out = append(out, zframe(string(plainLog(b...)))...)
	}
	return out
}

// scanFrame returns the structure of the single frame f.
func scanFrame(t testing.TB, f []byte) Frame {
	t.Helper()
	fr, err := NewFrameScanner(bytes.NewReader(f), int64(len(f))).next()
	if err != nil || fr.Torn || fr.Size != int64(len(f)) {
		t.Fatalf("scanFrame: %+v %v", fr, err)
	}
	return fr
}

type hostileCase struct {
	name string
	file string // file name; default s1.v4.jsonl
	data func(t testing.TB) []byte
	opts ReaderOptions

	// For a refused log:
	kind    error    // ErrCorrupt or ErrUnsupported
	msg     []string // substrings of the message
	pos     []string // substrings naming the position
	atOpen  bool     // the error comes from Open (the header), not Next
	nEvents int      // events read before the error

	// For an accepted log:
	check func(t *testing.T, evs []Event, st Stats)
}

// colOf names the 1-based column of sub in the line (its end when sub is "").
func colOf(line string, n int, sub string) string {
	i := len(line)
	if sub != "" {
		i = strings.Index(line, sub)
	}
	if i < 0 {
		panic(sub)
	}
	return fmt.Sprintf("line %d column %d,", n, i+1)
}

func lines(ls ...string) func(testing.TB) []byte {
	return func(testing.TB) []byte { return plainLog(ls...) }
}

func raw(b []byte) func(testing.TB) []byte { return func(testing.TB) []byte { return b } }

// frameOffsets returns the offsets of the frames of a compressed log.
func frameOffsets(b []byte) []int64 {
	s := NewFrameScanner(bytes.NewReader(b), int64(len(b)))
	var offs []int64
	for f, err := range s.Frames() {
		if err != nil {
			panic(err)
		}
		offs = append(offs, f.Offset)
	}
	return offs
}

func hostileCases() []hostileCase {
	corrupt, unsupported := ErrCorrupt, ErrUnsupported
	userLine := func(seq int, surfaceOp string) string {
		return fmt.Sprintf(`{"type":"user/message","seq":%d,"time":3,"data":%s,"surfaceOp":%s}`, seq, userMsg("u9", "hi"), surfaceOp)
	}
	skippable := []byte{0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 'j', 'u', 'n', 'k'}
	twoBatches := func() []byte {
		return zlog([]string{lTurnStart(0), lStepStart(1)}, []string{lUser(2, "u1"), lAssistant(3, "a1", "hi")})
	}
	return []hostileCase{
		{name: "empty file", data: raw(nil), kind: corrupt, atOpen: true,
			msg: []string{"empty or header-less log"}, pos: []string{"byte 0"}},
		{name: "header-less", data: lines(lTurnStart(0), lStepStart(1)), kind: corrupt, atOpen: true,
			msg: []string{"first line is not a log header"}, pos: []string{"line 1 column", "byte 0"}},
		{name: "header line torn", data: raw([]byte(hdrV4)), kind: corrupt, atOpen: true,
			msg: []string{"empty or header-less log", "complete header line"}, pos: []string{"byte 0"}},
		{name: "header invalid JSON", data: lines(`{"type":"session","version":4,`), kind: corrupt, atOpen: true,
			msg: []string{"header line is not valid JSON"}, pos: []string{colOf(`{"type":"session","version":4,`, 1, "")}},
		{name: "header not an object", data: lines(`["session",4]`), kind: corrupt, atOpen: true,
			msg: []string{"first line is not a JSON object"}, pos: []string{"line 1"}},
		{name: "header version disagrees with name", file: "s1.v3.jsonl", data: lines(hdrV4, lTurnStart(0)),
			kind: corrupt, atOpen: true, msg: []string{"file name identifies v3, but its header identifies v4"}, pos: []string{colOf(hdrV4, 1, `4,"id"`)}},
		{name: "header version 5", file: "s1.v5.jsonl", data: lines(strings.Replace(hdrV4, `"version":4`, `"version":5`, 1)),
			kind: unsupported, atOpen: true, msg: []string{"format v5", "newer"}, pos: []string{"line 1"}},
		{name: "header version 5 in an unversioned name", file: "s1.log", data: lines(strings.Replace(hdrV4, `"version":4`, `"version":5`, 1)),
			kind: unsupported, atOpen: true, msg: []string{"format v5", "upgrade convkit"}, pos: []string{"line 1"}},
		{name: "header unexpected key", data: lines(strings.Replace(hdrV4, `"delegationDepth":0`, `"delegationDepth":0,"mood":"ok"`, 1)),
			kind: corrupt, atOpen: true, msg: []string{`header has unexpected member "mood"`}, pos: []string{"line 1 column"}},
		{name: "v2+ header without isSeeded", data: lines(strings.Replace(hdrV4, `"isSeeded":false,`, ``, 1)),
			kind: corrupt, atOpen: true, msg: []string{`header has no "isSeeded"`}, pos: []string{"line 1"}},
		{name: "v0 header with sandboxMode", file: "s1.jsonl",
			data: lines(`{"type":"session","version":0,"id":"s1","createdAt":1,"delegationDepth":0,"sandboxMode":"workspace-write"}`),
			kind: corrupt, atOpen: true, msg: []string{"retired policy baseline fields"}, pos: []string{"line 1"}},
		{name: "invalid JSON event mid-log", data: lines(hdrV4, lTurnStart(0), lStepStart(1), `{"type":"turn/start","seq":2,`, lTurnStart(3)),
			kind: corrupt, nEvents: 2, msg: []string{"event is not valid JSON"}, pos: []string{"line 4 column", "byte "}},
		{name: "invalid UTF-8 in a string", data: lines(hdrV4, "{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"turn\":1,\"x\":\"a\xffb\"}}"),
			kind: corrupt, msg: []string{"invalid UTF-8 in string"}, pos: []string{colOf("{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"turn\":1,\"x\":\"a\xffb\"}}", 2, "\xff")}},
		{name: "seq gap", data: lines(hdrV4, lTurnStart(0), lTurnStart(2)),
			kind: corrupt, nEvents: 1, msg: []string{"expected 1, got 2"}, pos: []string{"line 3"}},
		{name: "seq repeat", data: lines(hdrV4, lTurnStart(0), lStepStart(1), lStepStart(1)),
			kind: corrupt, nEvents: 2, msg: []string{"expected 2, got 1"}, pos: []string{"line 4"}},
		{name: "seq not starting at 0", data: lines(hdrV4, lTurnStart(1)),
			kind: corrupt, msg: []string{"expected 0, got 1"}, pos: []string{"line 2"}},
		{name: "time 1.5", data: lines(hdrV4, `{"type":"turn/start","seq":0,"time":1.5,"data":{"turn":1}}`),
			kind: corrupt, msg: []string{"time must be a safe integer"}, pos: []string{colOf(`{"type":"turn/start","seq":0,"time":1.5,`, 2, "1.5")}},
		{name: "ignorable false", data: lines(hdrV4, `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"ignorable":false}`),
			kind: corrupt, msg: []string{"ignorable must be exactly true"}, pos: []string{"line 2"}},
		{name: "unknown type not ignorable", data: lines(hdrV4, lTurnStart(0), `{"type":"x-plugin/thing","seq":1,"time":1,"data":{}}`),
			kind: unsupported, nEvents: 1, msg: []string{`unknown event type "x-plugin/thing" at seq 1`}, pos: []string{"line 3"}},
		{name: "unknown type ignorable", data: lines(hdrV4, lTurnStart(0), `{"type":"x-plugin/thing","seq":1,"time":1,"data":{"k":[1]},"ignorable":true}`, lStepStart(2)),
			check: func(t *testing.T, evs []Event, st Stats) {
				if len(evs) != 3 || evs[1].Known || !evs[1].Ignorable || !evs[0].Known || !evs[2].Known {
					t.Fatalf("events %+v", evs)
				}
				if string(evs[1].Data) != `{"k":[1]}` {
					t.Errorf("opaque data = %s", evs[1].Data)
				}
				var h History
				for i := range evs {
					if err := h.Apply(&evs[i]); err != nil {
						t.Fatal(err)
					}
				}
				if len(h.Messages()) != 0 {
					t.Errorf("an ignorable event changed the history")
				}
			}},
		{name: "surface type without surfaceOp", data: lines(hdrV4, fmt.Sprintf(`{"type":"user/message","seq":0,"time":3,"data":%s}`, userMsg("u1", "x"))),
			kind: corrupt, msg: []string{"surface event user/message at seq 0 has no surfaceOp"}, pos: []string{"line 2"}},
		{name: "log-only type with surfaceOp", data: lines(hdrV4, `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"surfaceOp":"append"}`),
			kind: corrupt, msg: []string{"log-only event turn/start at seq 0 may not carry surfaceOp"}, pos: []string{colOf(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"surfaceOp"`, 2, `"surfaceOp"`)}},
		{name: "log-only type with sourceEventSeqs", data: lines(hdrV4, lTurnStart(0), `{"type":"turn/end","seq":1,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}},"sourceEventSeqs":[0]}`),
			kind: corrupt, nEvents: 1, msg: []string{"turn/end event at seq 1 may not carry sourceEventSeqs"}, pos: []string{"line 3"}},
		{name: "assistant message with sourceEventSeqs",
			data: lines(hdrV4, lUser(0, "u1"), fmt.Sprintf(`{"type":"assistant/message","seq":1,"time":4,"data":%s,"sourceEventSeqs":[0],"surfaceOp":"append"}`, assistantData("a1", "x"))),
			kind: corrupt, nEvents: 1, msg: []string{"assistant/message event at seq 1 may not carry sourceEventSeqs"}, pos: []string{"line 3"}},
		{name: "sourceEventSeqs range expanded",
			data: lines(hdrV4, lTurnStart(0), lStepStart(1), lUser(2, "u1"),
				fmt.Sprintf(`{"type":"tool/result","seq":3,"time":5,"data":%s,"sourceEventSeqs":[[0,2]],"surfaceOp":"append"}`, toolResultData("r1", "c1", "ok")),
				fmt.Sprintf(`{"type":"tool/result","seq":4,"time":5,"data":%s,"sourceEventSeqs":[0,[1,3]],"surfaceOp":"append"}`, toolResultData("r2", "c2", "ok"))),
			check: func(t *testing.T, evs []Event, st Stats) {
				if len(evs) != 5 {
					t.Fatalf("%d events", len(evs))
				}
				if got := fmt.Sprint(evs[3].SourceEventSeqs); got != "[0 1 2]" {
					t.Errorf("[[0,2]] expanded to %s", got)
				}
				if got := fmt.Sprint(evs[4].SourceEventSeqs); got != "[0 1 2 3]" {
					t.Errorf("[0,[1,3]] expanded to %s", got)
				}
				// Re-encoding writes the range form again.
				c := evs[3].Clone()
				c.Raw = nil
				if !bytes.Contains(c.AppendJSON(nil), []byte(`"sourceEventSeqs":[[0,2]]`)) {
					t.Errorf("re-encoded: %s", c.AppendJSON(nil))
				}
			}},
		{name: "sourceEventSeqs range not earlier",
			data: lines(hdrV4, lTurnStart(0), lStepStart(1), lUser(2, "u1"),
				fmt.Sprintf(`{"type":"tool/result","seq":3,"time":5,"data":%s,"sourceEventSeqs":[[0,3]],"surfaceOp":"append"}`, toolResultData("r1", "c1", "ok"))),
			kind: corrupt, nEvents: 3, msg: []string{"range [0,3] must satisfy start <= end < 3"}, pos: []string{"line 5"}},
		{name: "sourceEventSeqs not increasing with a range",
			data: lines(hdrV4, lTurnStart(0), lStepStart(1), lUser(2, "u1"),
				fmt.Sprintf(`{"type":"tool/result","seq":3,"time":5,"data":%s,"sourceEventSeqs":[2,[0,1]],"surfaceOp":"append"}`, toolResultData("r1", "c1", "ok"))),
			kind: corrupt, nEvents: 3, msg: []string{"strictly increasing"}, pos: []string{"line 5"}},
		{name: "sourceEventSeqs cites a seq twice",
			data: lines(hdrV4, lTurnStart(0), lStepStart(1), lUser(2, "u1"),
				fmt.Sprintf(`{"type":"tool/result","seq":3,"time":5,"data":%s,"sourceEventSeqs":[2,1,2],"surfaceOp":"append"}`, toolResultData("r1", "c1", "ok"))),
			kind: corrupt, nEvents: 3, msg: []string{"seq 2 is cited twice"}, pos: []string{"line 5"}},
		{name: "surfaceOp replace with extra key", data: lines(hdrV4, lUser(0, "u1"), userLine(1, `{"op":"replace","startSeq":0,"endSeq":0,"why":1}`)),
			kind: corrupt, nEvents: 1, msg: []string{`surfaceOp of user/message at seq 1 must be "append" or {"op":"replace"`}, pos: []string{"line 3"}},
		{name: "surfaceOp replace with old start/end names", data: lines(hdrV4, lUser(0, "u1"), userLine(1, `{"op":"replace","start":0,"end":0}`)),
			kind: corrupt, nEvents: 1, msg: []string{`surfaceOp of user/message at seq 1 must be`}, pos: []string{"line 3"}},
		{name: "surfaceOp replace of a later span", data: lines(hdrV4, lUser(0, "u1"), userLine(1, `{"op":"replace","startSeq":0,"endSeq":1}`)),
			kind: corrupt, nEvents: 1, msg: []string{"replaces 0..1, which is not an earlier span"}, pos: []string{"line 3"}},
		{name: "surfaceOp unknown string", data: lines(hdrV4, userLine(0, `"prepend"`)),
			kind: corrupt, msg: []string{"surfaceOp of user/message at seq 0 must be"}, pos: []string{"line 2"}},
		{name: "duplicate envelope key", data: lines(hdrV4, `{"type":"turn/start","seq":0,"seq":0,"time":1,"data":{"turn":1}}`),
			kind: corrupt, msg: []string{`duplicate member "seq"`}, pos: []string{colOf(`{"type":"turn/start","seq":0,`, 2, "")}},
		{name: "extra envelope key", data: lines(hdrV4, `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"meta":{}}`),
			kind: corrupt, msg: []string{`turn/start event has unexpected member "meta"`}, pos: []string{colOf(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"meta"`, 2, `"meta"`)}},
		{name: "missing data", data: lines(hdrV4, `{"type":"turn/start","seq":0,"time":1}`),
			kind: corrupt, msg: []string{`turn/start event at seq 0 has no "data"`}, pos: []string{"line 2"}},
		{name: "line over MaxLineBytes", opts: ReaderOptions{MaxLineBytes: 1 << 20},
			data: lines(hdrV4, lTurnStart(0), `{"type":"turn/start","seq":1,"time":1,"data":{"pad":"`+strings.Repeat("x", 2<<20)+`"}}`, lStepStart(2)),
			kind: corrupt, nEvents: 1, msg: []string{"line is longer than the limit of 1048576 bytes"}, pos: []string{"line 3", fmt.Sprintf("byte %d", len(hdrV4)+1+len(lTurnStart(0))+1)}},

		// Compressed logs.
		{name: "zstd valid", file: "s1.v4.jsonl.zst", data: func(testing.TB) []byte { return twoBatches() },
			check: func(t *testing.T, evs []Event, st Stats) {
				if len(evs) != 4 || st.Frames != 3 || st.TornTail || st.FramesWithoutChecksum != 0 {
					t.Fatalf("%d events, stats %+v", len(evs), st)
				}
			}},
		{name: "zstd skippable frame before the header", file: "s1.v4.jsonl.zst",
			data:   func(testing.TB) []byte { return append(bytes.Clone(skippable), twoBatches()...) },
			kind:   corrupt,
			atOpen: true, msg: []string{"skippable frame (magic 0x184D2A50)"}, pos: []string{"frame 1 at file byte 0"}},
		{name: "zstd skippable frame between frames", file: "s1.v4.jsonl.zst",
			data: func(t testing.TB) []byte {
				b := twoBatches()
				offs := frameOffsets(b)
				return append(append(bytes.Clone(b[:offs[2]]), skippable...), b[offs[2]:]...)
			},
			kind: corrupt, nEvents: 2, msg: []string{"skippable frame"},
			pos: []string{"frame 3 at file byte " + fmt.Sprint(frameOffsets(twoBatches())[2])}},
		{name: "zstd garbage after valid frames", file: "s1.v4.jsonl.zst",
			data: func(testing.TB) []byte { return append(twoBatches(), "garbage!\n"...) },
			kind: corrupt, nEvents: 4, msg: []string{"invalid frame magic"}, pos: []string{"frame 4 at file byte " + fmt.Sprint(len(twoBatches()))}},
		{name: "zstd three garbage bytes after valid frames", file: "s1.v4.jsonl.zst",
			data: func(testing.TB) []byte { return append(twoBatches(), "xyz"...) },
			kind: corrupt, nEvents: 4, msg: []string{"invalid frame magic"}, pos: []string{"frame 4 at file byte " + fmt.Sprint(len(twoBatches()))}},
		{name: "zstd torn inside the magic of a new frame", file: "s1.v4.jsonl.zst",
			data: func(testing.TB) []byte { return append(twoBatches(), 0x28, 0xB5, 0x2F) },
			check: func(t *testing.T, evs []Event, st Stats) {
				if len(evs) != 4 || !st.TornTail || st.TornBytes != 3 || st.CommittedBytes != int64(len(twoBatches())) {
					t.Fatalf("%d events, stats %+v", len(evs), st)
				}
			}},
		{name: "zstd flipped byte in compressed data", file: "s1.v4.jsonl.zst",
			data: func(t testing.TB) []byte {
				b := twoBatches()
				offs := frameOffsets(b)
				fr := scanFrame(t, b[offs[2]:])
				payload := offs[2] + fr.hdrEnd + 3
				b[payload+(fr.blocksEnd-fr.hdrEnd-3)/2] ^= 0x5A
				return b
			},
			kind: corrupt, nEvents: 2, msg: []string{"frame failed validation"},
			pos: []string{"frame 3 at file byte " + fmt.Sprint(frameOffsets(twoBatches())[2])}},
		{name: "zstd flipped checksum byte", file: "s1.v4.jsonl.zst",
			data: func(t testing.TB) []byte {
				b := twoBatches()
				b[len(b)-2] ^= 0x01
				return b
			},
			kind: corrupt, nEvents: 2, msg: []string{"frame failed validation", "checksum"},
			pos: []string{"frame 3 at file byte " + fmt.Sprint(frameOffsets(twoBatches())[2])}},
		{name: "zstd flipped checksum byte of the header frame", file: "s1.v4.jsonl.zst",
			data: func(t testing.TB) []byte {
				b := twoBatches()
				offs := frameOffsets(b)
				b[offs[1]-1] ^= 0x80
				return b
			},
			kind: corrupt, atOpen: true, msg: []string{"frame failed validation"}, pos: []string{"frame 1 at file byte 0"}},
		{name: "zstd torn final frame", file: "s1.v4.jsonl.zst",
			data: func(t testing.TB) []byte {
				b := twoBatches()
				offs := frameOffsets(b)
				fr := scanFrame(t, b[offs[2]:])
				return b[:offs[2]+fr.hdrEnd+3+5] // inside the only block
			},
			check: func(t *testing.T, evs []Event, st Stats) {
				committed := frameOffsets(twoBatches())[2]
				if len(evs) != 2 || !st.TornTail || st.CommittedBytes != committed || st.RecoveredLines != 0 {
					t.Fatalf("%d events, stats %+v", len(evs), st)
				}
			}},
		{name: "zstd torn in the final frame's checksum", file: "s1.v4.jsonl.zst",
			data: func(t testing.TB) []byte { b := twoBatches(); return b[:len(b)-3] },
			check: func(t *testing.T, evs []Event, st Stats) {
				if len(evs) != 4 || !st.TornTail || st.RecoveredLines != 2 {
					t.Fatalf("%d events, stats %+v", len(evs), st)
				}
			}},
		// Framings the zstd tool writes are read: the plain text is the
		// log; the framing is noted (inspect --validate warns).
		{name: "zstd header frame holds header and an event", file: "s1.v4.jsonl.zst",
			data: func(testing.TB) []byte {
				return append(zframe(string(plainLog(hdrV4, lTurnStart(0)))), zframe(string(plainLog(lStepStart(1))))...)
			},
			check: func(t *testing.T, evs []Event, st Stats) {
				if len(evs) != 2 || st.TornTail || st.Framing.Canonical() || st.Framing.First != "frame 1 holds more than the header line" {
					t.Fatalf("%d events, stats %+v", len(evs), st)
				}
			}},
		{name: "zstd empty first frame", file: "s1.v4.jsonl.zst",
			data: func(testing.TB) []byte {
				return append(zframe(""), zlog([]string{lTurnStart(0)})...)
			},
			check: func(t *testing.T, evs []Event, st Stats) {
				if len(evs) != 1 || st.Framing.Departures != 1 || !strings.Contains(st.Framing.First, "the header line ends in frame 2") {
					t.Fatalf("%d events, stats %+v", len(evs), st)
				}
			}},
		{name: "zstd complete frame ends mid-line", file: "s1.v4.jsonl.zst",
			data: func(testing.TB) []byte {
				body := string(plainLog(lTurnStart(0), lStepStart(1)))
				return append(zlog(), append(zframe(body[:len(body)-10]), zframe(body[len(body)-10:])...)...)
			},
			check: func(t *testing.T, evs []Event, st Stats) {
				if len(evs) != 2 || st.TornTail || !strings.Contains(st.Framing.First, "frame 2 at file byte") || !strings.Contains(st.Framing.First, "ends inside line 3") {
					t.Fatalf("%d events, stats %+v", len(evs), st)
				}
			}},
		{name: "zstd last complete frame ends mid-line", file: "s1.v4.jsonl.zst",
			data: func(testing.TB) []byte {
				body := string(plainLog(lTurnStart(0), lStepStart(1)))
				return append(zlog(), zframe(body[:len(body)-10])...)
			},
			check: func(t *testing.T, evs []Event, st Stats) {
				// The line the frame cut is a torn tail; a writer cuts at
				// the frame's start and rewrites the line before it.
				hdr := int64(len(zlog()))
				if len(evs) != 1 || !st.TornTail || st.CommittedBytes != hdr || st.RecoveredLines != 1 {
					t.Fatalf("%d events, stats %+v", len(evs), st)
				}
			}},
		{name: "zstd reserved block type", file: "s1.v4.jsonl.zst",
			data: func(t testing.TB) []byte {
				b := twoBatches()
				offs := frameOffsets(b)
				fr := scanFrame(t, b[offs[1]:offs[2]])
				b[offs[1]+fr.hdrEnd] |= 0x06
				return b
			},
			kind: corrupt, msg: []string{"reserved block type"}, pos: []string{"frame 2 at file byte"}},
		{name: "zstd reserved frame-header bit", file: "s1.v4.jsonl.zst",
			data: func(t testing.TB) []byte {
				b := twoBatches()
				offs := frameOffsets(b)
				b[offs[1]+4] |= 0x08
				return b
			},
			kind: corrupt, msg: []string{"reserved frame-header bit"}, pos: []string{"frame 2 at file byte"}},
		{name: "zstd first frame torn", file: "s1.v4.jsonl.zst",
			data: func(testing.TB) []byte { f := zframe(hdrV4 + "\n"); return f[:len(f)/2] },
			kind: corrupt, atOpen: true, msg: []string{"empty or header-less log"}, pos: []string{"byte 0"}},
		{name: "zstd name but plain content", file: "s1.v4.jsonl.zst", data: lines(hdrV4, lTurnStart(0)),
			kind: corrupt, atOpen: true, msg: []string{"invalid frame magic"}, pos: []string{"frame 1 at file byte 0"}},
		{name: "zstd bad event line", file: "s1.v4.jsonl.zst",
			data: func(testing.TB) []byte { return zlog([]string{lTurnStart(0)}, []string{lStepStart(1), lTurnStart(5)}) },
			kind: corrupt, nEvents: 2, msg: []string{"expected 2, got 5"}, pos: []string{"line 4", "frame 3 at file byte", "plain byte"}},
	}
}

// readLogStrict opens path and reads it to the end or the first error.
func readLogStrict(path string, opts ReaderOptions) (evs []Event, st Stats, openErr, err error) {
	r, err := Open(path, opts)
	if err != nil {
		return nil, Stats{}, err, err
	}
	defer r.Close()
	evs, st, err = drain(r)
	return evs, st, nil, err
}

func TestHostileInput(t *testing.T) {
	for _, tc := range hostileCases() {
		t.Run(tc.name, func(t *testing.T) {
			runHostile(t, tc)
		})
	}
}

func runHostile(t *testing.T, tc hostileCase) {
	t.Helper()
	name := tc.file
	if name == "" {
		name = "s1.v4.jsonl"
	}
	path := filepath.Join(t.TempDir(), name)
	data := tc.data(t)
	if err := os.WriteFile(path, data, 0o400); err != nil {
		t.Fatal(err)
	}
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(path, mtime, mtime); err != nil {
		t.Fatal(err)
	}
	evs, st, openErr, err := readLogStrict(path, tc.opts)

	after, rerr := os.ReadFile(path)
	if rerr != nil {
		t.Fatal(rerr)
	}
	if !bytes.Equal(after, data) {
		t.Errorf("reading changed the file")
	}
	if fi, err := os.Stat(path); err != nil || !fi.ModTime().Equal(mtime) || fi.Mode().Perm() != 0o400 {
		t.Errorf("reading changed the file's metadata: %v %v", fi.ModTime(), err)
	}

	if tc.check != nil {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		tc.check(t, evs, st)
		return
	}
	if err == nil {
		t.Fatalf("accepted (%d events, stats %+v), want an error with %q", len(evs), st, tc.msg)
	}
	if tc.atOpen != (openErr != nil) {
		t.Errorf("error from Open = %v, want from Open %v", openErr != nil, tc.atOpen)
	}
	if len(evs) != tc.nEvents {
		t.Errorf("%d events before the error, want %d", len(evs), tc.nEvents)
	}
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("error %T %v is not a *FormatError", err, err)
	}
	if !errors.Is(err, tc.kind) {
		t.Errorf("error %v does not wrap %v", err, tc.kind)
	}
	other := ErrUnsupported
	if tc.kind == ErrUnsupported {
		other = ErrCorrupt
	}
	if errors.Is(err, other) {
		t.Errorf("error %v wraps %v too", err, other)
	}
	text := err.Error()
	if !strings.HasPrefix(text, path+": ") {
		t.Errorf("error %q does not start with the path", text)
	}
	for _, s := range tc.msg {
		if !strings.Contains(text, s) {
			t.Errorf("error %q does not say %q", text, s)
		}
	}
	for _, s := range tc.pos {
		if !strings.Contains(text, s) {
			t.Errorf("error %q does not name position %q", text, s)
		}
	}
	if fe.Pos.Line == 0 && fe.Pos.Frame == 0 && !strings.Contains(text, "byte 0") {
		t.Errorf("error %q names no position", text)
	}
}

// TestHugeLineDefaultLimit writes a real 100 MB line: the default limit of
// 64 MiB refuses it with the over-long-line error.
func TestHugeLineDefaultLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 100 MB file")
	}
	path := filepath.Join(t.TempDir(), "s1.v4.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	prefix := plainLog(hdrV4, lTurnStart(0))
	f.Write(prefix)
	f.WriteString(`{"type":"turn/start","seq":1,"time":1,"data":{"pad":"`)
	chunk := bytes.Repeat([]byte("abcdefgh"), 1<<17) // 1 MiB
	for range 100 {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	f.WriteString("\"}}\n" + lStepStart(2) + "\n")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	evs, _, _, err := readLogStrict(path, ReaderOptions{})
	var fe *FormatError
	if !errors.As(err, &fe) || !errors.Is(err, ErrCorrupt) || len(evs) != 1 {
		t.Fatalf("%d events, err %v", len(evs), err)
	}
	want := fmt.Sprintf("%s: line 3, byte %d: line is longer than the limit of %d bytes", path, len(prefix), DefaultMaxLineBytes)
	if err.Error() != want {
		t.Errorf("error %q\nwant  %q", err, want)
	}
}

// TestOnProblemReportsEveryRow: with OnProblem set, each bad row is
// reported with its line, and reading goes on; but a line over the limit
// in a compressed log ends the read there (the rest is not decoded), as the
// error of Next.
func TestOnProblemReportsEveryRow(t *testing.T) {
	for _, comp := range []Compression{Plain, Zstd} {
		t.Run(comp.String(), func(t *testing.T) {
			rows := []string{
				lTurnStart(0),
				lStepStart(1),
				`{"type":"user/message","seq":2,"time":3,`, // line 4: not JSON
				lUser(3, "u1"),
				`{"type":"step/end","seq":4,"time":1.5,"data":{"turn":1,"step":1}}`, // line 6: bad time
				lAssistant(5, "a1", "hi"),
				`{"type":"turn/end","seq":6,"time":7,"data":{},"ignorable":false}`, // line 8
				lTurnStart(7),
				strings.Repeat(" ", 300), // line 10: over the limit
				lStepStart(9),
			}
			var data []byte
			name := "s1.v4.jsonl"
			if comp == Zstd {
				name += ".zst"
				data = zlog(rows[:4], rows[4:])
			} else {
				data = plainLog(append([]string{hdrV4}, rows...)...)
			}
			path := filepath.Join(t.TempDir(), name)
			if err := os.WriteFile(path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			var probs []*FormatError
			evs, st, _, err := readLogStrict(path, ReaderOptions{MaxLineBytes: 256, OnProblem: func(fe *FormatError) { probs = append(probs, fe) }})
			wantSeqs := "[0 1 3 5 7 9]"
			if comp == Zstd {
				var fe *FormatError
				if !errors.As(err, &fe) {
					t.Fatal(err)
				}
				probs = append(probs, fe)
				wantSeqs = "[0 1 3 5 7]"
				if !strings.Contains(fe.Msg, "not decoded past it") {
					t.Errorf("over-long line: %v", fe)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			var seqs []int64
			for _, e := range evs {
				seqs = append(seqs, e.Seq)
			}
			if fmt.Sprint(seqs) != wantSeqs {
				t.Errorf("read seqs %v", seqs)
			}
			wantLines := []int64{4, 6, 8, 10}
			wantMsg := []string{"event is not valid JSON", "time must be a safe integer", "ignorable must be exactly true", "line is longer than the limit"}
			if len(probs) != len(wantLines) {
				t.Fatalf("%d problems: %v", len(probs), probs)
			}
			for i, p := range probs {
				if p.Pos.Line != wantLines[i] || !strings.Contains(p.Error(), wantMsg[i]) ||
					!strings.Contains(p.Error(), fmt.Sprintf("%s: line %d", path, wantLines[i])) || !errors.Is(p, ErrCorrupt) {
					t.Errorf("problem %d = %v, want line %d %q", i, p, wantLines[i], wantMsg[i])
				}
			}
			if comp == Plain && (st.Events != 6 || st.Lines != 11) {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestSourceSeqsExpansionBounded: the range form of sourceEventSeqs cannot
// make a short line expand into an unbounded list: ranges that would
// expand to 200 Mi seqs are refused as the list is read. (What the read
// allocates is not asserted: memory is measured in benchmarks, not
// asserted in tests.)
func TestSourceSeqsExpansionBounded(t *testing.T) {
	const big = rawjson.MaxSafeInt - 1
	ranges := make([]string, 0, 200)
	for i := range 200 {
		ranges = append(ranges, fmt.Sprintf("[%d,%d]", int64(i)<<20, int64(i)<<20+(1<<20)-1))
	}
	repeated := strings.Repeat("[0,1048575],", 199) + "[0,1048575]"
	for _, tc := range []struct{ name, seqs, msg string }{
		{"increasing ranges", strings.Join(ranges, ","), "implausibly many"},
		{"repeated range", repeated, "strictly increasing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A bad row with a far seq moves the reader's expectation there
			// when OnProblem is set.
			data := plainLog(hdrV4,
				fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":1,"data":{"turn":1}}`, int64(big)),
				fmt.Sprintf(`{"type":"tool/result","seq":%d,"time":5,"data":%s,"sourceEventSeqs":[%s],"surfaceOp":"append"}`, int64(big)+1, toolResultData("r1", "c1", "ok"), tc.seqs))
			path := filepath.Join(t.TempDir(), "s1.v4.jsonl")
			os.WriteFile(path, data, 0o600)
			var probs []string
			evs, _, _, err := readLogStrict(path, ReaderOptions{OnProblem: func(fe *FormatError) { probs = append(probs, fe.Error()) }})
			if err != nil || len(evs) != 0 || len(probs) != 2 || !strings.Contains(probs[1], tc.msg) {
				t.Fatalf("events %d, err %v, problems %q", len(evs), err, probs)
			}
		})
	}
}

// TestOnProblemSeqGoesBack: after a damaged row, a row whose seq repeats
// or goes back is a problem of its own, and the next good row goes on.
func TestOnProblemSeqGoesBack(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s1.v4.jsonl")
	os.WriteFile(path, plainLog(hdrV4, lTurnStart(0), lStepStart(1), `{"type":"step/end",`, lStepStart(1), lTurnStart(2), lStepStart(4)), 0o600)
	var probs []*FormatError
	evs, _, _, err := readLogStrict(path, ReaderOptions{OnProblem: func(fe *FormatError) { probs = append(probs, fe) }})
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	for _, e := range evs {
		seqs = append(seqs, e.Seq)
	}
	if fmt.Sprint(seqs) != "[0 1 2]" || len(probs) != 3 {
		t.Fatalf("seqs %v, problems %v", seqs, probs)
	}
	for i, want := range []struct {
		line int64
		msg  string
	}{{4, "not valid JSON"}, {5, "seq 1 repeats or goes back"}, {7, "expected 3, got 4"}} {
		if probs[i].Pos.Line != want.line || !strings.Contains(probs[i].Msg, want.msg) {
			t.Errorf("problem %d = %v, want line %d %q", i, probs[i], want.line, want.msg)
		}
	}
}
