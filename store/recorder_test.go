package store

import (
	"bytes"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/rawjson"
)

// historyIDs is the ids of the history the model reads.
func historyIDs(se *Session) string {
	var ids []string
	for _, h := range se.History() {
		ids = append(ids, h.Message.ID())
	}
	return strings.Join(ids, " ")
}

// TestCompactionForkRewind: a compaction by message id (a summary of the
// older history, the recent part kept), a fork after it, which reads its
// older history from the source, and a rewind by message id, which leaves
// the rewound prompt and its admission out.
func TestCompactionForkRewind(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Zstd)
	se, err := s.NewConversation(NewConversation{ID: "c", Cwd: "/w", SessionID: "root", Agent: "a", Model: "m"})
	mustNil(t, err)
	for i, id := range []string{"u1", "u2", "u3"} {
		_, err := se.BeginTurn(storedMsg(t, id, "user", "user", "prompt "+id))
		mustNil(t, err)
		step(t, se, "a"+id[1:], "")
		if i == 1 {
			// An empty answer stays in the record, out of the history.
			step(t, se, "a2b", "answer 2")
		}
		mustNil(t, se.EndTurn(OutcomeCompleted, nil))
	}
	sys := se.History()[0].Message.ID()
	if got := historyIDs(se); got != sys+" u1 u2 a2b u3" {
		t.Fatalf("history %s", got)
	}
	// Manual: the history up to u3 summarised, u3 and after kept.
	mustNil(t, se.Compact(Compaction{ID: "k1", KeepFrom: "u3", Summary: "Turns 1 and 2 asked for prompts.", Provider: "p", Model: "m",
		CheckpointID: "sum1"}))
	if got := historyIDs(se); got != sys+" sum1 u3" {
		t.Fatalf("history after compaction %s", got)
	}
	path, _ := s.sessionLogFile("c", "root")
	_, evs := readEvents(t, path)
	n := len(evs)
	if got := eventTypes(evs[n-4:]); got != "compaction/start compaction/summary user/message compaction/end" {
		t.Fatalf("compaction recorded as %s", got)
	}
	// The span is every node between the system prompt and u3, the empty
	// answers of turns 1 and 2 included.
	if !bytes.Contains(evs[n-3].Data, []byte(`"turn":null`)) && !bytes.Contains(evs[n-4].Data, []byte(`"turn":null`)) {
		t.Errorf("a manual compaction's turn is not null: %s", evs[n-4].Data)
	}
	var spanTypes []string
	for _, q := range evs[n-2].SourceEventSeqs {
		spanTypes = append(spanTypes, evs[q].Type)
	}
	if got := strings.Join(spanTypes, " "); got != "user/message assistant/message user/message assistant/message assistant/message" {
		t.Fatalf("compaction shadows %s", got)
	}
	if probs := ruleProblems(t, path); len(probs) > 0 {
		t.Fatal(probs)
	}

	// An automatic one, inside a turn, before its model call; the next
	// request starts a new series.
	_, err = se.BeginTurn(storedMsg(t, "u4", "user", "user", "prompt u4"))
	mustNil(t, err)
	_, err = se.BeginStep()
	mustNil(t, err)
	mustNil(t, se.Compact(Compaction{KeepFrom: "u3", Summary: "Cumulative.", Provider: "p", Model: "m", CheckpointID: "sum2"}))
	mustNil(t, se.Request(Request{System: "You are a coding agent.", Config: convlog.LLMConfig{Provider: "p", Model: "m"}}))
	_, evs = readEvents(t, path)
	if e := evs[len(evs)-1]; e.Type != convlog.TypeRequestHeader || !bytes.Contains(e.Data, []byte(`"reason":"series"`)) {
		t.Fatalf("after a compaction: %s %s", e.Type, e.Data)
	}
	call, err := se.BeginModelCall()
	mustNil(t, err)
	call.Text(0, "Four.")
	mustNil(t, call.Complete("a4"))
	mustNil(t, se.EndStep())
	mustNil(t, se.EndTurn(OutcomeCompleted, nil))
	if got := historyIDs(se); got != sys+" sum2 u3 u4 a4" {
		t.Fatalf("history after the second compaction %s", got)
	}

	// A fork after it reads the compacted history, and depends on c.
	mustNil(t, se.Fork("f", "root", ""))
	finfo := readInfo(t, dir, "f")
	if !finfo.AfterCompaction || strings.Join(Dependencies(finfo), ",") != "c" {
		t.Fatalf("fork after compaction: %+v", finfo)
	}
	fs, err := s.OpenSession("f", "root")
	mustNil(t, err)
	if got := historyIDs(fs); got != sys+" sum2 u3 u4 a4" {
		t.Fatalf("the fork's history %s", got)
	}
	_, err = fs.BeginTurn(storedMsg(t, "u5", "user", "user", "continue here"))
	mustNil(t, err)
	step(t, fs, "a5", "Five.")
	mustNil(t, fs.EndTurn(OutcomeCompleted, nil))
	fpath, _ := s.sessionLogFile("f", "root")
	if probs := ruleProblems(t, fpath); len(probs) > 0 {
		t.Fatal(probs)
	}

	// A rewind to u2, which the compaction shadows: a copy of the log up to
	// u2's turn, without u2 and its admission.
	text, err := se.Rewind("r", "root", "u2")
	mustNil(t, err)
	if text != "prompt u2" {
		t.Fatalf("composer %q", text)
	}
	rpath, _ := s.sessionLogFile("r", "root")
	_, revs := readEvents(t, rpath)
	if last := revs[len(revs)-1]; last.Type != convlog.TypeTurnEnd || string(last.Data) != `{"turn":1,"reason":{"kind":"completed"}}` {
		t.Fatalf("the rewound log ends with %s %s", last.Type, last.Data)
	}
	for _, e := range revs {
		if bytes.Contains(e.Data, []byte(`"id":"u2"`)) {
			t.Fatalf("the rewound log holds u2 at seq %d (%s)", e.Seq, e.Type)
		}
	}
	rs, err := s.OpenSession("r", "root")
	mustNil(t, err)
	if got := historyIDs(rs); got != sys+" u1" {
		t.Fatalf("the rewind's history %s", got)
	}
	if _, err := rs.BeginTurn(storedMsg(t, "u2b", "user", "user", "prompt u2, edited")); err != nil {
		t.Fatal(err)
	}
	// A rewind to a message the rewound source holds after a compaction:
	// the fork reads the compacted history.
	if _, err := se.Rewind("r2", "root", "u4"); err != nil {
		t.Fatal(err)
	}
}

