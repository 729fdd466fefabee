package convlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ev is an event of a test log: its type and data; surface types get an
// append surfaceOp.
func ev(typ, data string) Event {
	e := Event{Type: typ, Time: 1, Data: []byte(data)}
	if IsSurface(typ) {
		e.SurfaceOp = &SurfaceOp{}
	}
	return e
}

func answerWithCall(turn, step int64, id, call string) Event {
	return ev(TypeAssistantMessage, fmt.Sprintf(`{"turn":%d,"step":%d,"message":{"role":"assistant","content":[{"type":"reasoning","text":"look"},{"type":"tool-call","id":%q,"name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"},"id":%q},"stream":[]}`, turn, step, call, id))
}

func toolResult(turn, step int64, id, call string) Event {
	return ev(TypeToolResult, fmt.Sprintf(`{"turn":%d,"step":%d,"message":{"role":"tool","source":{"kind":"tool","callId":%q},"toolCallId":%q,"content":[{"type":"text","text":"ok"}],"isError":false,"id":%q}}`, turn, step, call, call, id))
}

// ruleProblems writes evs (seqs assigned) into a log of header h without
// checks, reads it back and returns the validator's problems by seq, and
// Finish's as seq -1.
func ruleProblems(t *testing.T, h *Header, evs []Event) map[int64]error {
	t.Helper()
	lines := make([][]byte, len(evs))
	for i := range evs {
		evs[i].Seq = int64(i)
		lines[i] = evs[i].AppendJSON(nil)
	}
	path := filepath.Join(t.TempDir(), FileName("s", h.Version, Plain))
	writeHistorical(t, path, h, lines, Plain)
	r, err := Open(path, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	v := NewValidator(r.Header())
	got := map[int64]error{}
	for e, err := range r.Events() {
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Check(e); err != nil {
			got[e.Seq] = r.RuleProblem(err)
		}
	}
	if err := v.Finish(); err != nil {
		got[-1] = err
	}
	return got
}

func TestValidatorTurnPath(t *testing.T) {
	ts := `{"turn":1,"step":1}`
	start, end := ev("turn/start", `{"turn":1}`), ev(TypeTurnEnd, `{"turn":1,"reason":{"kind":"completed"}}`)
	sstart, send := ev("step/start", ts), ev("step/end", ts)
	req := ev("request/header", `{"header":{"config":{"provider":"p","model":"m"}},"reason":"initial"}`)
	user := ev(TypeUserMessage, string(userMsg("u1", "hi")))
	for _, c := range []struct {
		name string
		evs  []Event
		seq  int64  // the event refused (-2: none)
		want string // in its message
		kind error
	}{
		{"a whole turn", []Event{start, sstart, user, req, answerWithCall(1, 1, "a1", "c1"), ev("tool/call", `{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{}"}`),
			toolResult(1, 1, "r1", "c1"), send, end}, -2, "", nil},
		{"a turn left open is not a problem", []Event{start, sstart, user}, -2, "", nil},
		{"step outside a turn", []Event{sstart}, 0, "step/start outside a turn", ErrTurnPath},
		{"request outside a step", []Event{start, req}, 1, "outside a step (turn 1 has no open step): a request belongs to a step", ErrTurnPath},
		{"answer outside a step", []Event{start, sstart, send, answerWithCall(1, 1, "a1", "c1")}, 3, "outside a step", ErrTurnPath},
		{"tool call outside a step", []Event{ev("tool/call", `{"turn":1,"step":1,"callId":"c1","name":"x","arguments":""}`)}, 0, "outside a step (no turn is open): a tool call belongs to a step", ErrTurnPath},
		{"a tool result without its call", []Event{start, sstart, toolResult(1, 1, "r1", "c9")}, 2, `tool result for call "c9", which no answer or tool/call of turn 1 made`, ErrTurnPath},
		{"a second result", []Event{start, sstart, answerWithCall(1, 1, "a1", "c1"), toolResult(1, 1, "r1", "c1"), toolResult(1, 1, "r2", "c1")}, 4, `tool call "c1" already has its result`, ErrTurnPath},
		{"a turn ending with an open step", []Event{start, sstart, end}, 2, "turn 1 ends while its step 1 is still open", ErrTurnPath},
		{"a second turn before the first ended", []Event{start, sstart, send, ev("turn/start", `{"turn":2}`)}, 3, "turn 2 starts while turn 1 is still open", ErrTurnPath},
		{"turn numbers go forward", []Event{start, end, ev("turn/start", `{"turn":1}`)}, 2, "turn/start opens turn 1, but turn 1 was already started", ErrTurnPath},
		{"turn/end without its start", []Event{end}, 0, "turn/end of turn 1 without its turn/start", ErrTurnPath},
		{"a step of another turn", []Event{start, ev("step/start", `{"turn":2,"step":1}`)}, 1, "step/start names turn 2, but turn 1 is open", ErrTurnPath},
		{"an answer naming another step", []Event{start, sstart, answerWithCall(1, 2, "a1", "c1")}, 2, "names step 2 of turn 1, but step 1 of turn 1 is open", ErrTurnPath},
		{"an unknown end reason", []Event{start, ev(TypeTurnEnd, `{"turn":1,"reason":{"kind":"bored"}}`)}, 1, `data.reason.kind: must be one of "completed"`, ErrPayload},
		{"a message without identity or source", []Event{ev(TypeUserMessage, `{"role":"user","content":[]}`)}, 0, "stored message has no id and no source", ErrMessageIdentity},
		{"a plugin source kind", []Event{ev(TypeUserMessage, `{"role":"user","content":[],"source":{"kind":"plugin","plugin":"x"},"id":"u"}`)}, 0, "producer-owned source kind", ErrMessageIdentity},
		{"a tool result naming another call than its source", []Event{start, sstart, answerWithCall(1, 1, "a1", "c1"),
			ev(TypeToolResult, `{"turn":1,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"c1"},"toolCallId":"c2","content":[],"id":"r"}}`)}, 3, "needs a toolCallId equal to its source's callId", ErrMessageIdentity},
		{"a replacement of nothing", []Event{user, {Type: TypeUserMessage, Time: 1, Data: userMsg("k", "sum"), SurfaceOp: &SurfaceOp{Replace: true, StartSeq: 0, EndSeq: 0}, SourceEventSeqs: []int64{0}},
			{Type: TypeUserMessage, Time: 1, Data: userMsg("k2", "sum"), SurfaceOp: &SurfaceOp{Replace: true, StartSeq: 0, EndSeq: 0}, SourceEventSeqs: []int64{0}}}, 2, "not a span of the current history", ErrHistory},
		{"a message rewritten in place keeps its id", []Event{user, {Type: TypeUserMessage, Time: 1, Data: userMsg("u1", "edited"),
			SurfaceOp: &SurfaceOp{Replace: true, StartSeq: 0, EndSeq: 0}, SourceEventSeqs: []int64{0}}}, -2, "", nil},
		{"a replacement taking the id of a message it does not replace", []Event{user, ev(TypeUserMessage, string(userMsg("u2", "more"))),
			{Type: TypeUserMessage, Time: 1, Data: userMsg("u1", "edited"), SurfaceOp: &SurfaceOp{Replace: true, StartSeq: 1, EndSeq: 1}, SourceEventSeqs: []int64{1}}},
			2, `message id "u1" is already the id of the message at seq 0`, ErrMessageIdentity},
		{"an inherited marker in an unseeded log", []Event{ev("session/end-seed", `{"inherited":true}`)}, 0, "header is not seeded", ErrHistory},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := ruleProblems(t, testHeader("s"), c.evs)
			if c.seq == -2 {
				if len(got) > 0 {
					t.Fatalf("problems %v", got)
				}
				return
			}
			err := got[c.seq]
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, c.kind) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("problem at seq %d = %v, want %q (%v); all %v", c.seq, err, c.want, c.kind, got)
			}
			var fe *FormatError
			if !errors.As(err, &fe) || fe.Pos.Line != c.seq+2 || fe.Pos.Offset <= 0 {
				t.Fatalf("position of %v: %+v", err, fe)
			}
			if len(got) != 1 {
				t.Errorf("one misplaced event, problems %v", got)
			}
		})
	}
}

