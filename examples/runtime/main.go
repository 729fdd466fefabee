// Command runtime is an example runtime: it records conversations into a
// convkit store the way an agent runtime does, with the store package's
// typed calls only (docs/RUNTIME.md walks through it).
//
//	runtime -data DIR             record one conversation of every kind of turn, then exit
//	runtime -data DIR -live 30s   hold runtime.lock and keep recording turns for 30s
//	runtime -data DIR -append N   record N steps in conversation "append", printing each once durable
//
// It writes nothing but the store, and its model, tools and clock are
// made up: what matters is what it records.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

func main() {
	data := flag.String("data", "", "the store's `DIR` (made when missing)")
	live := flag.Duration("live", 0, "hold runtime.lock and keep recording turns for `DURATION`")
	appends := flag.Int("append", 0, "record `N` steps in conversation \"append\", printing each once it is durable")
	compress := flag.String("compress", "zstd", "compression of new logs: zstd or none")
	flag.Parse()
	if *data == "" || flag.NArg() > 0 || (*compress != "zstd" && *compress != "none") {
		flag.Usage()
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	comp := convlog.Zstd
	if *compress == "none" {
		comp = convlog.Plain
	}
	err := run(ctx, os.Stdout, *data, comp, *live, *appends)
	if err != nil {
		fmt.Fprintln(os.Stderr, "runtime:", err)
		os.Exit(1)
	}
}

// failed carries the error check stops the recording at to run.
type failed struct{ err error }

// check stops the recording at the first call the store refuses: a
// runtime does not go on recording a conversation out of step.
func check(err error) {
	if err != nil {
		panic(failed{err})
	}
}

// must is check of a call that also returns a value.
func must[T any](v T, err error) T {
	check(err)
	return v
}

func run(ctx context.Context, out io.Writer, data string, comp convlog.Compression, live time.Duration, appends int) (err error) {
	defer func() {
		switch p := recover().(type) {
		case nil:
		case failed:
			err = p.err
		default:
			panic(p)
		}
	}()
	// Open: exclusively, for the whole run; the first run makes the store.
	st := must(store.Open(ctx, data, store.OpenOptions{
		Lock:        store.LockOptions{Mode: store.LockExclusive, Command: "example runtime"},
		Create:      store.CreateAlways,
		Compression: comp,
	}))
	defer st.Close()
	if appends > 0 {
		appendSteps(st, out, appends)
		return nil
	}
	// The index: brought up to date once; the store keeps it current.
	k, _, err := reindex.NewKeeper(ctx, st, reindex.KeeperOptions{
		OnError: func(err error) { fmt.Fprintln(os.Stderr, "runtime: index:", err) },
	})
	check(err)
	defer k.Close()
	if live > 0 {
		liveTurns(ctx, st, out, live)
	} else {
		record(st, out)
	}
	return nil
}

// rt is the conversation being recorded.
type rt struct {
	conv string
	n    int // message ids
}

var (
	model = convlog.LLMConfig{Provider: "deepseek", Model: "deepseek-pro"}
	bash  = convlog.ToolSchema{Name: "bash", Description: "Run a shell command",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}
	spawnAgent = convlog.ToolSchema{Name: "spawn_agent", Description: "Hand a task to a subagent",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"task": map[string]any{"type": "string"}}}}
	request = store.Request{System: "You are a coding agent. Work in the user's repository.", Config: model,
		Tools: []convlog.ToolSchema{bash, spawnAgent}}
)

// id is a fresh message id of the conversation.
func (r *rt) id(kind string) string {
	r.n++
	return fmt.Sprintf("%s-%d", kind, r.n)
}

func (r *rt) user(text string) convlog.StoredMessage {
	return must(convlog.NewUserMessage(r.id("user"), convlog.TextBlock(text)))
}

// newConversation begins conversation r.conv with its root session.
func (r *rt) newConversation(st *store.Store) *store.Session {
	return must(st.NewConversation(store.NewConversation{ID: r.conv, Cwd: "/", SessionID: "root", Agent: "coder", Model: model.Model}))
}

// answer streams text as the model would, in pieces.
func answer(call *store.ModelCall, text string) {
	for len(text) > 0 {
		n := min(len(text), 12)
		call.Text(0, text[:n])
		text = text[n:]
	}
	call.Usage(convlog.Usage{InputTokens: 1200, OutputTokens: 40})
	call.Finish(convlog.FinishReason{Kind: convlog.FinishStop})
}

// beginCall begins a step of se's running turn: its request and where it
// goes (recorded once, until it changes), then the model call.
func beginCall(se *store.Session) *store.ModelCall {
	must(se.BeginStep())
	check(se.Request(request))
	check(se.RequestContext(store.RequestContext{Provider: model.Provider, Model: model.Model, ContextWindow: 128000}))
	return must(se.BeginModelCall())
}

