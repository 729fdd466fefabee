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
	"syscall"
	"testing"

	"github.com/convkit/convkit/convlog"
)

func storedMsg(t *testing.T, id, role, kind, text string) convlog.StoredMessage {
	t.Helper()
	m, err := convlog.NewStoredMessage(id, role, convlog.Source{Kind: convlog.SourceKind(kind)},
		[]byte(fmt.Sprintf(`[{"type":"text","text":%q}]`, text)))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// ruleProblems reads a log through the validator the writer, inspect
// --validate and reindex apply.
func ruleProblems(t *testing.T, path string) []string {
	t.Helper()
	h, evs := readEvents(t, path)
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	v := convlog.NewValidator(h)
	var out []string
	for i := range evs {
		evs[i].Known = true
		if err := v.Check(&evs[i]); err != nil {
			out = append(out, err.Error())
		}
	}
	if err := v.Finish(); err != nil {
		out = append(out, err.Error())
	}
	return out
}

// step records one step of the running turn: a request and a model call
// answering text (none: an empty answer), then the step's end.
func step(t *testing.T, se *Session, id, text string) {
	t.Helper()
	_, err := se.BeginStep()
	mustNil(t, err)
	mustNil(t, se.Request(Request{System: "You are a coding agent.", Config: convlog.LLMConfig{Provider: "p", Model: "m"}}))
	call, err := se.BeginModelCall()
	mustNil(t, err)
	if text != "" {
		call.Text(0, text)
	}
	call.Finish(convlog.FinishReason{Kind: convlog.FinishStop})
	mustNil(t, call.Complete(id))
	mustNil(t, se.EndStep())
}

func eventTypes(evs []convlog.Event) string {
	var types []string
	for _, e := range evs {
		types = append(types, e.Type)
	}
	return strings.Join(types, " ")
}

func TestSessionTurns(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Zstd)
	spec := NewConversation{ID: "c1", Cwd: "/home/u/p", SessionID: "root", Agent: "coder", Model: "m1"}

	// Opened and left without a message: nothing is kept.
	se, err := s.NewConversation(spec)
	mustNil(t, err)
	if _, err := se.BeginStep(); !errors.Is(err, ErrNoTurn) || !errors.Is(err, ErrOrder) {
		t.Fatalf("a step before the first message: %v", err)
	}
	mustNil(t, se.Close())
	if _, err := os.Lstat(filepath.Join(dir, "conversations", "c1")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("an empty conversation left %v", err)
	}

	// Kept from its first message, which titles it and makes it running.
	se, err = s.NewConversation(spec)
	mustNil(t, err)
	if _, err := s.NewConversation(spec); !errors.Is(err, ErrConversationExists) {
		t.Fatalf("a second new conversation of the same id: %v", err)
	}
	p1 := storedMsg(t, "u1", "user", "user", "Fix the flaky test\nit fails on CI")
	turn, err := se.BeginTurn(p1)
	mustNil(t, err)
	info := readInfo(t, dir, "c1")
	if turn != 1 || !info.RunningTurn || info.Title != "Fix the flaky test" || len(info.Sessions) != 1 {
		t.Fatalf("after the first message: turn %d, %+v", turn, info)
	}
	if _, err := se.BeginTurn(storedMsg(t, "u9", "user", "user", "again")); !errors.Is(err, ErrTurnRunning) {
		t.Fatalf("a second turn while one runs: %v", err)
	}
	step(t, se, "a1", "looking")
	// Append refuses what a call records, and an event that breaks a
	// format rule, before anything is written, each with a typed error.
	err = se.Append(convlog.Event{Type: "tool/call", Data: []byte(`{"turn":1,"step":1,"callId":"x","name":"bash","arguments":""}`)})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "recorded by ToolCall") {
		t.Fatalf("a tool call through Append: %v", err)
	}
	err = se.Append(convlog.Event{Type: "session-log-deepseek/delivery-accepted", Data: []byte(`{"sessionId":"root","throughSeq":99,"sessionFormatVersion":4}`)})
	if !errors.Is(err, convlog.ErrRelationship) {
		t.Fatalf("a delivery through a later event: %v", err)
	}
	mustNil(t, se.EndTurn(OutcomeCompleted, nil))
	if info := readInfo(t, dir, "c1"); info.RunningTurn || info.Turns[0].Outcome != OutcomeCompleted {
		t.Fatalf("after EndTurn: %+v", info.Turns)
	}

	// Turn 2: a tool call, steered, then interrupted mid-answer.
	turn, err = se.BeginTurn(storedMsg(t, "u2", "user", "user", "now the docs"))
	mustNil(t, err)
	if turn != 2 {
		t.Fatalf("second turn is %d", turn)
	}
	_, err = se.BeginStep()
	mustNil(t, err)
	mustNil(t, se.Request(Request{System: "You are a coding agent.", Config: convlog.LLMConfig{Provider: "p", Model: "m"}}))
	call, err := se.BeginModelCall()
	mustNil(t, err)
	call.ToolCall(0, "c7", "bash", `{"command":"ls docs"}`)
	call.Finish(convlog.FinishReason{Kind: convlog.FinishToolCalls})
	mustNil(t, call.Complete("a2"))
	mustNil(t, se.ToolCall("c7"))
	mustNil(t, se.Steer(storedMsg(t, "u3", "user", "user", "and keep it short")))
	mustNil(t, se.ToolResult(ToolResult{CallID: "c7", ID: "r7", Content: []convlog.Block{convlog.TextBlock("a.md")}}))
	mustNil(t, se.EndStep())
	_, err = se.BeginStep()
	mustNil(t, err)
	mustNil(t, se.Request(Request{System: "You are a coding agent.", Config: convlog.LLMConfig{Provider: "p", Model: "m"}}))
	call, err = se.BeginModelCall()
	mustNil(t, err)
	call.Text(0, "The docs say")
	call.ToolCall(1, "c8", "bash", `{"comm`)
	mustNil(t, se.Interrupt(call))
	if ts := se.Turn(); ts.Open {
		t.Fatalf("turn still open: %+v", ts)
	}
	info = readInfo(t, dir, "c1")
	if info.RunningTurn || info.Turns[1].Outcome != OutcomeInterrupted {
		t.Fatalf("after Interrupt: %+v", info.Turns)
	}
	path, err := s.sessionLogFile("c1", "root")
	mustNil(t, err)
	if probs := ruleProblems(t, path); len(probs) > 0 {
		t.Fatalf("the runtime's log breaks rules: %v", probs)
	}
	_, evs := readEvents(t, path)
	got := eventTypes(evs)
	want := "agent/inbox/spliced turn/start step/start system/message user/message request/header assistant/message step/end turn/end " +
		"agent/inbox/spliced turn/start step/start user/message assistant/message tool/call agent/inbox/spliced tool/result step/end " +
		"step/start user/message assistant/message step/end turn/end"
	if got != want {
		t.Fatalf("session log:\n%s\nwant\n%s", got, want)
	}
	partial := evs[len(evs)-3].Data
	if !bytes.Contains(partial, []byte(`"content":[{"type":"text","text":"The docs say"}]`)) || !bytes.Contains(partial, []byte(`"interrupted":true`)) ||
		bytes.Contains(partial, []byte(`"content":[{"type":"text","text":"The docs say"},`)) {
		t.Errorf("partial answer %s", partial)
	}
	for _, e := range evs {
		if e.Time < 1790000000000 {
			t.Fatalf("%s at seq %d has time %d, not the store's clock", e.Type, e.Seq, e.Time)
		}
	}
	// The history the model reads, with the interrupt marked.
	hist := se.History()
	var ids []string
	for _, h := range hist {
		ids = append(ids, h.Message.ID())
	}
	if n := len(hist); n != 8 || !hist[n-1].Interrupted || hist[n-2].Interrupted || hist[n-2].Message.ID() != "u3" {
		t.Fatalf("history %v", ids)
	}

	// A subagent: its first turn from its task, an empty answer, a failure;
	// its report starts the parent's next turn.
	child, err := se.Spawn("child", "reviewer", "m2")
	mustNil(t, err)
	_, err = child.BeginTurn(storedMsg(t, "task", "user", "user", "review it"))
	mustNil(t, err)
	step(t, child, "c-a1", "") // an empty answer is recorded too
	failure := convlog.LLMFailure{Code: "context_length", Message: "the request is too long"}
	mustNil(t, child.EndTurn(OutcomeFailed, &failure))
	report, err := se.SubagentReport("child", "rep1", "review failed", []convlog.Block{convlog.TextBlock("The review failed.")})
	mustNil(t, err)
	info = readInfo(t, dir, "c1")
	if len(info.Sessions) != 2 || info.Sessions[1].ParentSession != "root" || info.Turns[2].Outcome != OutcomeFailed || info.Title != "Fix the flaky test" {
		t.Fatalf("after the subagent: %+v", info)
	}
	cpath, _ := s.sessionLogFile("c1", "child")
	_, cevs := readEvents(t, cpath)
	if last := cevs[len(cevs)-1]; last.Type != convlog.TypeTurnEnd || string(last.Data) != `{"turn":1,"reason":{"kind":"error","error":{"code":"context_length","message":"the request is too long"}}}` {
		t.Fatalf("the failed turn's end: %s %s", last.Type, last.Data)
	}
	turn, err = se.BeginTurn(report)
	mustNil(t, err)
	step(t, se, "a3", "I will fix the review.")
	mustNil(t, se.EndTurn(OutcomeCompleted, nil))

	// Opened again: a session is open once.
	if _, err := s.OpenSession("c1", "root"); !errors.Is(err, ErrSessionOpen) {
		t.Fatalf("second open: %v", err)
	}
	before := se.History()
	mustNil(t, se.Close())
	mustNil(t, child.Close())
	se, err = s.OpenSession("c1", "root")
	mustNil(t, err)
	if se.Repaired() != nil {
		t.Fatalf("nothing to repair, repaired %+v", se.Repaired())
	}
	if after := se.History(); len(after) != len(before) || after[len(after)-1].Message.ID() != "a3" || !after[7].Interrupted {
		t.Fatalf("history after reopening: %d entries, before %d", len(after), len(before))
	}
	turn, err = se.BeginTurn(storedMsg(t, "u4", "user", "user", "once more"))
	mustNil(t, err)
	if turn != 4 {
		t.Fatalf("turn after reopening: %d", turn)
	}
	// The first request after reopening resumes the header.
	_, err = se.BeginStep()
	mustNil(t, err)
	mustNil(t, se.Request(Request{System: "You are a coding agent.", Config: convlog.LLMConfig{Provider: "p", Model: "m"}}))
	_, evs = readEvents(t, path)
	if e := evs[len(evs)-1]; e.Type != convlog.TypeRequestHeader || !bytes.Contains(e.Data, []byte(`"reason":"resume"`)) {
		t.Fatalf("after reopening: %s %s", e.Type, e.Data)
	}
	if probs := ruleProblems(t, path); len(probs) > 0 {
		t.Fatalf("the runtime's log breaks rules: %v", probs)
	}
}

