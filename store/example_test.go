package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func user(id, text string) convlog.StoredMessage {
	m, err := convlog.NewUserMessage(id, convlog.TextBlock(text))
	must(err)
	return m
}

// The runtime's whole path: open the store, start a conversation at its
// first message, record a turn with a typed call for each stage, resume a
// session of an older format (the lazy upgrade), and delete.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "runtime-")
	defer os.RemoveAll(dir)
	dataDir := filepath.Join(dir, "data")

	// Open: exclusively, for the runtime's whole run; the first run makes
	// the store.
	st, err := store.Open(ctx, dataDir, store.OpenOptions{
		Lock:   store.LockOptions{Mode: store.LockExclusive, Command: "runtime"},
		Create: store.CreateAlways,
	})
	must(err)
	defer st.Close()

	// A conversation opened and left without a message is not kept.
	se, err := st.NewConversation(store.NewConversation{ID: "draft", Cwd: "/home/dev/src/app", SessionID: "root", Agent: "coder", Model: "deepseek-pro"})
	must(err)
	must(se.Close())
	_, err = st.ReadConversation("draft")
	fmt.Println("draft kept:", err == nil)

	// Its first message keeps it: admitted, running, the turn starts.
	se, err = st.NewConversation(store.NewConversation{ID: "c1", Cwd: "/home/dev/src/app", SessionID: "root", Agent: "coder", Model: "deepseek-pro"})
	must(err)
	turn, err := se.BeginTurn(user("u1", "List the Go files\nand count them"))
	must(err)
	info, _ := st.ReadConversation("c1")
	fmt.Printf("turn %d, running %v, title %q\n", turn, info.RunningTurn, info.Title)

	// A step: the request (with the system prompt and the prompt), the
	// answer as it streams in, the tool call it asked for and its result.
	req := store.Request{
		System: "You are a coding agent.",
		Config: convlog.LLMConfig{Provider: "deepseek", Model: "deepseek-pro"},
		Tools: []convlog.ToolSchema{{Name: "bash", Description: "Run a shell command",
			Parameters: map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}}}},
	}
	_, err = se.BeginStep()
	must(err)
	must(se.Request(req))
	call, err := se.BeginModelCall()
	must(err)
	call.ToolCall(0, "k1", "bash", `{"command":"ls *.go"}`)
	call.Usage(convlog.Usage{InputTokens: 120, OutputTokens: 14})
	call.Finish(convlog.FinishReason{Kind: convlog.FinishToolCalls})
	must(call.Complete("a1"))
	must(se.ToolCall("k1"))
	must(se.ToolResult(store.ToolResult{CallID: "k1", ID: "r1", Content: []convlog.Block{convlog.TextBlock("a.go b.go c.go")}}))
	must(se.EndStep())

	// A call out of place is refused before anything is written.
	err = se.ToolCall("k1")
	fmt.Println("a tool call outside a step:", errors.Is(err, store.ErrOrder))
	_, err = se.BeginStep()
	must(err)
	err = se.ToolResult(store.ToolResult{CallID: "k9", ID: "r9"})
	fmt.Println("a result for a call never made:", errors.Is(err, store.ErrUnknownCall))

	must(se.Request(req)) // the same header: nothing new to record
	call, err = se.BeginModelCall()
	must(err)
	call.Text(0, "3 files.")
	must(call.Complete("a2"))
	must(se.EndStep())
	must(se.EndTurn(store.OutcomeCompleted, nil))
	for _, h := range se.History() {
		_, text := convlog.MessageText(h.Message.JSON())
		fmt.Printf("  %-9s %q\n", h.Message.Role(), text)
	}

	// The index: brought up to date once, then kept current by the store.
	k, _, err := reindex.NewKeeper(ctx, st, reindex.KeeperOptions{})
	must(err)
	defer k.Close()
	_, err = se.BeginTurn(user("u2", "Now delete them"))
	must(err)
	reader, _ := store.Open(ctx, dataDir, store.OpenOptions{}) // as convkit list opens it
	l, _ := reindex.List(ctx, reader, reindex.ListOptions{})
	r := l.Conversations[0]
	fmt.Printf("listed from the %s: %q, %d turns, running %v\n", l.Source, r.Title, r.Turns, r.RunningTurn)
	must(se.Interrupt(nil))
	must(se.Close())

	// A conversation of an older runtime: its session log is format v3.
	must(st.CreateConversation("old", "/home/dev/src/app", []string{"coder"}, []string{"deepseek-pro"}))
	must(st.RegisterSession("old", "root", "coder", "deepseek-pro", ""))
	h := &convlog.Header{Type: convlog.SessionLog, Version: 3, ID: "root", CreatedAt: 1790000000000, Cwd: "/home/dev/src/app"}
	conv, _ := st.ConversationPath("old")
	must(os.WriteFile(filepath.Join(conv, "root.v3.jsonl"), append(h.AppendJSON(nil), "\n"+
		`{"type":"turn/start","seq":0,"time":1790000000001,"data":{"turn":1}}`+"\n"+
		`{"type":"turn/end","seq":1,"time":1790000000002,"data":{"turn":1,"reason":{"kind":"completed"}}}`+"\n"...), 0o600))
	// Resumed in one call: upgraded beside the untouched original.
	old, err := st.OpenSession("old", "root")
	must(err)
	turn, err = old.BeginTurn(user("u1", "Carry on"))
	must(err)
	ents, _ := os.ReadDir(conv)
	for _, e := range ents {
		fmt.Println("  ", e.Name())
	}
	fmt.Println("next turn:", turn)
	_, err = old.BeginStep()
	must(err)
	must(old.Interrupt(nil))
	must(old.Close())

	// Delete, through the dependents guard.
	must(st.DeleteAll(context.Background(), []string{"c1"}, store.DeleteOptions{}))
	_, err = st.ReadConversation("c1")
	fmt.Println("c1 deleted:", errors.Is(err, store.ErrNoConversation))

	// Output:
	// draft kept: false
	// turn 1, running true, title "List the Go files"
	// a tool call outside a step: true
	// a result for a call never made: true
	//   system    "You are a coding agent."
	//   user      "List the Go files\nand count them"
	//   assistant ""
	//   tool      "a.go b.go c.go"
	//   assistant "3 files."
	// listed from the index: "List the Go files", 2 turns, running true
	//    metadata.v4.jsonl
	//    root.v3.jsonl
	//    root.v4.jsonl
	// next turn: 2
	// c1 deleted: true
}
