package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/convkit/convkit/convlog"
)

// testClock advances one millisecond per call.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

func openTestStore(t *testing.T, dir string, comp convlog.Compression) *Store {
	t.Helper()
	clk := &testClock{t: time.UnixMilli(1790000000000)}
	s, err := Open(context.Background(), dir, OpenOptions{Lock: LockOptions{Mode: LockExclusive, Command: "test"}, Create: CreateAlways,
		Compression: comp, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func readInfo(t *testing.T, dir, id string) *ConversationInfo {
	t.Helper()
	info, err := at(dir).ReadConversation(id)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// sessionEvents is a small V4 session history.
type sessionEvents struct {
	evs  []convlog.Event
	turn int64
}

func (b *sessionEvents) add(typ, data string, surface bool, src ...int64) int64 {
	e := convlog.Event{Type: typ, Seq: int64(len(b.evs)), Time: 1790000000000 + int64(len(b.evs)), Data: []byte(data), SourceEventSeqs: src}
	if surface {
		e.SurfaceOp = &convlog.SurfaceOp{}
	}
	b.evs = append(b.evs, e)
	return int64(len(b.evs) - 1)
}

func (b *sessionEvents) replace(typ, data string, start, end int64, src []int64) int64 {
	e := convlog.Event{Type: typ, Seq: int64(len(b.evs)), Time: 1790000000000 + int64(len(b.evs)), Data: []byte(data), SourceEventSeqs: src,
		SurfaceOp: &convlog.SurfaceOp{Replace: true, StartSeq: start, EndSeq: end}}
	b.evs = append(b.evs, e)
	return int64(len(b.evs) - 1)
}

func userData(id, kind, text string) string {
	return fmt.Sprintf(`{"content":[{"type":"text","text":%q}],"source":{"kind":%q},"role":"user","id":%q}`, text, kind, id)
}

// compactionSummary is the summary of compaction c1 over the history
// nodes shadow.
func compactionSummary(shadow []int64) string {
	seqs, _ := json.Marshal(shadow)
	return fmt.Sprintf(`{"compactionId":"c1","summary":[{"type":"text","text":"summary"}],"shadowedRange":{"start":%d,"end":%d},`+
		`"shadowedSeqs":%s,"shadowedTokenCount":100,"provider":"p","model":"m"}`, shadow[0], shadow[len(shadow)-1], seqs)
}

func assistantMsg(turn, step int64, id, content string) string {
	return fmt.Sprintf(`{"turn":%d,"step":%d,"message":{"role":"assistant","content":%s,"source":{"kind":"model","provider":"p","model":"m"},"id":%q},"stream":[]}`,
		turn, step, content, id)
}

// turn appends one complete turn with a tool call; it returns the seq of
// its user message.
func (b *sessionEvents) fullTurn(text string) int64 {
	b.turn++
	t := b.turn
	b.add("turn/start", fmt.Sprintf(`{"turn":%d}`, t), false)
	b.add("step/start", fmt.Sprintf(`{"turn":%d,"step":1}`, t), false)
	if t == 1 {
		b.add(convlog.TypeSystemMessage, `{"turn":1,"step":1,"message":{"role":"system","content":[{"type":"text","text":"sys"}],"source":{"kind":"system-prompt"},"id":"sys"}}`, true)
	}
	u := b.add(convlog.TypeUserMessage, userData(fmt.Sprintf("u%d", t), "user", text), true)
	call := fmt.Sprintf("call-%d", t)
	b.add(convlog.TypeAssistantMessage, assistantMsg(t, 1, fmt.Sprintf("a%d", t),
		fmt.Sprintf(`[{"type":"tool-call","id":%q,"name":"bash","arguments":"{}"}]`, call)), true)
	cs := b.add("tool/call", fmt.Sprintf(`{"turn":%d,"step":1,"callId":%q,"name":"bash","arguments":"{}"}`, t, call), false)
	b.add(convlog.TypeToolResult, fmt.Sprintf(`{"turn":%d,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":%q},"toolCallId":%q,"content":[{"type":"text","text":"ok"}],"isError":false,"id":"t%d"}}`, t, call, call, t), true, cs)
	b.add("step/end", fmt.Sprintf(`{"turn":%d,"step":1}`, t), false)
	b.add("step/start", fmt.Sprintf(`{"turn":%d,"step":2}`, t), false)
	b.add(convlog.TypeAssistantMessage, assistantMsg(t, 2, fmt.Sprintf("a%db", t), `[{"type":"text","text":"done"}]`), true)
	b.add("step/end", fmt.Sprintf(`{"turn":%d,"step":2}`, t), false)
	b.add(convlog.TypeTurnEnd, fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, t), false)
	return u
}

func readEvents(t *testing.T, path string) (*convlog.Header, []convlog.Event) {
	t.Helper()
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var evs []convlog.Event
	for e, err := range r.Events() {
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e.Clone())
	}
	return r.Header(), evs
}

func history(t *testing.T, evs []convlog.Event) []string {
	t.Helper()
	var h convlog.History
	for i := range evs {
		if err := h.Apply(&evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for _, m := range h.Messages() {
		ids = append(ids, m.Message.ID())
	}
	return ids
}

func TestAutoTitle(t *testing.T) {
	long := strings.Repeat("é", 45)
	for in, want := range map[string]string{
		"List the files":                 "List the files",
		"first line\nsecond line":        "first line",
		"\n\n  indented first  \r\nnext": "indented first",
		long:                             strings.Repeat("é", 40),
		strings.Repeat("a", 39) + " bcd": strings.Repeat("a", 39),
		strings.Repeat("日本語", 20):        strings.Repeat("日本語", 13) + "日",
		"   \n\t":                        "",
	} {
		got := AutoTitle(in)
		if got != want {
			t.Errorf("AutoTitle(%q) = %q, want %q", in, got, want)
		}
		if n := utf8.RuneCountInString(got); n > maxAutoTitleRunes {
			t.Errorf("AutoTitle(%q) has %d runes", in, n)
		}
	}
}

func TestConversationLifecycle(t *testing.T) {
	for _, comp := range []convlog.Compression{convlog.Plain, convlog.Zstd} {
		t.Run(comp.String(), func(t *testing.T) {
			dir := t.TempDir()
			s := openTestStore(t, dir, comp)
			nc := NewConversation{ID: "c1", Cwd: "/home/u/proj", SessionID: "root", Agent: "coder", Model: "m1"}
			root, err := s.NewConversation(nc)
			mustNil(t, err)
			if _, err := s.NewConversation(NewConversation{ID: "c2", Cwd: "relative/dir", SessionID: "r", Agent: "a", Model: "m"}); err == nil {
				t.Fatal("relative cwd accepted")
			}
			user := func(text string) convlog.StoredMessage { return storedMsg(t, NewMessageID(), "user", "user", text) }
			// A 41+ character, multi-line first message.
			first := "Please refactor the parser package so that every error carries a position\nand more"
			_, err = root.BeginTurn(user(first))
			mustNil(t, err)
			if _, err := s.NewConversation(nc); !errors.Is(err, ErrConversationExists) || !errors.Is(err, fs.ErrExist) {
				t.Fatalf("second create: %v", err)
			}
			if _, err := root.BeginTurn(user("x")); !errors.Is(err, ErrTurnRunning) {
				t.Fatalf("second running turn: %v", err)
			}
			child, err := root.Spawn("child", "explorer", "m2")
			mustNil(t, err)
			grandchild, err := child.Spawn("grandchild", "explorer", "m2")
			mustNil(t, err)
			mustNil(t, grandchild.Close())
			_, err = child.BeginTurn(user("A subagent task must not title the conversation"))
			mustNil(t, err)
			mustNil(t, child.EndTurn(OutcomeCompleted, nil))
			mustNil(t, root.EndTurn(OutcomeCompleted, nil))
			if err := root.EndTurn(OutcomeCompleted, nil); !errors.Is(err, ErrNoTurn) {
				t.Fatalf("ending a turn twice: %v", err)
			}

			info := readInfo(t, dir, "c1")
			wantTitle := "Please refactor the parser package so th"
			if info.Title != wantTitle || !info.TitleIsAuto {
				t.Fatalf("title = %q auto=%v, want %q", info.Title, info.TitleIsAuto, wantTitle)
			}
			_, err = root.BeginTurn(user("Another message"))
			mustNil(t, err)
			mustNil(t, root.Interrupt(nil))
			if info := readInfo(t, dir, "c1"); info.Title != wantTitle {
				t.Fatalf("a later turn changed the title to %q", info.Title)
			}

			mustNil(t, s.Rename("c1", "Parser errors"))
			_, err = root.BeginTurn(user("Yet another"))
			mustNil(t, err)
			mustNil(t, root.EndTurn(OutcomeFailed, &convlog.LLMFailure{Code: "overloaded", Message: "busy"}))
			mustNil(t, s.Archive("c1"))
			mustNil(t, s.Archive("c1")) // no-op
			info = readInfo(t, dir, "c1")
			if info.Title != "Parser errors" || info.TitleIsAuto || !info.Archived {
				t.Fatalf("after rename+archive: %+v", info)
			}
			mustNil(t, s.Unarchive("c1"))
			mustNil(t, s.MapCwd("c1", "/srv/proj"))

			info = readInfo(t, dir, "c1")
			if info.Archived || info.Cwd != "/srv/proj" || info.RunningTurn || info.Deleting {
				t.Fatalf("info = %+v", info)
			}
			if got := strings.Join(info.Agents, ","); got != "coder,explorer" {
				t.Errorf("agents = %s", got)
			}
			if got := strings.Join(info.Models, ","); got != "m1,m2" {
				t.Errorf("models = %s", got)
			}
			if len(info.Sessions) != 3 || info.Sessions[2].delegationDepth != 2 || info.Sessions[1].ParentSession != "root" {
				t.Errorf("sessions = %+v", info.Sessions)
			}
			if len(info.Turns) != 4 || info.Turns[2].Outcome != OutcomeInterrupted || info.Turns[3].Outcome != OutcomeFailed {
				t.Errorf("turns = %+v", info.Turns)
			}
			if !info.UpdatedAt.After(info.CreatedAt) {
				t.Errorf("updatedAt %v not after createdAt %v", info.UpdatedAt, info.CreatedAt)
			}
			// The store's own view agrees with a fresh replay.
			mine, err := s.Conversation("c1")
			mustNil(t, err)
			if mine.Title != info.Title || len(mine.Turns) != len(info.Turns) || mine.Cwd != info.Cwd {
				t.Errorf("store view %+v differs from replay %+v", mine, info)
			}

			// The session headers.
			p, err := at(dir).sessionLogFile("c1", "grandchild")
			mustNil(t, err)
			h, _ := readEvents(t, p)
			if h.ParentSession != "child" || h.Origin != "subagent" || h.DelegationDepth != 2 || h.Cwd != "/home/u/proj" {
				t.Errorf("grandchild header = %s", h.AppendJSON(nil))
			}
			p, err = at(dir).sessionLogFile("c1", "root")
			mustNil(t, err)
			if h, _ := readEvents(t, p); h.ParentSession != "" || h.Origin != "" || h.DelegationDepth != 0 || h.IsSeeded {
				t.Errorf("root header = %s", h.AppendJSON(nil))
			}
			if comp == convlog.Zstd && !strings.HasSuffix(p, ".v4.jsonl.zst") {
				t.Errorf("session log %s is not compressed", p)
			}
		})
	}
}

func TestReopenContinues(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	mustNil(t, s.CreateConversation("c", "/p", nil, nil))
	mustNil(t, s.RegisterSession("c", "r", "a", "m", ""))
	mustNil(t, s.BeginTurn("c", "r", 1, "hello"))
	mustNil(t, s.Close())
	if _, err := Open(context.Background(), dir, OpenOptions{Lock: LockOptions{Mode: LockNone}}); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(context.Background(), dir, OpenOptions{})
	mustNil(t, err)
	if err := ro.Rename("c", "x"); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("read-only rename: %v", err)
	}
	if info, err := ro.Conversation("c"); err != nil || !info.RunningTurn {
		t.Fatalf("read-only view: %+v, %v", info, err)
	}
	ro.Close()

	s = openTestStore(t, dir, convlog.Plain)
	mustNil(t, s.EndTurn("c", "r", 1, OutcomeCompleted))
	mustNil(t, s.BeginTurn("c", "r", 2, "second"))
	mustNil(t, s.EndTurn("c", "r", 2, OutcomeCompleted))
	info := readInfo(t, dir, "c")
	if info.Title != "hello" || len(info.Turns) != 2 || info.RunningTurn {
		t.Fatalf("info = %+v", info)
	}
}

// The runtime's Rename refuses what CheckTitle refuses, an operator's
// rename too: a title over maxTitleRunes characters, or of more than one
// line; the log is left as it was.
func TestRenameRefusesTitle(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	defer s.Close()
	mustNil(t, s.CreateConversation("c", "/p", nil, nil))
	p, err := convLogPath(dir, "c", convlog.CurrentVersion, convlog.Plain)
	mustNil(t, err)
	before, err := os.ReadFile(p)
	mustNil(t, err)
	long := strings.Repeat("é", maxTitleRunes)
	for _, title := range []string{long + "x", "two\nlines", "carriage\rreturn", "para\u2029graph", strings.Repeat("t", 5<<20)} {
		var re *RecordError
		if err := s.Rename("c", title); !errors.As(err, &re) || !errors.Is(err, ErrInvalid) {
			t.Errorf("Rename(%.20q…): %v, want a *RecordError (ErrInvalid)", title, err)
		}
		if _, err := CheckTitle(title); err == nil {
			t.Errorf("CheckTitle(%.20q…) takes it", title)
		}
	}
	if after, err := os.ReadFile(p); err != nil || !bytes.Equal(before, after) {
		t.Fatalf("a refused title changed the log: %v", err)
	}
	mustNil(t, s.Rename("c", "  "+long+"  "))
	if info := readInfo(t, dir, "c"); info.Title != long {
		t.Fatalf("title %q", info.Title)
	}
}

func TestForkCopiesRootHistory(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Zstd)
	mustNil(t, s.CreateConversation("src", "/home/u/p", []string{"coder"}, []string{"m"}))
	w, err := s.StartSession("src", "root", "coder", "m", "")
	mustNil(t, err)
	var b sessionEvents
	b.fullTurn("First question about the build")
	turn1End := int64(len(b.evs) - 1)
	b.fullTurn("Second")
	mustNil(t, w.Append(b.evs))
	w.Close()
	cw, err := s.StartSession("src", "sub", "explorer", "m", "root")
	mustNil(t, err)
	cw.Close()
	mustNil(t, s.BeginTurn("src", "root", 1, "First question about the build"))
	mustNil(t, s.EndTurn("src", "root", 1, OutcomeCompleted))
	mustNil(t, s.Archive("src"))

	// Fork through the end of turn 1.
	mustNil(t, s.forkSeq("src", "root", "f1", "froot", turn1End))
	info := readInfo(t, dir, "f1")
	if info.ForkedFrom != "src" || info.AfterCompaction || info.Archived || len(info.Sessions) != 1 {
		t.Fatalf("fork info = %+v", info)
	}
	if info.Title != "First question about the build" || !info.TitleIsAuto || info.Cwd != "/home/u/p" {
		t.Fatalf("fork title/cwd = %q %v %q", info.Title, info.TitleIsAuto, info.Cwd)
	}
	if deps := Dependencies(info); len(deps) != 0 {
		t.Errorf("plain fork depends on %v", deps)
	}
	p, err := at(dir).sessionLogFile("f1", "froot")
	mustNil(t, err)
	h, evs := readEvents(t, p)
	if h.IsSeeded || h.ParentSession != "" || int64(len(evs)) != turn1End+1 {
		t.Fatalf("fork header %s, %d events", h.AppendJSON(nil), len(evs))
	}
	for i, e := range evs {
		if e.Type != b.evs[i].Type || string(e.Data) != string(b.evs[i].Data) {
			t.Fatalf("event %d differs: %s vs %s", i, e.Data, b.evs[i].Data)
		}
	}
	if _, err := at(dir).sessionLogFile("f1", "sub"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("subagent copied: %v", err)
	}

	// Fork in the middle of turn 2: after the tool call, before its result.
	callSeq := turn1End + 4 // turn/start, step/start, user, assistant(tool-call)
	if b.evs[callSeq].Type != convlog.TypeAssistantMessage {
		t.Fatalf("test layout: seq %d is %s", callSeq, b.evs[callSeq].Type)
	}
	mustNil(t, s.forkSeq("src", "root", "f2", "froot", callSeq))
	p, _ = at(dir).sessionLogFile("f2", "froot")
	_, evs = readEvents(t, p)
	tail := evs[callSeq+1:]
	if len(tail) != 3 || tail[0].Type != convlog.TypeToolResult || tail[1].Type != "step/end" || tail[2].Type != convlog.TypeTurnEnd ||
		!strings.Contains(string(tail[2].Data), `"forked"`) || !strings.Contains(string(tail[0].Data), "forked-tool-result-call-2-") {
		t.Fatalf("closing events = %+v", tail)
	}
	history(t, evs)

	// Fork everything; errors.
	mustNil(t, s.forkSeq("src", "root", "f3", "froot", -1))
	if err := s.forkSeq("src", "sub", "f4", "x", -1); err == nil {
		t.Error("forking a subagent accepted")
	}
	if err := s.forkSeq("src", "root", "f1", "x", -1); !errors.Is(err, ErrConversationExists) {
		t.Errorf("fork onto an existing id: %v", err)
	}
	if err := s.forkSeq("src", "root", "f5", "x", 10000); err == nil {
		t.Error("fork beyond the end accepted")
	}
}

// compactedSource writes a source conversation whose root session compacted
// turns 1-2 at the start of turn 3.
func compactedSource(t *testing.T, s *Store) (b *sessionEvents, checkpoint int64) {
	t.Helper()
	mustNil(t, s.CreateConversation("src", "/home/u/p", nil, nil))
	w, err := s.StartSession("src", "root", "coder", "m", "")
	mustNil(t, err)
	defer w.Close()
	b = &sessionEvents{}
	firstUser := b.fullTurn("one")
	b.fullTurn("two")
	// Surface nodes so far: every surface event; shadow the user message of
	// turn 1 through the last node of turn 2.
	var shadow []int64
	for i, e := range b.evs {
		if e.SurfaceOp != nil && int64(i) >= firstUser {
			shadow = append(shadow, int64(i))
		}
	}
	b.turn++
	b.add("turn/start", `{"turn":3}`, false)
	b.add("step/start", `{"turn":3,"step":1}`, false)
	b.add("compaction/start", `{"compactionId":"c1","turn":3}`, false)
	b.add("compaction/summary", compactionSummary(shadow), false)
	checkpoint = b.replace(convlog.TypeUserMessage,
		`{"content":[{"type":"text","text":"summary of one and two"}],"source":{"kind":"compact-checkpoint","compactionId":"c1"},"role":"user","id":"cp1"}`,
		shadow[0], shadow[len(shadow)-1], shadow)
	b.add("compaction/end", `{"compactionId":"c1","turn":3}`, false)
	b.add(convlog.TypeUserMessage, userData("u3", "user", "three"), true)
	b.add(convlog.TypeAssistantMessage, assistantMsg(3, 1, "a3", `[{"type":"text","text":"three done"}]`), true)
	b.add("step/end", `{"turn":3,"step":1}`, false)
	b.add(convlog.TypeTurnEnd, `{"turn":3,"reason":{"kind":"completed"}}`, false)
	mustNil(t, w.Append(b.evs))
	mustNil(t, s.BeginTurn("src", "root", 1, "one"))
	mustNil(t, s.EndTurn("src", "root", 1, OutcomeCompleted))
	return b, checkpoint
}

func TestForkAfterCompaction(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	b, checkpoint := compactedSource(t, s)
	srcHist := history(t, b.evs)

	mustNil(t, s.forkSeq("src", "root", "fork", "froot", -1))
	info := readInfo(t, dir, "fork")
	if !info.AfterCompaction || info.ForkedFrom != "src" || info.Fork == nil || info.Fork.ThroughSeq != int64(len(b.evs)-1) {
		t.Fatalf("fork info = %+v (fork %+v)", info, info.Fork)
	}
	if deps := Dependencies(info); len(deps) != 1 || deps[0] != "src" {
		t.Fatalf("dependencies = %v", deps)
	}
	if len(info.Inherited) != 1 || info.Inherited[0].SessionID != "froot" || info.Inherited[0].SourceSession != "root" {
		t.Fatalf("inherited = %+v", info.Inherited)
	}
	p, err := at(dir).sessionLogFile("fork", "froot")
	mustNil(t, err)
	h, evs := readEvents(t, p)
	if !h.IsSeeded || h.ParentSession != "root" || h.Origin != "" {
		t.Fatalf("seeded header = %s", h.AppendJSON(nil))
	}
	last := evs[len(evs)-1]
	if last.Type != "session/end-seed" || string(last.Data) != `{"inherited":true}` {
		t.Fatalf("last event = %s %s", last.Type, last.Data)
	}
	// The older history was not copied: nothing of turns 1-2 but what the
	// model reads (system prompt, checkpoint, later messages).
	for _, e := range evs {
		if strings.Contains(string(e.Data), `"text":"one"`) || strings.Contains(string(e.Data), `"id":"a1"`) {
			t.Fatalf("older history copied: %s", e.Data)
		}
	}
	if got, want := strings.Join(history(t, evs), ","), strings.Join(srcHist, ","); got != want {
		t.Fatalf("fork history %s, source history %s", got, want)
	}
	if !strings.Contains(strings.Join(srcHist, ","), "cp1") {
		t.Fatalf("source history lacks the checkpoint: %v", srcHist)
	}
	// Fork of the fork: a copy that inherits what its source inherited.
	mustNil(t, s.forkSeq("fork", "froot", "fork2", "f2root", -1))
	info2 := readInfo(t, dir, "fork2")
	if info2.AfterCompaction || len(Dependencies(info2)) != 1 || Dependencies(info2)[0] != "src" {
		t.Fatalf("fork of fork: %+v deps %v", info2, Dependencies(info2))
	}
	closure, err := at(dir).DependencyClosure("fork2")
	mustNil(t, err)
	if strings.Join(closure, ",") != "fork2,src" {
		t.Fatalf("closure = %v", closure)
	}
	// A fork before the compaction is a plain copy.
	mustNil(t, s.forkSeq("src", "root", "early", "eroot", checkpoint-1))
	if info := readInfo(t, dir, "early"); info.AfterCompaction || len(Dependencies(info)) != 0 {
		t.Fatalf("early fork = %+v", info)
	}
}

func TestRewind(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	mustNil(t, s.CreateConversation("src", "/p", nil, nil))
	w, err := s.StartSession("src", "root", "coder", "m", "")
	mustNil(t, err)
	var b sessionEvents
	b.fullTurn("first <message>")
	turn1End := int64(len(b.evs) - 1)
	u2 := b.fullTurn("second message\nwith two lines & more")
	mustNil(t, w.Append(b.evs))
	w.Close()
	mustNil(t, s.Rename("src", "Named"))

	text, err := s.rewindSeq("src", "root", "rw", "rroot", u2)
	mustNil(t, err)
	if text != "second message\nwith two lines & more" {
		t.Fatalf("composer text = %q", text)
	}
	info := readInfo(t, dir, "rw")
	if info.Rewind == nil || info.Rewind.BeforeSeq != u2 || info.Rewind.ComposerText != text || info.ForkedFrom != "src" {
		t.Fatalf("rewind info = %+v %+v", info, info.Rewind)
	}
	if info.Title != "Named" || info.TitleIsAuto {
		t.Errorf("rewind title = %q auto=%v", info.Title, info.TitleIsAuto)
	}
	// The message opened its turn, so the fork stops before that turn.
	if info.Fork.ThroughSeq != turn1End {
		t.Errorf("through seq = %d, want %d", info.Fork.ThroughSeq, turn1End)
	}
	p, _ := at(dir).sessionLogFile("rw", "rroot")
	_, evs := readEvents(t, p)
	if int64(len(evs)) != turn1End+1 || evs[len(evs)-1].Type != convlog.TypeTurnEnd {
		t.Fatalf("rewound log has %d events", len(evs))
	}
	// Rewinding to the very first message leaves an empty session and no title.
	text, err = s.rewindSeq("src", "root", "rw0", "r0", 3)
	mustNil(t, err)
	if text != "first <message>" {
		t.Fatalf("text = %q", text)
	}
	p, _ = at(dir).sessionLogFile("rw0", "r0")
	if _, evs := readEvents(t, p); len(evs) != 0 {
		t.Fatalf("%d events before the first message", len(evs))
	}
	if _, err := s.rewindSeq("src", "root", "rw1", "r1", 0); err == nil {
		t.Error("rewind to a turn/start accepted")
	}
	if _, err := s.rewindSeq("src", "root", "rw1", "r1", 2); err == nil {
		t.Error("rewind to a system message accepted")
	}
}

func TestRewindAfterCompaction(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Zstd)
	b, _ := compactedSource(t, s)
	var u3 int64 = -1
	for i, e := range b.evs {
		if strings.Contains(string(e.Data), `"id":"u3"`) {
			u3 = int64(i)
		}
	}
	text, err := s.rewindSeq("src", "root", "rw", "rroot", u3)
	mustNil(t, err)
	if text != "three" {
		t.Fatalf("text = %q", text)
	}
	info := readInfo(t, dir, "rw")
	if !info.AfterCompaction || len(Dependencies(info)) != 1 {
		t.Fatalf("info = %+v", info)
	}
	p, _ := at(dir).sessionLogFile("rw", "rroot")
	_, evs := readEvents(t, p)
	got := strings.Join(history(t, evs), ",")
	if got != "sys,cp1" {
		t.Fatalf("rewound history = %s", got)
	}
}

func TestDelete(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	mustNil(t, s.CreateConversation("c", "/p", nil, nil))
	w, err := s.StartSession("c", "r", "a", "m", "")
	mustNil(t, err)
	w.Close()
	mustNil(t, s.BeginTurn("c", "r", 1, "hi"))
	err = s.del("c")
	if !errors.Is(err, ErrTurnRunning) || !strings.Contains(err.Error(), `"r" turn 1`) {
		t.Fatalf("delete while running: %v", err)
	}
	if info := readInfo(t, dir, "c"); info.Deleting {
		t.Fatal("refused delete wrote a tombstone")
	}
	mustNil(t, s.EndTurn("c", "r", 1, OutcomeCompleted))
	mustNil(t, s.del("c"))
	cdir, _ := conversationPath(dir, "c")
	if _, err := os.Lstat(cdir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("directory remains: %v", err)
	}
	if _, err := at(dir).ReadConversation("c"); !errors.Is(err, ErrNoConversation) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("read deleted: %v", err)
	}
	if err := s.Rename("c", "x"); !errors.Is(err, ErrNoConversation) {
		t.Fatalf("rename deleted: %v", err)
	}
	// The id is free again.
	mustNil(t, s.CreateConversation("c", "/p", nil, nil))
}