// TestBatch: the calls inside Batch are one durable append: one zstd
// frame, nothing on disk until it ends; a call that writes the
// conversation log writes what the batch held first.
func TestBatch(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Zstd)
	se, err := s.NewConversation(NewConversation{ID: "c", Cwd: "/w", SessionID: "root", Agent: "a", Model: "m"})
	mustNil(t, err)
	_, err = se.BeginTurn(storedMsg(t, "u1", "user", "user", "hi"))
	mustNil(t, err)
	path, _ := s.sessionLogFile("c", "root")
	frames := func() int {
		r, err := convlog.Open(path, convlog.ReaderOptions{})
		mustNil(t, err)
		defer r.Close()
		for _, err := range r.Events() {
			if err != nil {
				break
			}
		}
		return int(r.Stats().Frames)
	}
	before := frames()
	var mid int
	err = se.Batch(func() error {
		if _, err := se.BeginStep(); err != nil {
			return err
		}
		if err := se.Request(Request{System: "sys", Config: convlog.LLMConfig{Provider: "p", Model: "m"}}); err != nil {
			return err
		}
		call, err := se.BeginModelCall()
		if err != nil {
			return err
		}
		call.Text(0, "hello")
		if err := call.Complete("a1"); err != nil {
			return err
		}
		mid = frames()
		return se.EndStep()
	})
	mustNil(t, err)
	after := frames()
	if mid != before || after != before+1 {
		t.Fatalf("frames before %d, inside the batch %d, after %d: want one frame for the batch", before, mid, after)
	}
	// EndTurn inside a batch: the session log's events reach the disk
	// before the conversation log hears of the end.
	mustNil(t, se.Batch(func() error { return se.EndTurn(OutcomeCompleted, nil) }))
	if info := readInfo(t, dir, "c"); info.RunningTurn {
		t.Fatal("still running")
	}
	if probs := ruleProblems(t, path); len(probs) > 0 {
		t.Fatal(probs)
	}
	// A failing call inside the batch returns its error; what came before
	// it is written.
	_, err = se.BeginTurn(storedMsg(t, "u2", "user", "user", "again"))
	mustNil(t, err)
	err = se.Batch(func() error {
		if _, err := se.BeginStep(); err != nil {
			return err
		}
		return se.ToolCall("nope")
	})
	if !errors.Is(err, ErrUnknownCall) {
		t.Fatalf("batch error %v", err)
	}
	if ts := se.Turn(); !ts.StepOpen {
		t.Fatalf("the step the batch opened was not written: %+v", ts)
	}
	// An event the format refuses is refused at its call inside a batch:
	// nothing of the batch is written, and the session must be opened again.
	fi, err := os.Stat(path)
	mustNil(t, err)
	var appendErr error
	err = se.Batch(func() error {
		mustNil(t, se.EndStep())
		appendErr = se.Append(convlog.Event{Type: "session-log-deepseek/delivery-accepted", Data: []byte(`{}`)})
		return nil
	})
	var rule *convlog.RuleError
	if !errors.As(appendErr, &rule) || !errors.Is(err, ErrClosed) {
		t.Fatalf("Append in the batch: %v, the batch: %v; want a *convlog.RuleError, then ErrClosed", appendErr, err)
	}
	if after, err := os.Stat(path); err != nil || after.Size() != fi.Size() {
		t.Fatalf("the refused batch wrote %d bytes (%v)", after.Size()-fi.Size(), err)
	}
	if _, err := se.BeginStep(); !errors.Is(err, ErrClosed) {
		t.Fatalf("after the refused batch: %v, want ErrClosed", err)
	}
}