// TestValidatorOlderVersions: an older log gets the upgrade's repair (a
// restart after a next-turn splice closes the open turn) and only the
// turn's path; version 4 never runs the repair.
func TestValidatorOlderVersions(t *testing.T) {
	restart := func() []Event {
		return []Event{ev("turn/start", `{"turn":1}`), ev("step/start", `{"turn":1,"step":1}`), ev("step/end", `{"turn":1,"step":1}`),
			ev("agent/inbox/spliced", `{"target":"next-turn","inserted":[{"role":"user","content":[],"source":{"kind":"user"},"id":"q"}]}`),
			ev("turn/start", `{"turn":2}`)}
	}
	h3 := testHeader("s")
	h3.Version = 3
	if got := ruleProblems(t, h3, restart()); len(got) != 0 {
		t.Fatalf("v3 restart: %v", got)
	}
	if got := ruleProblems(t, testHeader("s"), restart()); got[4] == nil || !strings.Contains(got[4].Error(), "turn 2 starts while turn 1 is still open") {
		t.Fatalf("v4 restart: %v", got)
	}
	// Without the splice a v3 restart is refused too.
	evs := restart()
	evs[3] = ev("session/title", `{"title":"x"}`)
	if got := ruleProblems(t, h3, evs); got[4] == nil {
		t.Fatalf("v3 restart without a splice: %v", got)
	}
	// v3 messages keep their v3 shape (plugin sources, no ids): not checked.
	if got := ruleProblems(t, h3, []Event{ev(TypeUserMessage, `{"role":"user","content":[],"source":{"kind":"plugin","plugin":"p"}}`)}); len(got) != 0 {
		t.Fatalf("v3 message: %v", got)
	}
	// v0: the seed (seedLength events) is exempt.
	h0 := testHeader("s")
	h0.Version = 0
	n := int64(1)
	h0.SeedLength = &n
	if got := ruleProblems(t, h0, []Event{ev("step/start", `{"turn":1,"step":1}`), ev("step/start", `{"turn":1,"step":1}`)}); got[1] == nil || got[0] != nil {
		t.Fatalf("v0 seed: %v", got)
	}
}

