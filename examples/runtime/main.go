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

func run(ctx context.Context, out io.Writer, data string, comp convlog.Compression, live time.Duration, appends int) error {
	// Open: exclusively, for the whole run; the first run makes the store.
	st, err := store.Open(ctx, data, store.OpenOptions{
		Lock:        store.LockOptions{Mode: store.LockExclusive, Command: "example runtime"},
		Create:      store.CreateAlways,
		Compression: comp,
	})
	if err != nil {
		return err
	}
	defer st.Close()
	if appends > 0 {
		return appendSteps(st, out, appends)
	}
	// The index: brought up to date once; the store keeps it current.
	k, _, err := reindex.NewKeeper(ctx, st, reindex.KeeperOptions{
		OnError: func(err error) { fmt.Fprintln(os.Stderr, "runtime: index:", err) },
	})
	if err != nil {
		return err
	}
	defer k.Close()
	if live > 0 {
		return liveTurns(ctx, st, out, live)
	}
	return record(st, out)
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
	m, err := convlog.NewUserMessage(r.id("user"), convlog.TextBlock(text))
	if err != nil {
		panic(err) // an id and a text block always make a message
	}
	return m
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

// beginCall begins a step of se's running turn: its request, then the model call.
func beginCall(se *store.Session) (*store.ModelCall, error) {
	if _, err := se.BeginStep(); err != nil {
		return nil, err
	}
	if err := se.Request(request); err != nil {
		return nil, err
	}
	return se.BeginModelCall()
}

// step records a step of se's running turn whose model answers text ("":
// an empty answer, which the model never reads).
func (r *rt) step(se *store.Session, text string) error {
	call, err := beginCall(se)
	if err != nil {
		return err
	}
	answer(call, text)
	if err := call.Complete(r.id("answer")); err != nil {
		return err
	}
	return se.EndStep()
}

// lastStep is step, then the turn ends completed.
func (r *rt) lastStep(se *store.Session, text string) error {
	if err := r.step(se, text); err != nil {
		return err
	}
	return se.EndTurn(store.OutcomeCompleted, nil)
}

// toolStep records a step whose answer asks for one tool call that returns
// result; call is the step's model call (nil: begun here), and during
// records what happens while the tool runs.
func (r *rt) toolStep(se *store.Session, call *store.ModelCall, tool, args, result string, during func() error) error {
	if call == nil {
		var err error
		if call, err = beginCall(se); err != nil {
			return err
		}
	}
	callID := r.id("call")
	call.Reasoning(0, "I will use "+tool+".")
	call.ToolCall(1, callID, tool, args[:len(args)/2])
	call.ToolCall(1, callID, "", args[len(args)/2:])
	call.Finish(convlog.FinishReason{Kind: convlog.FinishToolCalls})
	if err := call.Complete(r.id("answer")); err != nil {
		return err
	}
	if err := se.ToolCall(callID); err != nil {
		return err
	}
	if during != nil {
		if err := during(); err != nil {
			return err
		}
	}
	if err := se.ToolResult(store.ToolResult{CallID: callID, ID: r.id("result"), Content: []convlog.Block{convlog.TextBlock(result)}}); err != nil {
		return err
	}
	return se.EndStep()
}

// record records one conversation with every kind of turn, then a fork
// of it after its compaction and a rewind.
func record(st *store.Store, out io.Writer) error {
	r := &rt{conv: "example-" + store.NewMessageID()[:8]}
	se, err := st.NewConversation(store.NewConversation{ID: r.conv, Cwd: "/", SessionID: "root", Agent: "coder", Model: model.Model})
	if err != nil {
		return err
	}
	defer se.Close()
	fmt.Fprintf(out, "conversation %s\n", r.conv)

	// Turn 1, complete: a model call that fails with a temporary error and
	// is retried, a tool call during which the user steers, an empty
	// answer, the final answer.
	if _, err := se.BeginTurn(r.user("Count the Go files in this repository")); err != nil {
		return err
	}
	call, err := beginCall(se)
	if err != nil {
		return err
	}
	call.Text(0, "Let me co")
	failure := convlog.LLMFailure{Code: "stream_dropped", Message: "the stream was cut", Status: 503}
	if err := call.Retry(store.Retry{Delay: time.Second, MaxRetries: 10, Failure: failure}); err != nil {
		return err
	}
	if call, err = se.BeginModelCall(); err != nil { // the retry
		return err
	}
	err = r.toolStep(se, call, "bash", `{"command":"ls *.go | wc -l"}`, "12", func() error {
		return se.Steer(r.user("Leave out the test files"))
	})
	if err != nil {
		return err
	}
	if err := r.step(se, ""); err != nil { // its request records the steering message
		return err
	}
	if err := r.lastStep(se, "There are 9 Go files besides the tests."); err != nil {
		return err
	}
	fmt.Fprintln(out, "turn 1: completed (a retried model call, steering, an empty answer)")

	// Turn 2, complete: a subagent reviews the count and reports back.
	turn2 := r.user("Have a reviewer check the count")
	if _, err := se.BeginTurn(turn2); err != nil {
		return err
	}
	var child *store.Session
	err = r.toolStep(se, nil, "spawn_agent", `{"task":"Check the count of Go files"}`, "reviewer-1 started", func() error {
		var err error
		if child, err = se.Spawn("reviewer-1", "reviewer", "deepseek-flash"); err != nil {
			return err
		}
		if _, err := child.BeginTurn(r.user("Check the count of Go files")); err != nil {
			return err
		}
		return r.lastStep(child, "The count is right: 9.")
	})
	if err != nil {
		return err
	}
	defer child.Close()
	if _, err := se.SubagentReport("reviewer-1", r.id("report"), "The count is right: 9.",
		[]convlog.Block{convlog.TextBlock("reviewer-1 finished its turn: the count is right: 9.")}); err != nil {
		return err
	}
	if err := r.lastStep(se, "The reviewer agrees: 9 Go files."); err != nil {
		return err
	}
	fmt.Fprintln(out, "turn 2: completed (subagent reviewer-1 and its report)")

	// A manual compaction: turn 1 summarised, turn 2 kept.
	if err := se.Compact(store.Compaction{KeepFrom: turn2.ID(), Summary: "The user asked for the Go files; there are 9 besides the tests.",
		Provider: model.Provider, Model: model.Model}); err != nil {
		return err
	}
	fmt.Fprintln(out, "compaction: turn 1 summarised")

	// Turn 3, interrupted while the answer streams.
	turn3 := r.user("Now rename them to snake case")
	if _, err := se.BeginTurn(turn3); err != nil {
		return err
	}
	if call, err = beginCall(se); err != nil {
		return err
	}
	call.Text(0, "I will rename main_test.go fir")
	if err := se.Interrupt(call); err != nil {
		return err
	}
	fmt.Fprintln(out, "turn 3: interrupted")

	// Turn 4, failed: the model call fails for good.
	if _, err := se.BeginTurn(r.user("Rename them after all")); err != nil {
		return err
	}
	if call, err = beginCall(se); err != nil {
		return err
	}
	failure = convlog.LLMFailure{Code: "context_length_exceeded", Message: "the request is longer than the model's context", Status: 400}
	if err := call.Fail(failure); err != nil {
		return err
	}
	if err := se.EndStep(); err != nil {
		return err
	}
	if err := se.EndTurn(store.OutcomeFailed, &failure); err != nil {
		return err
	}
	fmt.Fprintln(out, "turn 4: failed:", failure.Message)

	// A fork after the compaction, and a rewind to turn 3's prompt.
	fork := r.conv + "-fork"
	if err := se.Fork(fork, "root", ""); err != nil {
		return err
	}
	fmt.Fprintf(out, "fork %s: after the compaction\n", fork)
	rewind := r.conv + "-rewind"
	text, err := se.Rewind(rewind, "root", turn3.ID())
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "rewind %s: %q back in the composer\n", rewind, text)
	return nil
}