// changeLog is an IndexKeeper keeping the messages and session states it
// was told, in order.
type changeLog struct {
	messages []string
	sessions []SessionLogState
}

func (k *changeLog) Changed(ch *IndexChange) {
	for _, m := range ch.Messages {
		k.messages = append(k.messages, str(rawjson.Get(convlog.MessageOf(&m.Event), "id")))
	}
	k.sessions = append(k.sessions, ch.Sessions...)
}

// TestBatchIndexedOnceWritten: the index hears of a batch's messages only
// once the batch is written, though another session tells it of a change
// while the batch runs.
func TestBatchIndexedOnceWritten(t *testing.T) {
	s := openTestStore(t, t.TempDir(), convlog.Plain)
	k := &changeLog{}
	s.SetIndexKeeper(k)
	se, err := s.NewConversation(NewConversation{ID: "c", Cwd: "/w", SessionID: "root", Agent: "a", Model: "m"})
	mustNil(t, err)
	_, err = se.BeginTurn(storedMsg(t, "u1", "user", "user", "hi"))
	mustNil(t, err)
	child, err := se.Spawn("child", "reviewer", "m")
	mustNil(t, err)
	var during changeLog
	mustNil(t, se.Batch(func() error {
		step(t, se, "a1", "done")
		_, err := child.BeginTurn(storedMsg(t, "t1", "user", "user", "task"))
		during = *k
		return err
	}))
	if slices.Contains(during.messages, "a1") {
		t.Fatalf("the index heard of the batch's answer before it was written: %v", during.messages)
	}
	for _, l := range during.sessions {
		if fi, err := os.Stat(l.Path); err != nil || l.Bytes > fi.Size() {
			t.Fatalf("the index heard of %d bytes of %s before they were written (%v)", l.Bytes, l.Path, err)
		}
	}
	mustNil(t, se.EndTurn(OutcomeCompleted, nil))
	if !slices.Contains(k.messages, "a1") {
		t.Fatalf("the index never heard of the batch's answer: %v", k.messages)
	}
}

