package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/store"
)

// started opens a new store in a temporary directory and starts
// conversation id at its first message; done removes it all.
func started(id, prompt string) (st *store.Store, se *store.Session, done func()) {
	dir, _ := os.MkdirTemp("", "recorder-")
	st, err := store.Open(context.Background(), filepath.Join(dir, "data"), store.OpenOptions{
		Lock: store.LockOptions{Mode: store.LockExclusive, Command: "runtime"}, Create: store.CreateAlways})
	must(err)
	se, err = st.NewConversation(store.NewConversation{ID: id, Cwd: "/home/dev/src/app", SessionID: "root", Agent: "coder", Model: "deepseek-pro"})
	must(err)
	_, err = se.BeginTurn(user("u1", prompt))
	must(err)
	return st, se, func() { st.Close(); os.RemoveAll(dir) }
}

var deepseek = store.Request{System: "You are a coding agent.", Config: convlog.LLMConfig{Provider: "deepseek", Model: "deepseek-pro"}}

// logTypes is the types of the events of a session log from seq from on.
func logTypes(st *store.Store, conv, session string, from int64) string {
	l, err := st.FindLog(conv, session)
	must(err)
	r, err := l.Open(convlog.ReaderOptions{})
	must(err)
	defer r.Close()
	var types []string
	for e, err := range r.Events() {
		must(err)
		if e.Seq >= from {
			types = append(types, e.Type)
		}
	}
	return strings.Join(types, " ")
}

// A model call that fails with a temporary error is recorded as an
// attempt and a retry; the next call of the step is the retry.
func ExampleModelCall_Retry() {
	st, se, done := started("c1", "Count the Go files")
	defer done()
	_, err := se.BeginStep()
	must(err)
	must(se.Request(deepseek))
	from := se.NextSeq()
	call, err := se.BeginModelCall()
	must(err)
	call.Text(0, "Let me")
	must(call.Retry(store.Retry{Delay: 2 * time.Second, MaxRetries: 10,
		Failure: convlog.LLMFailure{Code: "stream_dropped", Message: "the stream was cut", Status: 503}}))
	call, err = se.BeginModelCall()
	must(err)
	call.Text(0, "There are 3.")
	call.Usage(convlog.Usage{InputTokens: 210, OutputTokens: 5})
	call.Finish(convlog.FinishReason{Kind: convlog.FinishStop})
	must(call.Complete("a1"))
	must(se.EndStep())
	must(se.EndTurn(store.OutcomeCompleted, nil))
	fmt.Println(logTypes(st, "c1", "root", from))
	// Output:
	// assistant/attempt llm/retry llm/retry-started assistant/message step/end turn/end
}

// A compaction summarises the older history; the recent part, from the
// message kept, stays as it was.
func ExampleSession_Compact() {
	_, se, done := started("c1", "Count the Go files")
	defer done()
	for i, answer := range []string{"There are 3.", "2 of them are tests."} {
		if i > 0 {
			_, err := se.BeginTurn(user("u2", "How many are tests?"))
			must(err)
		}
		_, err := se.BeginStep()
		must(err)
		must(se.Request(deepseek))
		call, err := se.BeginModelCall()
		must(err)
		call.Text(0, answer)
		must(call.Complete(fmt.Sprintf("a%d", i+1)))
		must(se.EndStep())
		must(se.EndTurn(store.OutcomeCompleted, nil))
	}
	must(se.Compact(store.Compaction{KeepFrom: "u2", Summary: "The user has 3 Go files.", Provider: "deepseek", Model: "deepseek-flash"}))
	for _, h := range se.History() {
		_, text := convlog.MessageText(h.Message.JSON())
		fmt.Printf("%s (%s): %s\n", h.Message.Role(), h.Message.Source().Kind, text)
	}
	// Output:
	// system (system-prompt): You are a coding agent.
	// user (compact-checkpoint): The user has 3 Go files.
	// user (user): How many are tests?
	// assistant (model): 2 of them are tests.
}

// The user's interrupt keeps what the model had streamed, marked
// interrupted in the history the next turn's model reads, and ends the
// turn as interrupted.
func ExampleSession_Interrupt() {
	st, se, done := started("c1", "Rename the files")
	defer done()
	_, err := se.BeginStep()
	must(err)
	must(se.Request(deepseek))
	call, err := se.BeginModelCall()
	must(err)
	call.Text(0, "I will rename a.go to ")
	must(se.Interrupt(call))
	for _, h := range se.History()[1:] {
		_, text := convlog.MessageText(h.Message.JSON())
		fmt.Printf("%s %q interrupted=%v\n", h.Message.Role(), text, h.Interrupted)
	}
	info, err := st.Conversation("c1")
	must(err)
	fmt.Println("turn outcome interrupted:", info.Turns[0].Outcome == store.OutcomeInterrupted)
	// Output:
	// user "Rename the files" interrupted=false
	// assistant "I will rename a.go to " interrupted=true
	// turn outcome interrupted: true
}

// A rewind is a fork that stops just before one of the user's messages,
// named by its id, and gives its text back for the composer.
func ExampleSession_Rewind() {
	st, se, done := started("c1", "Count the Go files")
	defer done()
	_, err := se.BeginStep()
	must(err)
	must(se.Request(deepseek))
	call, err := se.BeginModelCall()
	must(err)
	call.Text(0, "There are 3.")
	must(call.Complete("a1"))
	must(se.EndStep())
	must(se.EndTurn(store.OutcomeCompleted, nil))
	_, err = se.BeginTurn(user("u2", "Delete the tests"))
	must(err)
	_, err = se.BeginStep()
	must(err)
	must(se.Request(deepseek))
	must(se.Interrupt(nil))

	composer, err := se.Rewind("c2", "root", "u2")
	must(err)
	fmt.Printf("composer: %q\n", composer)
	fmt.Println("c2:", logTypes(st, "c2", "root", 0))
	// Output:
	// composer: "Delete the tests"
	// c2: agent/inbox/spliced turn/start step/start system/message user/message request/header assistant/message step/end turn/end
}