// step records a step of se's running turn whose model answers text ("":
// an empty answer, which the model never reads).
func (r *rt) step(se *store.Session, text string) {
	call := beginCall(se)
	answer(call, text)
	check(call.Complete(r.id("answer")))
	check(se.EndStep())
}

// lastStep is step, then the turn ends completed.
func (r *rt) lastStep(se *store.Session, text string) {
	r.step(se, text)
	check(se.EndTurn(store.OutcomeCompleted, nil))
}

// toolStep records a step whose answer asks for one tool call that returns
// result; call is the step's model call (nil: begun here), and during
// (given the call's id) records what happens while the tool runs. It
// returns the ids of the answer and of the result.
func (r *rt) toolStep(se *store.Session, call *store.ModelCall, tool, args, result string, during func(callID string)) (answerID, resultID string) {
	if call == nil {
		call = beginCall(se)
	}
	callID := r.id("call")
	call.Reasoning(0, "I will use "+tool+".")
	call.ToolCall(1, callID, tool, args[:len(args)/2])
	call.ToolCall(1, callID, "", args[len(args)/2:])
	call.Finish(convlog.FinishReason{Kind: convlog.FinishToolCalls})
	answerID, resultID = r.id("answer"), r.id("result")
	check(call.Complete(answerID))
	check(se.ToolCall(callID))
	if during != nil {
		during(callID)
	}
	check(se.ToolResult(store.ToolResult{CallID: callID, ID: resultID, Content: []convlog.Block{convlog.TextBlock(result)}}))
	check(se.EndStep())
	return answerID, resultID
}

// record records one conversation with every kind of turn, then a fork
// of it after its compaction and a rewind.
func record(st *store.Store, out io.Writer) {
	r := &rt{conv: "example-" + store.NewMessageID()[:8]}
	se := r.newConversation(st)
	defer se.Close()
	fmt.Fprintf(out, "conversation %s\n", r.conv)

	// Turn 1, complete: a model call that fails with a temporary error and
	// is retried, a tool call during which the user steers, an empty
	// answer, the final answer.
	prompt := r.user("Count the Go files in this repository")
	must(se.BeginTurn(prompt))
	call := beginCall(se)
	call.Text(0, "Let me co")
	failure := convlog.LLMFailure{Code: "stream_dropped", Message: "the stream was cut", Status: 503}
	check(call.Retry(store.Retry{Delay: time.Second, MaxRetries: 10, Failure: failure}))
	call = must(se.BeginModelCall()) // the retry
	asked, output := r.toolStep(se, call, "bash", `{"command":"ls *.go | wc -l"}`, "12", func(callID string) {
		check(se.Steer(r.user("Leave out the test files")))
		// The command's script calls a tool itself (programmatic tool calling).
		sub := must(se.Dispatch(callID, "glob", json.RawMessage(`{"pattern":"*.go"}`)))
		check(se.DispatchResult(store.DispatchResult{ID: sub, Content: []convlog.Block{convlog.TextBlock("12 files")}}))
	})
	r.step(se, "") // its request records the steering message
	r.lastStep(se, "There are 9 Go files besides the tests.")
	// A title provider names the session from its first prompt.
	check(se.TitleRequest(store.TitleRequest{Provider: "title-llm", Route: store.TitleRoute{Provider: model.Provider, Model: "deepseek-flash"},
		System: "Give the chat a short title.", MaxTokens: 32, From: []string{prompt.ID()}, Prompt: "Count the Go files in this repository"}))
	check(se.Title(store.SessionTitle{Title: "Count the Go files", From: []string{prompt.ID()}, Provider: "title-llm",
		Route: &store.TitleRoute{Provider: model.Provider, Model: "deepseek-flash"}}))
	fmt.Fprintln(out, "turn 1: completed (a retried model call, steering, an empty answer)")
	// The tool call and its output, used, give way to a note (no model).
	check(se.Prune(store.Prune{From: asked, To: output, Content: []convlog.Block{convlog.TextBlock("[bash counted 12 .go files]")}}))

	// Turn 2, complete: a subagent reviews the count, shown on a screenshot,
	// and reports back.
	screenshot := convlog.Block{Type: convlog.BlockImage, Attachment: &convlog.Attachment{ID: "shot-1", MediaType: "image/png", Bytes: 48213, Width: 1280, Height: 800}}
	turn2 := must(convlog.NewUserMessage(r.id("user"), convlog.TextBlock("Have a reviewer check the count"), screenshot))
	must(se.BeginTurn(turn2))
	var child *store.Session
	r.toolStep(se, nil, "spawn_agent", `{"task":"Check the count of Go files"}`, "reviewer-1 started", func(string) {
		child = must(se.Spawn("reviewer-1", "reviewer", "deepseek-flash"))
		must(child.BeginTurn(r.user("Check the count of Go files")))
		r.lastStep(child, "The count is right: 9.")
		// The runtime withdraws the spawn tool once the reviewer runs.
		check(se.Developer(store.Developer{ID: r.id("developer"), Removed: []string{spawnAgent.Name},
			Text: "A reviewer is running; wait for its report."}))
	})
	defer child.Close()
	must(se.SubagentReport("reviewer-1", r.id("report"), "The count is right: 9.",
		[]convlog.Block{convlog.TextBlock("reviewer-1 finished its turn: the count is right: 9.")}))
	r.lastStep(se, "The reviewer agrees: 9 Go files.")
	// The screenshot, read, is offloaded: the model no longer reads it.
	check(se.Offload(store.Offload{Message: turn2.ID(), Images: []int{0}}))
	fmt.Fprintln(out, "turn 2: completed (subagent reviewer-1 and its report)")

	// A manual compaction: turn 1 summarised, turn 2 kept.
	// The user's /compact command: its run, the compaction, its end.
	compact := must(se.Command("compact", ""))
	summary := r.id("summary")
	check(se.Compact(store.Compaction{KeepFrom: turn2.ID(), Summary: "The user asked for the Go files; there are 9 besides the tests.",
		Provider: model.Provider, Model: model.Model, CheckpointID: summary, CommandID: compact}))
	check(se.CommandDone(store.CommandResult{ID: compact, Text: "Turn 1 summarised.", Message: summary}))
	fmt.Fprintln(out, "compaction: turn 1 summarised")

	// Turn 3, interrupted while the answer streams.
	turn3 := r.user("Now rename them to snake case")
	must(se.BeginTurn(turn3))
	call = beginCall(se)
	call.Text(0, "I will rename main_test.go fir")
	check(se.Interrupt(call))
	fmt.Fprintln(out, "turn 3: interrupted")

	// Turn 4, failed: the model call fails for good.
	must(se.BeginTurn(r.user("Rename them after all")))
	failure = convlog.LLMFailure{Code: "context_length_exceeded", Message: "the request is longer than the model's context", Status: 400}
	check(beginCall(se).Fail(failure))
	check(se.EndStep())
	check(se.EndTurn(store.OutcomeFailed, &failure))
	fmt.Fprintln(out, "turn 4: failed:", failure.Message)

	// A fork after the compaction, and a rewind to turn 3's prompt.
	fork := r.conv + "-fork"
	check(se.Fork(fork, "root", ""))
	fmt.Fprintf(out, "fork %s: after the compaction\n", fork)
	rewind := r.conv + "-rewind"
	text := must(se.Rewind(rewind, "root", turn3.ID()))
	fmt.Fprintf(out, "rewind %s: %q back in the composer\n", rewind, text)
}