// TestRetryChain: retries of one step are one chain counted from 1, each
// begun by llm/retry-started; the turn then fails with its error.
func TestRetryChain(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	se, err := s.NewConversation(NewConversation{ID: "c", Cwd: "/w", SessionID: "root", Agent: "a", Model: "m"})
	mustNil(t, err)
	_, err = se.BeginTurn(storedMsg(t, "u1", "user", "user", "hi"))
	mustNil(t, err)
	_, err = se.BeginStep()
	mustNil(t, err)
	mustNil(t, se.Request(Request{Config: convlog.LLMConfig{Provider: "p", Model: "m"}}))
	failure := convlog.LLMFailure{Code: "stream_dropped", Message: "the stream dropped", Status: 503}
	for i := 0; i < 2; i++ {
		call, err := se.BeginModelCall()
		mustNil(t, err)
		call.Text(0, "par")
		mustNil(t, call.Retry(Retry{Delay: time.Second, MaxRetries: 2, Failure: failure}))
	}
	call, err := se.BeginModelCall()
	mustNil(t, err)
	if err := call.Retry(Retry{Delay: time.Second, MaxRetries: 2, Failure: failure}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("a third retry of two: %v", err)
	}
	mustNil(t, call.Fail(failure))
	mustNil(t, se.EndStep())
	mustNil(t, se.EndTurn(OutcomeFailed, &failure))
	path, _ := s.sessionLogFile("c", "root")
	_, evs := readEvents(t, path)
	var retries []string
	for _, e := range evs {
		switch e.Type {
		case convlog.TypeRetry, convlog.TypeRetryStarted:
			retries = append(retries, string(e.Data))
		}
	}
	want := []string{
		`{"mode":"normal","turn":1,"step":1,"provider":"p","policyKey":"default","retryId":"retry-7","retry":1,"delayMs":1000,"maxRetries":2,"failure":{"code":"stream_dropped","message":"the stream dropped","status":503}}`,
		`{"turn":1,"step":1,"retryId":"retry-7","retry":1}`,
		`{"mode":"normal","turn":1,"step":1,"provider":"p","policyKey":"default","retryId":"retry-7","retry":2,"delayMs":1000,"maxRetries":2,"failure":{"code":"stream_dropped","message":"the stream dropped","status":503}}`,
		`{"turn":1,"step":1,"retryId":"retry-7","retry":2}`,
	}
	if strings.Join(retries, "\n") != strings.Join(want, "\n") {
		t.Fatalf("retries:\n%s", strings.Join(retries, "\n"))
	}
	if info := readInfo(t, dir, "c"); info.Turns[0].Outcome != OutcomeFailed {
		t.Fatalf("outcome %q", info.Turns[0].Outcome)
	}
	if probs := ruleProblems(t, path); len(probs) > 0 {
		t.Fatal(probs)
	}
}