// TestValidatorSeed: inherited history (before the inherited marker) is the
// source's, exempt from the path; turn numbers start afresh after it; a
// seeded log must have its marker.
func TestValidatorSeed(t *testing.T) {
	h := testHeader("s")
	h.IsSeeded = true
	evs := []Event{ev(TypeUserMessage, string(userMsg("u", "hi"))), answerWithCall(3, 2, "a", "c1"), toolResult(3, 2, "r", "c1"),
		ev("session/end-seed", `{"inherited":true}`), ev("turn/start", `{"turn":1}`)}
	if got := ruleProblems(t, h, evs); len(got) != 0 {
		t.Fatalf("seeded log: %v", got)
	}
	got := ruleProblems(t, h, evs[:3])
	if got[-1] == nil || !strings.Contains(got[-1].Error(), "no inherited session/end-seed marker") || !errors.Is(got[-1], ErrHistory) {
		t.Fatalf("seeded log without its marker: %v", got)
	}
}

// TestWriterRefusesBrokenRules: the writer refuses a batch that breaks a
// rule with a typed error before anything is written, and its state stays
// as it was.
func TestWriterRefusesBrokenRules(t *testing.T) {
	for _, comp := range []Compression{Plain, Zstd} {
		t.Run(comp.String(), func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, FileName("s1", 4, comp))
			w, err := Create(path, testHeader("s1"), sampleTurn(1)[:2], WriterOptions{Compression: comp})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			before := mustRead(t, path)
			for _, c := range []struct {
				batch []Event
				kind  error
				want  string
			}{
				{[]Event{ev(TypeUserMessage, `{"role":"user","content":[{"type":"text","text":"hi"}]}`)}, ErrMessageIdentity, "stored message has no id and no source"},
				{[]Event{ev(TypeUserMessage, string(userMsg("u", "fine"))), ev("turn/start", `{"turn":2}`)}, ErrTurnPath, "turn 2 starts while turn 1 is still open"},
				{[]Event{ev("step/end", `{"turn":1,"step":1}`), ev(TypeTurnEnd, `{"turn":1,"reason":{"kind":"completed"}}`), ev("step/start", `{"turn":1,"step":2}`)}, ErrTurnPath, "step/start outside a turn"},
				{[]Event{toolResult(1, 1, "r", "nope")}, ErrTurnPath, "which no answer or tool/call"},
			} {
				err := w.Append(c.batch)
				var re *RuleError
				if !errors.As(err, &re) || !errors.Is(err, c.kind) || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), path+": ") {
					t.Fatalf("Append = %v, want a *RuleError %v mentioning %q", err, c.kind, c.want)
				}
				if got := mustRead(t, path); string(got) != string(before) {
					t.Fatal("a refused batch changed the file")
				}
			}
			// The state is what was written: the turn goes on.
			if err := w.Append(sampleTurn(1)[2:]); err != nil {
				t.Fatal(err)
			}
			if ts := w.Turn(); ts.Open {
				t.Fatalf("turn state after its end: %+v", ts)
			}
			w.Close()
			// A log written by another build with a broken rule cannot be
			// appended to.
			bad := filepath.Join(dir, FileName("s2", 4, comp))
			lines := [][]byte{[]byte(`{"type":"step/start","seq":0,"time":1,"data":{"turn":1,"step":1}}`)}
			writeHistorical(t, bad, testHeader("s2"), lines, comp)
			if _, err := OpenAppend(bad, WriterOptions{}); !errors.Is(err, ErrTurnPath) || !strings.Contains(err.Error(), "line 2") {
				t.Fatalf("OpenAppend of a broken log: %v", err)
			}
		})
	}
}