// liveTurns keeps recording turns, one conversation after another, until
// d has passed or ctx is done.
func liveTurns(ctx context.Context, st *store.Store, out io.Writer, d time.Duration) error {
	end := time.Now().Add(d)
	fmt.Fprintln(out, "live: holding runtime.lock")
	r := &rt{}
	turns := 0
	for c := 0; time.Now().Before(end) && ctx.Err() == nil; c++ {
		r.conv = fmt.Sprintf("live-%s-%d", store.NewMessageID()[:8], c)
		se, err := st.NewConversation(store.NewConversation{ID: r.conv, Cwd: "/", SessionID: "root", Agent: "coder", Model: model.Model})
		if err != nil {
			return err
		}
		for t := 0; t < 20 && time.Now().Before(end) && ctx.Err() == nil; t++ {
			if _, err := se.BeginTurn(r.user(fmt.Sprintf("Live turn %d", t+1))); err != nil {
				return err
			}
			if err := r.toolStep(se, nil, "bash", `{"command":"date"}`, time.Now().UTC().Format(time.RFC3339), nil); err != nil {
				return err
			}
			time.Sleep(20 * time.Millisecond) // the model thinks
			if err := r.lastStep(se, "Done with this turn."); err != nil {
				return err
			}
			turns++
		}
		if err := se.Close(); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "live: %d turns recorded\n", turns)
	return nil
}

// appendSteps records n steps of a turn in conversation "append", made or
// resumed (a turn a kill left open closed first), printing "step TURN STEP
// start|end" once each is durable: the crash harness kills it and checks the
// log holds each printed step once.
func appendSteps(st *store.Store, out io.Writer, n int) error {
	const conv = "append"
	se, err := st.OpenSession(conv, "root")
	if errors.Is(err, store.ErrNoConversation) {
		se, err = st.NewConversation(store.NewConversation{ID: conv, Cwd: "/", SessionID: "root", Agent: "coder", Model: model.Model})
	}
	if err != nil {
		return err
	}
	defer se.Close()
	prompt, err := convlog.NewUserMessage(store.NewMessageID(), convlog.TextBlock("Append steps"))
	if err != nil {
		return err
	}
	turn, err := se.BeginTurn(prompt)
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		step, err := se.BeginStep()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "step %d %d start\n", turn, step)
		if err := se.EndStep(); err != nil {
			return err
		}
		fmt.Fprintf(out, "step %d %d end\n", turn, step)
	}
	return se.EndTurn(store.OutcomeCompleted, nil)
}