func TestInterruptedDelete(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Zstd)
	mustNil(t, s.CreateConversation("c", "/p", nil, nil))
	w, err := s.StartSession("c", "r", "a", "m", "")
	mustNil(t, err)
	w.Close()
	mustNil(t, s.CreateConversation("keep", "/p", nil, nil))
	if err := s.FinishDeletion("keep"); err == nil {
		t.Fatal("FinishDeletion without a tombstone accepted")
	}
	mustNil(t, s.markDeleting("c")) // Delete's first step alone, as a crash would leave it
	mustNil(t, s.Close())

	info := readInfo(t, dir, "c")
	if !info.Deleting {
		t.Fatal("no tombstone")
	}
	s = openTestStore(t, dir, convlog.Plain)
	if err := s.Rename("c", "x"); !errors.Is(err, ErrDeleting) {
		t.Fatalf("rename of a deleting conversation: %v", err)
	}
	tree, err := at(dir).Walk()
	mustNil(t, err)
	if len(tree.Conversations) != 2 {
		t.Fatalf("walk: %+v", tree)
	}
	mustNil(t, s.FinishDeletion("c"))
	mustNil(t, s.FinishDeletion("c")) // already gone
	tree, err = at(dir).Walk()
	mustNil(t, err)
	if len(tree.Conversations) != 1 || tree.Conversations[0].ID != "keep" || len(tree.Problems) != 0 {
		t.Fatalf("walk after finish: %+v", tree)
	}
}

func TestOddIDsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	ids := []string{"a/b", "~x", ".", "..", "with space", "日本語", "é.ü", "metadata", "x.v4", "UPPER-lower_1"}
	for i, id := range ids {
		mustNil(t, s.CreateConversation(id, "/p", nil, nil))
		sess := ids[(i+1)%len(ids)]
		w, err := s.StartSession(id, sess, "a", "m", "")
		mustNil(t, err)
		w.Close()
		mustNil(t, s.BeginTurn(id, sess, 1, "title of "+id))
		mustNil(t, s.EndTurn(id, sess, 1, OutcomeCompleted))
	}
	mustNil(t, s.Close())
	for i, id := range ids {
		info := readInfo(t, dir, id)
		if info.ID != id || info.Title != "title of "+id || len(info.Sessions) != 1 || info.Sessions[0].ID != ids[(i+1)%len(ids)] {
			t.Errorf("%q: %+v", id, info)
		}
		if _, err := at(dir).sessionLogFile(id, ids[(i+1)%len(ids)]); err != nil {
			t.Error(err)
		}
	}
	tree, err := at(dir).Walk()
	mustNil(t, err)
	if len(tree.Conversations) != len(ids) || len(tree.Problems) != 0 {
		t.Fatalf("walk: %d conversations, problems %v", len(tree.Conversations), tree.Problems)
	}
	for _, c := range tree.Conversations {
		if len(c.Logs) != 2 || !c.Logs[0].IsConversationLog {
			t.Errorf("%q logs = %+v", c.ID, c.Logs)
		}
	}
}