// TestCloseTurn: the events that close an interrupted turn are valid, keep
// what a cut-off model call produced, and answer every open tool call.
func TestCloseTurn(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s1.v4.jsonl")
	attempt := `{"turn":1,"step":1,"stream":[{"type":"chunk","time":1,"chunk":{"type":"block-start","index":0,"blockType":"reasoning"}},` +
		`{"type":"reasoning-chunks","time0":2,"index":0,"dt":[1],"texts":["I will ","check"]},{"type":"chunk","time":3,"chunk":{"type":"block-end","index":0,"block":{"type":"reasoning","text":"I will check"}}},` +
		`{"type":"chunk","time":4,"chunk":{"type":"block-start","index":1,"blockType":"text"}},{"type":"text-chunks","time0":5,"index":1,"dt":[1],"texts":["Partial ","answ"]},` +
		`{"type":"chunk","time":6,"chunk":{"type":"block-start","index":2,"blockType":"tool-call"}}]}`
	evs := []Event{ev("turn/start", `{"turn":1}`), ev("step/start", `{"turn":1,"step":1}`), ev(TypeUserMessage, string(userMsg("u", "go"))),
		ev("request/header", `{"header":{"config":{"provider":"deepseek","model":"deepseek-chat"}},"reason":"initial"}`),
		answerWithCall(1, 1, "a1", "c1"), ev("tool/call", `{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{}"}`), answerWithCall(1, 1, "a2", "c2"),
		ev("assistant/attempt", attempt)}
	w, err := Create(path, testHeader("s1"), evs, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ts := w.Turn()
	if !ts.Open || !ts.StepOpen || ts.Step != 1 || len(ts.Calls) != 2 || !ts.Calls[0].Started || ts.Calls[1].Started || !ts.CutOff ||
		ts.Provider != "deepseek" || ts.Model != "deepseek-chat" {
		t.Fatalf("turn state %+v", ts)
	}
	closing := CloseTurn(ts, w.NextSeq(), 9, "interrupted")
	if err := w.Append(closing); err != nil {
		t.Fatalf("closing events refused: %v", err)
	}
	if w.Turn().Open {
		t.Fatal("turn still open")
	}
	w.Close()
	var types []string
	for _, e := range closing {
		types = append(types, e.Type)
	}
	if strings.Join(types, " ") != "assistant/message tool/result tool/result step/end turn/end" {
		t.Fatalf("closing events %v", types)
	}
	for _, want := range []string{`"content":[{"type":"reasoning","text":"I will check"},{"type":"text","text":"Partial answ"}]`,
		`"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"}`, `"stream":[],"interrupted":true}`} {
		if !strings.Contains(string(closing[0].Data), want) {
			t.Errorf("partial answer %s lacks %s", closing[0].Data, want)
		}
	}
	if !strings.Contains(string(closing[1].Data), CodeToolInterrupted) || !strings.Contains(string(closing[2].Data), CodeToolNotStarted) {
		t.Errorf("results %s / %s", closing[1].Data, closing[2].Data)
	}
	if got := ruleProblems(t, testHeader("s1"), append(evs, closing...)); len(got) != 0 {
		t.Fatalf("closed log: %v", got)
	}
	raw, _ := os.ReadFile(path)
	if !strings.Contains(string(raw), `"reason":{"kind":"interrupted"}`) {
		t.Fatal("no interrupted turn/end")
	}
	// Calls still open after their step ended get a step of their own.
	ts = TurnState{Open: true, Turn: 3, Step: 1, Calls: []OpenCall{{ID: "x", Seq: 2}}}
	closing = CloseTurn(ts, 10, 1, "interrupted")
	if len(closing) != 4 || closing[0].Type != "step/start" || string(closing[0].Data) != `{"turn":3,"step":2}` {
		t.Fatalf("closing without an open step: %+v", closing)
	}
}

// TestPartialContent: what repair and CloseTurn keep of a model call cut
// off is read from its attempt's stream as the format documents it (docs/
// FORMAT.md, "Closing an interrupted turn"), every record kind included.
func TestPartialContent(t *testing.T) {
	chunk := func(c string) string { return `{"type":"chunk","time":1,"chunk":` + c + `}` }
	for _, c := range []struct {
		name   string
		stream []string
		want   string // "" when nothing is kept
	}{
		{"deltas without a block-start", []string{chunk(`{"type":"text-delta","index":0,"text":"Hel"}`), chunk(`{"type":"text-delta","index":0,"text":"lo"}`)},
			`[{"type":"text","text":"Hello"}]`},
		{"runs and deltas of one block", []string{chunk(`{"type":"block-start","index":0,"blockType":"reasoning"}`),
			`{"type":"reasoning-chunks","time0":1,"index":0,"dt":[1],"texts":["I ","think"]}`, chunk(`{"type":"reasoning-delta","index":0,"text":"."}`)},
			`[{"type":"reasoning","text":"I think."}]`},
		{"blocks in the order their index first appears", []string{`{"type":"text-chunks","time0":1,"index":3,"dt":[],"texts":["second"]}`,
			`{"type":"reasoning-chunks","time0":1,"index":1,"dt":[],"texts":["first"]}`},
			`[{"type":"text","text":"second"},{"type":"reasoning","text":"first"}]`},
		{"the first block-end fixes a block", []string{`{"type":"text-chunks","time0":1,"index":0,"dt":[],"texts":["dra"]}`,
			chunk(`{"type":"block-end","index":0,"block":{"type":"text","text":"final"}}`), chunk(`{"type":"text-delta","index":0,"text":" more"}`),
			chunk(`{"type":"block-end","index":0,"block":{"type":"text","text":"other"}}`)},
			`[{"type":"text","text":"final"}]`},
		{"white space only is left out", []string{`{"type":"text-chunks","time0":1,"index":0,"dt":[1],"texts":[" ","\n"]}`,
			`{"type":"text-chunks","time0":1,"index":1,"dt":[],"texts":["kept"]}`},
			`[{"type":"text","text":"kept"}]`},
		{"tool calls never ran", []string{`{"type":"tool-call-chunks","time0":1,"index":0,"dt":[],"id":"c1","name":"bash","args":["{}"]}`,
			chunk(`{"type":"tool-call-delta","index":1,"id":"c2","argumentsDelta":"{"}`), chunk(`{"type":"block-start","index":2,"blockType":"tool-call"}`)}, ""},
		{"usage and finish are not content", []string{chunk(`{"type":"usage","usage":{"inputTokens":1,"outputTokens":1}}`),
			chunk(`{"type":"finish","reason":{"kind":"error","failure":{"code":"E","message":"m"}}}`)}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			attempt := `{"turn":1,"step":1,"stream":[` + strings.Join(c.stream, ",") + `]}`
			if p := checkStream([]byte(`[` + strings.Join(c.stream, ",") + `]`)); p != nil {
				t.Fatalf("the stream is not the documented shape: %s%s", p.path, p.msg)
			}
			got := partialContent([]byte(attempt))
			if string(got) != c.want {
				t.Fatalf("kept %s, want %s", got, c.want)
			}
			if got != nil {
				if p := checkBlocks(got, slotAssistant, nil); p != nil {
					t.Fatalf("kept blocks an answer cannot hold: %s: %s", p.path, p.msg)
				}
			}
		})
	}
}