// TestConcurrentSessions: the sessions of several conversations (a root
// and its subagent each) record at once, beside the Store's own changes;
// every log comes out whole and in order.
func TestConcurrentSessions(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Zstd)
	const convs, turns = 4, 5
	var ses []*Session
	for i := range convs {
		se, err := s.NewConversation(NewConversation{ID: "c" + string(rune('0'+i)), Cwd: "/w", SessionID: "root", Agent: "a", Model: "m"})
		mustNil(t, err)
		_, err = se.BeginTurn(storedMsg(t, "u0", "user", "user", "start"))
		mustNil(t, err)
		step(t, se, "a0", "ok")
		mustNil(t, se.EndTurn(OutcomeCompleted, nil))
		child, err := se.Spawn("child", "r", "m")
		mustNil(t, err)
		ses = append(ses, se, child)
	}
	errs := make(chan error, len(ses)+1)
	done := make(chan struct{})
	go func() {
		// The Store's own changes run alone, between the sessions' calls.
		for i := 0; ; i++ {
			select {
			case <-done:
				errs <- nil
				return
			default:
			}
			if err := s.Rename("c0", "renamed "+string(rune('a'+i%26))); err != nil {
				errs <- err
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for _, se := range ses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 1; k <= turns; k++ {
				id := se.ID() + "-" + string(rune('0'+k))
				m, _ := convlog.NewUserMessage("u"+id, convlog.TextBlock("go"))
				if _, err := se.BeginTurn(m); err != nil {
					errs <- err
					return
				}
				if _, err := se.BeginStep(); err != nil {
					errs <- err
					return
				}
				if err := se.Request(Request{Config: convlog.LLMConfig{Provider: "p", Model: "m"}}); err != nil {
					errs <- err
					return
				}
				call, err := se.BeginModelCall()
				if err != nil {
					errs <- err
					return
				}
				call.Text(0, "done "+id)
				if err := call.Complete("a" + id); err != nil {
					errs <- err
					return
				}
				if err := se.EndStep(); err != nil {
					errs <- err
					return
				}
				if err := se.EndTurn(OutcomeCompleted, nil); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	for range 1 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	for i := range convs {
		id := "c" + string(rune('0'+i))
		info := readInfo(t, dir, id)
		if len(info.Turns) != 1+2*turns || info.RunningTurn {
			t.Fatalf("%s: %d turns, running %v", id, len(info.Turns), info.RunningTurn)
		}
		for _, sess := range []string{"root", "child"} {
			path, _ := s.sessionLogFile(id, sess)
			if probs := ruleProblems(t, path); len(probs) > 0 {
				t.Fatalf("%s %s: %v", id, sess, probs)
			}
		}
	}
}

// TestInterruptWhileStreaming: the user's interrupt comes from another
// goroutine than the one taking the model's chunks; the chunks after it
// are dropped, and what came before is kept.
func TestInterruptWhileStreaming(t *testing.T) {
	s := openTestStore(t, t.TempDir(), convlog.Plain)
	se, err := s.NewConversation(NewConversation{ID: "c", Cwd: "/w", SessionID: "root", Agent: "a", Model: "m"})
	mustNil(t, err)
	_, err = se.BeginTurn(storedMsg(t, "u1", "user", "user", "go"))
	mustNil(t, err)
	_, err = se.BeginStep()
	mustNil(t, err)
	mustNil(t, se.Request(Request{Config: convlog.LLMConfig{Provider: "p", Model: "m"}}))
	call, err := se.BeginModelCall()
	mustNil(t, err)
	call.Text(0, "first ")
	stop := make(chan struct{})
	streamed := make(chan struct{})
	go func() {
		defer close(streamed)
		for {
			select {
			case <-stop:
				return
			default:
				call.Text(0, "more ")
			}
		}
	}()
	time.Sleep(5 * time.Millisecond)
	mustNil(t, se.Interrupt(call))
	close(stop)
	<-streamed
	h := se.History()
	last := h[len(h)-1]
	_, text := convlog.MessageText(last.Message.JSON())
	if !last.Interrupted || !strings.HasPrefix(text, "first more ") {
		t.Fatalf("interrupted answer %q (%v)", text, last.Interrupted)
	}
	path, _ := s.sessionLogFile("c", "root")
	if probs := ruleProblems(t, path); len(probs) > 0 {
		t.Fatal(probs)
	}
}

// TestForkedToolResult: the result a fork writes for a tool call it cut
// off answers that call; a call without an id is an error, never a result
// whose message is null.
func TestForkedToolResult(t *testing.T) {
	e, err := forkedToolResult(2, 1, "k1", 9, 1000)
	mustNil(t, err)
	msg := rawjson.Get(e.Data, "message")
	if got := str(rawjson.Get(msg, "toolCallId")); got != "k1" || string(rawjson.Get(msg, "isError")) != "true" {
		t.Fatalf("forked result %s", e.Data)
	}
	if e, err := forkedToolResult(2, 1, "", 9, 1000); err == nil {
		t.Fatalf("a call without id gave %s", e.Data)
	}
}

// TestForkBetweenCompactions: a fork through a message recorded after one
// compaction and before the next is seeded from the first: it reads the
// history the model read at its cut, and depends on its source.
func TestForkBetweenCompactions(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	se, err := s.NewConversation(NewConversation{ID: "c", Cwd: "/w", SessionID: "root", Agent: "a", Model: "m"})
	mustNil(t, err)
	turn := func(id string) {
		_, err := se.BeginTurn(storedMsg(t, id, "user", "user", "prompt "+id))
		mustNil(t, err)
		step(t, se, "a"+id[1:], "")
		mustNil(t, se.EndTurn(OutcomeCompleted, nil))
	}
	turn("u1")
	turn("u2")
	mustNil(t, se.Compact(Compaction{ID: "k1", KeepFrom: "u2", Summary: "One.", Provider: "p", Model: "m", CheckpointID: "s1"}))
	turn("u3")
	mustNil(t, se.Compact(Compaction{ID: "k2", KeepFrom: "u3", Summary: "Two.", Provider: "p", Model: "m", CheckpointID: "s2"}))
	turn("u4")
	sys := se.History()[0].Message.ID()

	mustNil(t, se.Fork("g", "root", "a3"))
	if info := readInfo(t, dir, "g"); !info.AfterCompaction || strings.Join(Dependencies(info), ",") != "c" {
		t.Fatalf("fork between two compactions: %+v", info)
	}
	gs, err := s.OpenSession("g", "root")
	mustNil(t, err)
	if got := historyIDs(gs); got != sys+" s1 u2 u3" { // empty answers are out of it
		t.Fatalf("the fork reads %s", got)
	}
}
