package convlog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// readLines writes a plain v4 log of the given event lines and reads it
// back strictly, so the events are exactly what a reader hands out.
func readLines(t *testing.T, ls ...string) []Event {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s1.v4.jsonl")
	if err := os.WriteFile(path, plainLog(append([]string{hdrV4}, ls...)...), 0o600); err != nil {
		t.Fatal(err)
	}
	evs, _, _, err := readLogStrict(path, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func replaceOp(start, end int) string {
	return fmt.Sprintf(`{"op":"replace","startSeq":%d,"endSeq":%d}`, start, end)
}

func surfaceLine(typ string, seq int, data, op, sources string) string {
	s := fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":%s`, typ, seq, 1000+seq, data)
	if sources != "" {
		s += `,"sourceEventSeqs":` + sources
	}
	return s + `,"surfaceOp":` + op + `}`
}

func historySeqs(h *History) []int64 {
	var seqs []int64
	for _, m := range h.Messages() {
		seqs = append(seqs, m.Seq)
	}
	return seqs
}

func applyAll(t *testing.T, h *History, evs []Event) {
	t.Helper()
	for i := range evs {
		if err := h.Apply(&evs[i]); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
}

// conversation is one turn with a tool call and an empty model answer.
func conversation() []string {
	return []string{
		lTurnStart(0),
		lStepStart(1),
		surfaceLine(TypeUserMessage, 2, string(userMsg("u1", "list files")), `"append"`, ""),
		surfaceLine(TypeAssistantMessage, 3, string(assistantData("a1", "calling ls")), `"append"`, ""),
		surfaceLine(TypeToolResult, 4, toolResultData("r1", "c1", "README.md"), `"append"`, "[3]"),
		surfaceLine(TypeAssistantMessage, 5, string(assistantData("a2", "")), `"append"`, ""),
		surfaceLine(TypeAssistantMessage, 6, string(assistantData("a3", "one file")), `"append"`, ""),
	}
}

func checkpointMsg(id string) string {
	return fmt.Sprintf(`{"role":"user","content":[{"type":"text","text":"summary"}],"source":{"kind":"compact-checkpoint"},"id":%q}`, id)
}

func TestHistoryAppend(t *testing.T) {
	evs := readLines(t, conversation()...)
	if len(evs) != 7 {
		t.Fatalf("%d events", len(evs))
	}
	var h History
	applyAll(t, &h, evs)
	if got := fmt.Sprint(historySeqs(&h)); got != "[2 3 4 6]" {
		t.Errorf("history seqs %s, want [2 3 4 6] (the empty answer at 5 left out)", got)
	}
	msgs := h.Messages()
	wantIDs := []string{"u1", "a1", "r1", "a3"}
	wantRoles := []string{"user", "assistant", "tool", "assistant"}
	for i, m := range msgs {
		if m.Message.ID() != wantIDs[i] || m.Message.Role() != wantRoles[i] {
			t.Errorf("message %d = %s %s, want %s %s", i, m.Message.ID(), m.Message.Role(), wantIDs[i], wantRoles[i])
		}
	}
	// The empty answer is in the log, recorded like any other.
	if evs[5].Type != TypeAssistantMessage || !bytes.Contains(evs[5].Data, []byte(`"content":[]`)) {
		t.Errorf("event 5 = %s %s", evs[5].Type, evs[5].Data)
	}
}

func TestHistoryReplace(t *testing.T) {
	ls := append(conversation(),
		// A checkpoint replaces 3..5, the empty answer included.
		surfaceLine(TypeUserMessage, 7, checkpointMsg("k1"), replaceOp(3, 5), "[3,4,5]"),
		surfaceLine(TypeUserMessage, 8, string(userMsg("u2", "next")), `"append"`, ""),
	)
	var h History
	applyAll(t, &h, readLines(t, ls...))
	if got := fmt.Sprint(historySeqs(&h)); got != "[2 7 6 8]" {
		t.Fatalf("history seqs %s, want [2 7 6 8]", got)
	}
	if id := h.Messages()[1].Message.ID(); id != "k1" {
		t.Errorf("replacement id %s", id)
	}

	// Replacing the whole history with one message.
	ls = append(ls, surfaceLine(TypeSystemMessage, 9,
		`{"turn":2,"step":1,"message":{"role":"system","content":[{"type":"text","text":"be brief"}],"source":{"kind":"system-prompt"},"id":"sys1"}}`,
		replaceOp(2, 8), "[2,6,7,8]"))
	h = History{}
	applyAll(t, &h, readLines(t, ls...))
	if got := fmt.Sprint(historySeqs(&h)); got != "[9]" {
		t.Fatalf("history seqs %s, want [9]", got)
	}
}

func TestHistoryReplaceNotInHistory(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     string
		wantAt int64
	}{
		{"replaced earlier", replaceOp(4, 4), 8}, // 4 was replaced by 7
		{"log-only seq", replaceOp(0, 2), 8},     // 0 is turn/start, never in the history
		{"span reversed in history order", replaceOp(6, 7), 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls := append(conversation(),
				surfaceLine(TypeUserMessage, 7, checkpointMsg("k1"), replaceOp(3, 5), "[3,4,5]"),
				surfaceLine(TypeUserMessage, 8, checkpointMsg("k2"), tc.op, ""),
			)
			evs := readLines(t, ls...)
			var h History
			applyAll(t, &h, evs[:8])
			before := fmt.Sprint(historySeqs(&h))
			err := h.Apply(&evs[8])
			if err == nil || !strings.Contains(err.Error(), "not a span of the current history") ||
				!strings.Contains(err.Error(), fmt.Sprintf("at seq %d", tc.wantAt)) {
				t.Fatalf("err = %v", err)
			}
			if after := fmt.Sprint(historySeqs(&h)); after != before {
				t.Errorf("a refused replacement changed the history: %s -> %s", before, after)
			}
		})
	}
}

func TestHistoryRefusesBadMessages(t *testing.T) {
	for _, tc := range []struct {
		name, line, want string
	}{
		{"no id", surfaceLine(TypeUserMessage, 0, `{"role":"user","content":[],"source":{"kind":"user"}}`, `"append"`, ""), "has no id"},
		{"empty id", surfaceLine(TypeUserMessage, 0, `{"role":"user","content":[],"source":{"kind":"user"},"id":""}`, `"append"`, ""), "has no id"},
		{"plugin kind", surfaceLine(TypeUserMessage, 0, `{"role":"user","content":[],"source":{"kind":"plugin","plugin":"x"},"id":"u1"}`, `"append"`, ""), `not "plugin"`},
		{"no source", surfaceLine(TypeUserMessage, 0, `{"role":"user","content":[],"id":"u1"}`, `"append"`, ""), "has no source"},
		{"source without kind", surfaceLine(TypeUserMessage, 0, `{"role":"user","content":[],"source":{"plugin":"x"},"id":"u1"}`, `"append"`, ""), "non-empty kind"},
		{"wrong role", surfaceLine(TypeUserMessage, 0, `{"role":"assistant","content":[],"source":{"kind":"model"},"id":"u1"}`, `"append"`, ""), `expected role [user]`},
		{"tool result as user", surfaceLine(TypeToolResult, 0, `{"turn":1,"step":1,"message":{"role":"user","content":[],"source":{"kind":"tool","callId":"c"},"id":"r"}}`, `"append"`, ""), `expected role [tool]`},
		{"no message member", surfaceLine(TypeAssistantMessage, 0, `{"turn":1,"step":1}`, `"append"`, ""), `data has no "message"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs := readLines(t, tc.line)
			var h History
			err := h.Apply(&evs[0])
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "at seq 0") {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			if len(h.Messages()) != 0 {
				t.Error("a refused message entered the history")
			}
		})
	}
	if _, err := NewStoredMessage("", "user", Source{Kind: SourceUser}, nil); err == nil {
		t.Error("NewStoredMessage accepted an empty id")
	}
	if _, err := NewStoredMessage("m1", "user", Source{Kind: SourcePlugin}, nil); err == nil {
		t.Error("NewStoredMessage accepted source kind plugin")
	}
}

func TestUnknownSourceKindPreserved(t *testing.T) {
	src := `{"kind":"acme-bridge", "zeta":[1, 2],"alpha":{"b":1,"a":"\u00e9"}}`
	user := `{"content":[{"type":"text","text":"hi"}],  "source":` + src + `,"role":"user","id":"u1","x-extra":true}`
	asst := `{"role":"assistant","content":[{"type":"text","text":"yo"}],"source":` + src + `,"id":"a1"}`
	evs := readLines(t,
		surfaceLine(TypeUserMessage, 0, user, `"append"`, ""),
		surfaceLine(TypeAssistantMessage, 1, `{"turn":1,"step":1,"message": `+asst+` ,"stream":[]}`, `"append"`, ""))
	var h History
	applyAll(t, &h, evs)
	msgs := h.Messages()
	if len(msgs) != 2 {
		t.Fatalf("%d messages", len(msgs))
	}
	for i, want := range []string{user, asst} {
		m := msgs[i].Message
		if string(m.JSON()) != want {
			t.Errorf("message %d JSON\n got %s\nwant %s", i, m.JSON(), want)
		}
		if string(m.Source().Raw) != src || m.Source().Kind != "acme-bridge" {
			t.Errorf("message %d source %q %s", i, m.Source().Kind, m.Source().Raw)
		}
	}
	// Rewriting the events keeps them byte for byte.
	for _, e := range evs {
		if !bytes.Contains(e.AppendJSON(nil), []byte(src)) {
			t.Errorf("rewritten event lost the source: %s", e.AppendJSON(nil))
		}
	}
}

func TestInMemoryEventApplies(t *testing.T) {
	// An event built by the runtime (Known not set by a reader) changes the
	// history like the same event read from a log.
	e := Event{Type: TypeUserMessage, Seq: 0, Data: userMsg("u1", "hi"), SurfaceOp: &SurfaceOp{}}
	var h History
	if err := h.Apply(&e); err != nil {
		t.Fatal(err)
	}
	if len(h.Messages()) != 1 {
		t.Fatalf("in-memory user/message not applied: %d messages", len(h.Messages()))
	}
	// An unknown ignorable event never does.
	e = Event{Type: TypeUserMessage, Seq: 1, Data: userMsg("u2", "hi"), SurfaceOp: &SurfaceOp{}, Ignorable: true}
	if err := h.Apply(&e); err != nil || len(h.Messages()) != 1 {
		t.Fatalf("ignorable opaque event applied: %v %d", err, len(h.Messages()))
	}
}

func TestReservedSourceKinds(t *testing.T) {
	// The brief's reserved kinds, by the names the runtime writes.
	got := []SourceKind{SourceUser, SourceModel, SourceTool, SourceSystemPrompt, SourceCheckpoint, SourceTitle,
		SourceToolRegistry, SourceRuntimeContext, SourcePlugin, SourceReview, SourceCompaction}
	want := []SourceKind{"user", "model", "tool", "system-prompt", "compact-checkpoint", "dsh-session-title-llm",
		"tool-registry", "runtime-context", "plugin", "auto-review", "compact-basic"}
	if !slices.Equal(got, want) {
		t.Errorf("reserved kinds %q, want %q", got, want)
	}
}

// TestUnknownTypeRefused: a strict reader refuses a type outside the
// vocabulary that is not marked ignorable.
func TestUnknownTypeRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s1.v4.jsonl")
	os.WriteFile(path, plainLog(hdrV4, `{"type":"acme/log","seq":0,"time":1,"data":{}}`), 0o600)
	if _, _, _, err := readLogStrict(path, ReaderOptions{}); err == nil {
		t.Error("a plugin type was accepted")
	}
}

// TestStoredMessageFieldsUnexported: a StoredMessage can only come from a
// constructor that requires its identity.
func TestStoredMessageFieldsUnexported(t *testing.T) {
	stored := reflect.TypeOf(StoredMessage{})
	// StoredMessage fields are unexported: a value can only come from
	// ParseStoredMessage or NewStoredMessage, which require id and source.
	for i := range stored.NumField() {
		if stored.Field(i).IsExported() {
			t.Errorf("StoredMessage field %s is exported", stored.Field(i).Name)
		}
	}
}

func TestNewStoredMessageRoundTrip(t *testing.T) {
	m, err := NewStoredMessage("m1", "assistant", Source{Kind: SourceModel}, []byte(`[{"type":"text","text":"a<b"}]`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"role":"assistant","content":[{"type":"text","text":"a<b"}],"source":{"kind":"model"},"id":"m1"}`
	if string(m.JSON()) != want {
		t.Errorf("JSON %s", m.JSON())
	}
	p, err := ParseStoredMessage(m.JSON())
	if err != nil || !reflect.DeepEqual(p, m) {
		t.Errorf("parsed %+v, %v", p, err)
	}
	empty, _ := NewStoredMessage("m2", "assistant", Source{Kind: SourceModel}, nil)
	if !empty.Empty() || m.Empty() {
		t.Errorf("Empty: %v %v", empty.Empty(), m.Empty())
	}
}

// TestReplaceSpanInSurfaceOrder: after a replacement the surface is not in
// seq order, and a later replacement names its span in surface order.
func TestReplaceSpanInSurfaceOrder(t *testing.T) {
	h := &History{}
	msg := func(id string) StoredMessage {
		m, err := NewStoredMessage(id, "user", Source{Kind: SourceUser}, []byte(`[{"type":"text","text":"x"}]`))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	app := &SurfaceOp{}
	for seq := int64(0); seq < 5; seq++ {
		if err := h.put(&Event{Type: TypeUserMessage, Seq: seq, SurfaceOp: app}, msg(fmt.Sprint("m", seq)), false); err != nil {
			t.Fatal(err)
		}
	}
	// Replace 1..2 with seq 5: the surface is now 0, 5, 3, 4.
	if err := h.put(&Event{Type: TypeUserMessage, Seq: 5, SurfaceOp: &SurfaceOp{Replace: true, StartSeq: 1, EndSeq: 2}}, msg("m5"), false); err != nil {
		t.Fatal(err)
	}
	// Replace 5..3 (surface order) with seq 6: the surface is 0, 6, 4.
	if err := h.put(&Event{Type: TypeUserMessage, Seq: 6, SurfaceOp: &SurfaceOp{Replace: true, StartSeq: 5, EndSeq: 3}}, msg("m6"), false); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range h.Messages() {
		ids = append(ids, m.Message.ID())
	}
	if fmt.Sprint(ids) != "[m0 m6 m4]" {
		t.Fatalf("history = %v", ids)
	}
	// 4..6 would run backwards in surface order.
	if err := h.put(&Event{Type: TypeUserMessage, Seq: 7, SurfaceOp: &SurfaceOp{Replace: true, StartSeq: 4, EndSeq: 6}}, msg("m7"), false); err == nil {
		t.Fatal("a span running backwards in surface order was accepted")
	}
	// The envelope admits such a span when read from a log.
	line := `{"type":"user/message","seq":9,"time":1,"data":{},"surfaceOp":{"op":"replace","startSeq":5,"endSeq":3}}`
	p := &envelopeParser{version: 4}
	var e Event
	if prob := p.parse([]byte(line), 9, &e); prob != nil {
		t.Fatalf("envelope refused a surface-order span: %s", prob.msg)
	}
}