// crashedStore writes a store a crash left: a turn open in a session log
// with a tool call running, a v3 session log with an open turn, a turn the
// session log ended but the conversation log did not hear of, and a turn
// only the conversation log recorded.
func crashedStore(t *testing.T, dir string) {
	t.Helper()
	s := openTestStore(t, dir, convlog.Plain)
	defer s.Close() // the process is gone: runtime.lock is free
	se, err := s.NewConversation(NewConversation{ID: "open", Cwd: "/w", SessionID: "root", Agent: "a", Model: "m"})
	mustNil(t, err)
	p := storedMsg(t, "u1", "user", "user", "run it")
	_, err = se.BeginTurn(p)
	mustNil(t, err)
	_, err = se.BeginStep()
	mustNil(t, err)
	mustNil(t, se.Request(Request{Config: convlog.LLMConfig{Provider: "p", Model: "m"}}))
	call, err := se.BeginModelCall()
	mustNil(t, err)
	call.Reasoning(0, "run")
	call.ToolCall(1, "k1", "bash", "{}")
	mustNil(t, call.Complete("a1"))
	mustNil(t, se.ToolCall("k1"))
	mustNil(t, se.Close()) // the crash: nothing more is written

	mustNil(t, s.CreateConversation("old", "/w", []string{"a"}, []string{"m"}))
	mustNil(t, s.RegisterSession("old", "root", "a", "m", ""))
	mustNil(t, s.BeginTurn("old", "root", 1, "hello"))
	h := &convlog.Header{Type: convlog.SessionLog, Version: 3, ID: "root", CreatedAt: 1, Cwd: "/w"}
	lines := [][]byte{[]byte(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`), []byte(`{"type":"step/start","seq":1,"time":2,"data":{"turn":1,"step":1}}`)}
	mustNil(t, os.WriteFile(filepath.Join(dir, "conversations", "old", "root.v3.jsonl"), plainLog(h, lines), 0o600))

	se, err = s.NewConversation(NewConversation{ID: "ended", Cwd: "/w", SessionID: "root", Agent: "a", Model: "m"})
	mustNil(t, err)
	_, err = se.BeginTurn(p)
	mustNil(t, err)
	// The session log ends the turn; the crash keeps it from the
	// conversation log.
	mustNil(t, se.locked("Append", anytime, func() error {
		return se.record(convlog.Event{Type: convlog.TypeTurnEnd, Time: 1, Data: []byte(`{"turn":1,"reason":{"kind":"completed"}}`)})
	}))
	mustNil(t, se.Close())

	mustNil(t, s.CreateConversation("convonly", "/w", []string{"a"}, []string{"m"}))
	w, err := s.StartSession("convonly", "root", "a", "m", "")
	mustNil(t, err)
	w.Close()
	mustNil(t, s.BeginTurn("convonly", "root", 1, "hi"))

	// An interrupted deletion and a temporary file of an interrupted write.
	mustNil(t, s.CreateConversation("gone", "/w", []string{"a"}, []string{"m"}))
	mustNil(t, s.MarkDeleting("gone"))
	mustNil(t, os.WriteFile(filepath.Join(dir, "conversations", "open", ".root.v4.jsonl.0123456789abcdef.tmp"), []byte("x"), 0o600))
}

// snapshot is every file under dir with its bytes.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() && d.Name() != LockFileName {
			b, _ := os.ReadFile(p)
			out[p] = string(b)
		}
		return nil
	})
	return out
}

func TestRepair(t *testing.T) {
	dir := t.TempDir()
	crashedStore(t, dir)
	before := snapshot(t, dir)
	s := openTestStore(t, dir, convlog.Plain)
	if err := s.del("open"); !errors.Is(err, ErrTurnRunning) {
		t.Fatalf("deleting a conversation with a turn a crash left: %v", err)
	}

	dry, err := s.Repair(context.Background(), RepairOptions{DryRun: true})
	mustNil(t, err)
	if after := snapshot(t, dir); len(after) != len(before) {
		t.Fatal("a dry run changed the store")
	} else {
		for p, b := range before {
			if after[p] != b {
				t.Fatalf("a dry run changed %s", p)
			}
		}
	}
	if dry.TurnsClosed != 4 || dry.DeletionsFinished != 1 || dry.TempsRemoved != 1 || !dry.DryRun {
		t.Fatalf("dry run = %+v", dry)
	}

	var seen []ItemKind
	res, err := s.Repair(context.Background(), RepairOptions{OnEvent: func(c RepairChange) { seen = append(seen, c.Kind) }})
	mustNil(t, err)
	if res.TurnsClosed != 4 || res.DeletionsFinished != 1 || res.TempsRemoved != 1 || len(seen) != len(res.Changes) || len(res.Skipped) != 0 {
		t.Fatalf("repair = %+v", res)
	}
	byConv := map[string]*ClosedTurn{}
	for _, c := range res.Changes {
		if c.Kind == ItemTurnClosed {
			byConv[c.ID] = c.Turn
		}
	}
	if c := byConv["open"]; c == nil || strings.Join(c.Appended, " ") != "tool/result step/end turn/end" || c.ToolCalls[0] != "k1" || c.Outcome != OutcomeInterrupted {
		t.Fatalf("open: %+v", c)
	}
	if c := byConv["old"]; c == nil || !strings.HasSuffix(c.Upgraded, "root.v4.jsonl") || c.Outcome != OutcomeInterrupted {
		t.Fatalf("old: %+v", c)
	}
	if c := byConv["ended"]; c == nil || len(c.Appended) != 0 || c.Outcome != OutcomeCompleted {
		t.Fatalf("ended: %+v", c)
	}
	if c := byConv["convonly"]; c == nil || c.Outcome != OutcomeInterrupted {
		t.Fatalf("convonly: %+v", c)
	}
	// Appending only: every log that was there begins with its old bytes.
	for p, b := range before {
		if strings.HasSuffix(p, ".tmp") || strings.Contains(p, "/gone/") {
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil || !strings.HasPrefix(string(got), b) {
			t.Fatalf("%s was rewritten (%v)", p, err)
		}
	}
	for _, id := range []string{"open", "old", "ended", "convonly"} {
		if info := readInfo(t, dir, id); info.RunningTurn {
			t.Fatalf("%s still running", id)
		}
		path, err := s.sessionLogFile(id, "root")
		mustNil(t, err)
		if probs := ruleProblems(t, path); len(probs) > 0 {
			t.Fatalf("%s after repair: %v", id, probs)
		}
	}
	if _, err := os.Lstat(filepath.Join(dir, "conversations", "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("the interrupted deletion was not finished")
	}
	again, err := s.Repair(context.Background(), RepairOptions{})
	mustNil(t, err)
	if len(again.Changes) != 0 {
		t.Fatalf("a second repair changed %+v", again.Changes)
	}
	// Repaired, the conversation can be deleted.
	mustNil(t, s.del("open"))
}

// TestRepairLeavesTurnOfUnreadableSessionLog: a running turn whose session
// log is missing, a symbolic link or a FIFO is left open, the conversation
// skipped with the path and why; once the log is back, repair closes the
// turn in both logs.
func TestRepairLeavesTurnOfUnreadableSessionLog(t *testing.T) {
	for _, c := range []struct {
		name     string
		breakLog func(t *testing.T, log string)
		want     string
	}{
		{"missing", func(t *testing.T, log string) { mustNil(t, os.Rename(log, log+".away")) },
			`session "root" has a running turn (turn 1) and no session log (root[.vN].jsonl[.zst]): the turn is left open`},
		{"symbolic link", func(t *testing.T, log string) {
			mustNil(t, os.Rename(log, log+".away"))
			mustNil(t, os.Symlink(filepath.Base(log)+".away", log))
		}, `session "root" has a running turn (turn 1) and its log cannot be read (symbolic link`},
		{"FIFO", func(t *testing.T, log string) {
			mustNil(t, os.Rename(log, log+".away"))
			mustNil(t, syscall.Mkfifo(log, 0o600))
		}, `session "root" has a running turn (turn 1) and its log cannot be read (`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			crashedStore(t, dir)
			log := filepath.Join(dir, "conversations", "open", "root.v4.jsonl")
			convLog := filepath.Join(dir, "conversations", "open", "metadata.v4.jsonl")
			c.breakLog(t, log)
			before, err := os.ReadFile(convLog)
			mustNil(t, err)
			s := openTestStore(t, dir, convlog.Plain)
			defer s.Close()
			res, err := s.Repair(context.Background(), RepairOptions{})
			mustNil(t, err)
			if len(res.Skipped) != 1 || res.Skipped[0].ID != "open" || !strings.Contains(res.Skipped[0].Reason, c.want) {
				t.Fatalf("skipped %+v, want the conversation \"open\": %s", res.Skipped, c.want)
			}
			if p := res.Skipped[0].Path; p != log && p != filepath.Dir(log) {
				t.Errorf("skip names %s", p)
			}
			if res.TurnsClosed != 3 {
				t.Errorf("%d turns closed, want the other conversations' 3", res.TurnsClosed)
			}
			if after, err := os.ReadFile(convLog); err != nil || !bytes.Equal(before, after) {
				t.Fatalf("the conversation log changed (%v)", err)
			}
			// The log back, the turn is closed in both.
			if c.name != "missing" {
				mustNil(t, os.Remove(log))
			}
			mustNil(t, os.Rename(log+".away", log))
			res, err = s.Repair(context.Background(), RepairOptions{})
			mustNil(t, err)
			if len(res.Skipped) != 0 || res.TurnsClosed != 1 || readInfo(t, dir, "open").RunningTurn || len(ruleProblems(t, log)) > 0 {
				t.Fatalf("repair with the log back: %+v", res)
			}
		})
	}
}

// TestOpenSessionAfterACrash: the runtime's next open of a session closes
// the turn a crash left, upgrading an older log first (its original stays
// byte for byte).
func TestOpenSessionAfterACrash(t *testing.T) {
	dir := t.TempDir()
	crashedStore(t, dir)
	orig, err := os.ReadFile(filepath.Join(dir, "conversations", "old", "root.v3.jsonl"))
	mustNil(t, err)
	s := openTestStore(t, dir, convlog.Plain)
	se, err := s.OpenSession("old", "root")
	mustNil(t, err)
	if r := se.Repaired(); r == nil || r.Outcome != OutcomeInterrupted || strings.Join(r.Appended, " ") != "step/end turn/end" {
		t.Fatalf("repaired %+v", r)
	}
	now, _ := os.ReadFile(filepath.Join(dir, "conversations", "old", "root.v3.jsonl"))
	if !bytes.Equal(orig, now) {
		t.Fatal("the lazy upgrade changed the original")
	}
	turn, err := se.BeginTurn(storedMsg(t, "u2", "user", "user", "go on"))
	mustNil(t, err)
	if turn != 2 {
		t.Fatalf("next turn %d", turn)
	}
	path, _ := s.sessionLogFile("old", "root")
	if filepath.Base(path) != "root.v4.jsonl" || len(ruleProblems(t, path)) > 0 {
		t.Fatalf("successor %s: %v", path, ruleProblems(t, path))
	}
}

// TestOpenSessionAfterACrashBeforeTurnStart: a crash between turn/started
// in the conversation log and turn/start in the session log leaves a turn
// only the conversation log knows. Opening the session records it in the
// session log too, started and interrupted, so the next turn can be
// numbered; without that, every later BeginTurn was refused.
func TestOpenSessionAfterACrashBeforeTurnStart(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Zstd)
	se, err := s.NewConversation(NewConversation{ID: "c1", Cwd: "/home/u/p", SessionID: "root", Agent: "coder", Model: "m1"})
	mustNil(t, err)
	_, err = se.BeginTurn(storedMsg(t, "u1", "user", "user", "first"))
	mustNil(t, err)
	mustNil(t, se.EndTurn(OutcomeCompleted, nil))
	mustNil(t, se.Close())
	// What the crash left: turn 2 started in the conversation log only.
	mustNil(t, s.BeginTurn("c1", "root", 2, "second"))

	se, err = s.OpenSession("c1", "root")
	mustNil(t, err)
	r := se.Repaired()
	if r == nil || r.Turn != 2 || r.Outcome != OutcomeInterrupted || strings.Join(r.Appended, " ") != "turn/start turn/end" {
		t.Fatalf("repaired %+v", r)
	}
	turn, err := se.BeginTurn(storedMsg(t, "u2", "user", "user", "again"))
	mustNil(t, err)
	if turn != 3 {
		t.Fatalf("next turn %d, want 3", turn)
	}
	mustNil(t, se.EndTurn(OutcomeCompleted, nil))
	mustNil(t, se.Close())
	path, _ := s.sessionLogFile("c1", "root")
	if p := ruleProblems(t, path); len(p) > 0 {
		t.Fatalf("session log: %v", p)
	}
	if info := readInfo(t, dir, "c1"); info.RunningTurn || len(info.Turns) != 3 {
		t.Fatalf("conversation: running %v, turns %+v", info.RunningTurn, info.Turns)
	}
}

// TestRepairInterruptedCreate: a crash between a new conversation's session
// log and its conversation log leaves a directory holding only the first
// message's admission. Repair removes it (every check skipped it, and the id
// could not be used again); a session log that records more, whose
// conversation log is missing, is left alone.
func TestRepairInterruptedCreate(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Zstd)
	write := func(conv string, evs ...convlog.Event) string {
		t.Helper()
		cdir, err := conversationPath(dir, conv)
		mustNil(t, err)
		mustNil(t, os.MkdirAll(cdir, 0o700))
		path, err := sessLogPath(dir, conv, "root", convlog.CurrentVersion, convlog.Zstd)
		mustNil(t, err)
		for i := range evs {
			evs[i].Time = 1790000000000
		}
		h := &convlog.Header{Type: convlog.SessionLog, Version: convlog.CurrentVersion, ID: "root", CreatedAt: 1790000000000, Cwd: "/"}
		w, err := convlog.Create(path, h, evs, convlog.WriterOptions{Compression: convlog.Zstd})
		mustNil(t, err)
		mustNil(t, w.Close())
		return cdir
	}
	d, err := convlog.EncodeData(convlog.InboxSplicedData{Target: convlog.SpliceNextTurn,
		Inserted: []json.RawMessage{storedMsg(t, "u1", "user", "user", "hello").JSON()}})
	mustNil(t, err)
	admission := convlog.Event{Type: convlog.TypeInboxSpliced, Data: d}
	cut := write("cut", admission)
	kept := write("kept", admission, turnStart(1))

	dry, err := s.Repair(context.Background(), RepairOptions{DryRun: true})
	mustNil(t, err)
	if _, err := os.Stat(cut); err != nil || len(dry.Changes) != 1 || dry.Changes[0].Kind != ItemTempRemoved || dry.Changes[0].Path != cut {
		t.Fatalf("dry run: %v, %+v", err, dry)
	}
	res, err := s.Repair(context.Background(), RepairOptions{})
	mustNil(t, err)
	if len(res.Changes) != 1 || res.Changes[0].Kind != ItemTempRemoved || res.TempsRemoved != 1 {
		t.Fatalf("repair: %+v", res)
	}
	if _, err := os.Lstat(cut); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the interrupted create's directory is still there: %v", err)
	}
	if _, err := os.Stat(kept); err != nil || len(res.Skipped) != 1 || res.Skipped[0].Path != kept {
		t.Fatalf("a session log with a turn lost its conversation log: %v, skipped %+v", err, res.Skipped)
	}
	se, err := s.NewConversation(NewConversation{ID: "cut", Cwd: "/", SessionID: "root", Agent: "coder", Model: "m1"})
	mustNil(t, err)
	_, err = se.BeginTurn(storedMsg(t, "u1", "user", "user", "hello again"))
	mustNil(t, err)
	mustNil(t, se.Close())
}