func TestPermissionsUnderUmask0(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "data")
	s := openTestStore(t, dir, convlog.Zstd)
	mustNil(t, s.CreateConversation("c/1", "/p", nil, nil))
	w, err := s.StartSession("c/1", "r", "a", "m", "")
	mustNil(t, err)
	var b sessionEvents
	b.fullTurn("hello")
	mustNil(t, w.Append(b.evs))
	w.Close()
	mustNil(t, s.forkSeq("c/1", "r", "c/2", "r2", -1))
	mustNil(t, s.Close())
	n := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		want := fs.FileMode(0o600)
		if d.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, want %v", p, fi.Mode().Perm(), want)
		}
		n++
		return nil
	})
	mustNil(t, err)
	if n < 8 {
		t.Fatalf("walked only %d entries", n)
	}
}

func TestConversationLogBytes(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	mustNil(t, s.CreateConversation("c", "/home/u/<proj>", []string{"coder"}, nil))
	mustNil(t, s.RegisterSession("c", "r", "coder", "m", ""))
	mustNil(t, s.BeginTurn("c", "r", 1, "a & b"))
	mustNil(t, s.Close())
	p, err := convLogPath(dir, "c", 4, convlog.Plain)
	mustNil(t, err)
	b, err := os.ReadFile(p)
	mustNil(t, err)
	want := `{"type":"conversation","version":4,"id":"c","createdAt":1790000000001}
{"type":"conversation/created","seq":0,"time":1790000000001,"data":{"cwd":"/home/u/<proj>","agents":["coder"],"models":[]}}
{"type":"session/started","seq":1,"time":1790000000002,"data":{"sessionId":"r","agent":"coder","model":"m"}}
{"type":"turn/started","seq":2,"time":1790000000003,"data":{"sessionId":"r","turn":1}}
{"type":"conversation/title","seq":3,"time":1790000000004,"data":{"title":"a & b"}}
`
	if string(b) != want {
		t.Fatalf("conversation log:\n%s\nwant:\n%s", b, want)
	}
}