// liveTurns keeps recording turns, one conversation after another, until
// d has passed or ctx is done.
func liveTurns(ctx context.Context, st *store.Store, out io.Writer, d time.Duration) {
	end := time.Now().Add(d)
	fmt.Fprintln(out, "live: holding runtime.lock")
	r := &rt{}
	turns := 0
	for c := 0; time.Now().Before(end) && ctx.Err() == nil; c++ {
		r.conv = fmt.Sprintf("live-%s-%d", store.NewMessageID()[:8], c)
		se := r.newConversation(st)
		for t := 0; t < 20 && time.Now().Before(end) && ctx.Err() == nil; t++ {
			must(se.BeginTurn(r.user(fmt.Sprintf("Live turn %d", t+1))))
			r.toolStep(se, nil, "bash", `{"command":"date"}`, time.Now().UTC().Format(time.RFC3339), nil)
			time.Sleep(20 * time.Millisecond) // the model thinks
			r.lastStep(se, "Done with this turn.")
			turns++
		}
		check(se.Close())
	}
	fmt.Fprintf(out, "live: %d turns recorded\n", turns)
}

// appendSteps records n steps of a turn in conversation "append", made or
// resumed (a turn a kill left open closed first), printing "step TURN STEP
// start|end" once each is durable: the crash harness kills it and checks the
// log holds each printed step once.
func appendSteps(st *store.Store, out io.Writer, n int) {
	r := &rt{conv: "append"}
	se, err := st.OpenSession(r.conv, "root")
	if errors.Is(err, store.ErrNoConversation) {
		se, err = r.newConversation(st), nil
	}
	check(err)
	defer se.Close()
	turn := must(se.BeginTurn(must(convlog.NewUserMessage(store.NewMessageID(), convlog.TextBlock("Append steps")))))
	for i := 0; i < n; i++ {
		step := must(se.BeginStep())
		fmt.Fprintf(out, "step %d %d start\n", turn, step)
		check(se.EndStep())
		fmt.Fprintf(out, "step %d %d end\n", turn, step)
	}
	check(se.EndTurn(store.OutcomeCompleted, nil))
}