// plainLog is a plain log of any version: h's line, then lines verbatim.
func plainLog(h *convlog.Header, lines [][]byte) []byte {
	return append(bytes.Join(append([][]byte{h.AppendJSON(nil)}, lines...), []byte("\n")), '\n')
}

func TestForkRefusesOldFormat(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	mustNil(t, s.CreateConversation("old", "/p", nil, nil))
	mustNil(t, s.RegisterSession("old", "r", "a", "m", ""))
	cdir, _ := conversationPath(dir, "old")
	h := &convlog.Header{Type: convlog.SessionLog, Version: 3, ID: "r", CreatedAt: 1}
	mustNil(t, os.WriteFile(filepath.Join(cdir, "r.v3.jsonl"), plainLog(h,
		[][]byte{[]byte(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`)}), 0o600))
	err := s.forkSeq("old", "r", "new", "n", -1)
	if err == nil || !strings.Contains(err.Error(), "format v3") {
		t.Fatalf("fork of a v3 session: %v", err)
	}
	ndir, _ := conversationPath(dir, "new")
	if _, err := os.Lstat(ndir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("failed fork left %s: %v", ndir, err)
	}
	if err := s.forkSeq("old", "nosuch", "new", "n", -1); err == nil {
		t.Fatal("fork of a missing session accepted")
	}
	if err := s.forkSeq("nosuch", "r", "new", "n", -1); !errors.Is(err, ErrNoConversation) {
		t.Fatalf("fork of a missing conversation: %v", err)
	}
}

// TestDeleteGuard: the runtime's Delete refuses a conversation that a fork
// made after a compaction reads older history from; the two go together.
func TestDeleteGuard(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	compactedSource(t, s)
	mustNil(t, s.forkSeq("src", "root", "fork", "froot", -1))
	mustNil(t, s.forkSeq("src", "root", "plain", "proot", 0))

	err := s.del("src")
	if !errors.Is(err, ErrHasDependents) {
		t.Fatalf("Delete of a fork source: %v", err)
	}
	if !strings.HasSuffix(err.Error(), `conversation "src" is the fork source of "fork", which read older history from it; deleting it would break them`) {
		t.Fatalf("message: %v", err)
	}
	if _, err := at(dir).ReadConversation("src"); err != nil {
		t.Fatalf("the refused delete touched the source: %v", err)
	}
	mustNil(t, s.checkDelete([]string{"src", "fork"}, []string{"src", "fork"}))
	mustNil(t, s.del("plain")) // no dependents
	mustNil(t, s.del("fork"))
	mustNil(t, s.del("src"))
	if _, err := at(dir).ReadConversation("src"); !errors.Is(err, ErrNoConversation) {
		t.Fatalf("src after delete: %v", err)
	}
}

// TestForkSeedKeepsHistoryOrder: the seed holds the messages in the order
// the model reads them, which after a replacement in the middle of the
// history is not the order of their seqs.
func TestForkSeedKeepsHistoryOrder(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	mustNil(t, s.CreateConversation("src", "/home/u/p", nil, nil))
	w, err := s.StartSession("src", "root", "coder", "m", "")
	mustNil(t, err)
	b := &sessionEvents{}
	b.fullTurn("one")
	b.fullTurn("two")
	var surface []int64
	for i, e := range b.evs {
		if e.SurfaceOp != nil {
			surface = append(surface, int64(i))
		}
	}
	// Replace the first turn's messages (after the system prompt) with one
	// summary: the later turn's messages stay after it, with lower seqs.
	b.turn++
	b.add("turn/start", `{"turn":3}`, false)
	b.add("step/start", `{"turn":3,"step":1}`, false)
	b.add("compaction/start", `{"compactionId":"c1","turn":3}`, false)
	b.add("compaction/summary", compactionSummary(surface[1:4]), false)
	b.replace(convlog.TypeUserMessage,
		`{"content":[{"type":"text","text":"summary of one"}],"source":{"kind":"compact-checkpoint","compactionId":"c1"},"role":"user","id":"cp1"}`,
		surface[1], surface[3], surface[1:4])
	b.add("compaction/end", `{"compactionId":"c1","turn":3}`, false)
	b.add("step/end", `{"turn":3,"step":1}`, false)
	b.add(convlog.TypeTurnEnd, `{"turn":3,"reason":{"kind":"completed"}}`, false)
	mustNil(t, w.Append(b.evs))
	mustNil(t, w.Close())
	srcHist := history(t, b.evs)
	if len(srcHist) < 4 || !strings.Contains(srcHist[1], "cp1") {
		t.Fatalf("source history %v: the summary is not second", srcHist)
	}

	mustNil(t, s.forkSeq("src", "root", "fork", "froot", -1))
	p, err := at(dir).sessionLogFile("fork", "froot")
	mustNil(t, err)
	_, evs := readEvents(t, p)
	if got, want := strings.Join(history(t, evs), ","), strings.Join(srcHist, ","); got != want {
		t.Fatalf("seed history %s, source history %s", got, want)
	}
}

// sessionLogFile is the path of session sessionID's current log.
func (s *Store) sessionLogFile(convID, sessionID string) (string, error) {
	l, err := s.FindLog(convID, sessionID)
	return l.Path, err
}

// TestReplayRefusesATurnRecordedTwice: a conversation log that records a
// session's turn twice (the writer numbers turns upward, so only damage
// does) is refused, naming the event; an end without its start is kept
// as a turn.
func TestReplayRefusesATurnRecordedTwice(t *testing.T) {
	head := `{"type":"conversation","version":4,"id":"c","createdAt":1}
{"type":"conversation/created","seq":0,"time":1,"data":{"cwd":"/w","agents":["coder"],"models":["m"]}}
{"type":"session/started","seq":1,"time":2,"data":{"sessionId":"r","agent":"coder","model":"m"}}
{"type":"turn/started","seq":2,"time":3,"data":{"sessionId":"r","turn":1}}
{"type":"turn/ended","seq":3,"time":4,"data":{"sessionId":"r","turn":1,"outcome":"completed"}}
`
	for _, c := range []struct{ name, tail, want string }{
		{"end of an ended turn", `{"type":"turn/started","seq":4,"time":5,"data":{"sessionId":"r","turn":2}}
{"type":"turn/ended","seq":5,"time":6,"data":{"sessionId":"r","turn":1,"outcome":"completed"}}
`, `turn/ended at seq 5: turn 1 of session "r" is recorded already`},
		{"start of a turn again", `{"type":"turn/started","seq":4,"time":5,"data":{"sessionId":"r","turn":1}}
`, `turn/started at seq 4: turn 1 of session "r" is recorded already`},
		{"start after an end without it", `{"type":"turn/ended","seq":4,"time":5,"data":{"sessionId":"r","turn":3,"outcome":"failed"}}
{"type":"turn/started","seq":5,"time":6,"data":{"sessionId":"r","turn":3}}
`, `turn/started at seq 5: turn 3 of session "r" is recorded already`},
		{"a lower number after an end without its start", `{"type":"turn/ended","seq":4,"time":5,"data":{"sessionId":"r","turn":3,"outcome":"failed"}}
{"type":"turn/started","seq":5,"time":6,"data":{"sessionId":"r","turn":2}}
{"type":"turn/started","seq":6,"time":7,"data":{"sessionId":"r","turn":3}}
`, `turn/started at seq 6: turn 3 of session "r" is recorded already`},
		{"an end without its start", `{"type":"turn/ended","seq":4,"time":5,"data":{"sessionId":"r","turn":3,"outcome":"failed"}}
{"type":"turn/started","seq":5,"time":6,"data":{"sessionId":"r","turn":2}}
`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "c", "metadata.v4.jsonl")
			mustNil(t, os.Mkdir(filepath.Dir(p), 0o700))
			mustNil(t, os.WriteFile(p, []byte(head+c.tail), 0o600))
			l, err := LooseLog(p)
			mustNil(t, err)
			info, err := l.ReadConversation()
			if c.want == "" {
				if err != nil || len(info.Turns) != 3 || info.Turns[1].Turn != 3 || info.Turns[1].Outcome != "failed" || !info.RunningTurn {
					t.Fatalf("turns %+v, %v", info, err)
				}
				return
			}
			if err == nil || err.Error() != p+": "+c.want {
				t.Fatalf("error %v, want %s: %s", err, p, c.want)
			}
		})
	}
}
