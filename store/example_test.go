package store_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// msg is a stored message with one text block.
func msg(id, role string, kind convlog.SourceKind, text string) convlog.StoredMessage {
	m, err := convlog.NewStoredMessage(id, role, convlog.Source{Kind: kind}, fmt.Appendf(nil, `[{"type":"text","text":%q}]`, text))
	if err != nil {
		panic(err)
	}
	return m
}

// ev is a session log event; surface events append to the history.
func ev(typ, data string) convlog.Event {
	e := convlog.Event{Type: typ, Data: []byte(data)}
	if info := convlog.DefaultRegistry.Lookup(typ); info != nil && info.Surface {
		e.SurfaceOp = &convlog.SurfaceOp{}
	}
	return e
}

func surface(typ string, turn, step int64, m convlog.StoredMessage) convlog.Event {
	return ev(typ, fmt.Sprintf(`{"turn":%d,"step":%d,"message":%s}`, turn, step, m.JSON()))
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// The runtime's whole path: open the store, start a conversation at its
// first message, record a turn, keep the index current, resume a session
// of an older format (the lazy upgrade), and delete.
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
	prompt := msg("u1", "user", convlog.SourceUser, "List the Go files\nand count them")
	turn, err := se.BeginTurn(prompt)
	must(err)
	info, _ := st.ReadConversation("c1")
	fmt.Printf("turn %d, running %v, title %q\n", turn, info.RunningTurn, info.Title)

	// The turn's steps, one durable batch at a time.
	model := convlog.Source{Kind: convlog.SourceModel}
	ask, _ := convlog.NewStoredMessage("a1", "assistant", model,
		[]byte(`[{"type":"tool-call","id":"k1","name":"bash","arguments":"{\"command\":\"ls *.go\"}"}]`))
	// A tool result names its call (toolCallId, its source's callId).
	result, err := convlog.ParseStoredMessage([]byte(`{"role":"tool","content":[{"type":"text","text":"a.go b.go c.go"}],` +
		`"source":{"kind":"tool","callId":"k1"},"toolCallId":"k1","id":"r1"}`))
	must(err)
	must(se.Append(
		ev("step/start", `{"turn":1,"step":1}`),
		surface(convlog.TypeSystemMessage, 1, 1, msg("sys", "system", convlog.SourceSystemPrompt, "You are a coding agent.")),
		ev(convlog.TypeUserMessage, string(prompt.JSON())),
		ev("request/header", `{"header":{"config":{"provider":"p","model":"deepseek-pro"}},"reason":"initial"}`),
		surface(convlog.TypeAssistantMessage, 1, 1, ask)))
	must(se.Append(
		ev("tool/call", `{"turn":1,"step":1,"callId":"k1","name":"bash","arguments":"{\"command\":\"ls *.go\"}"}`),
		surface(convlog.TypeToolResult, 1, 1, result),
		ev("step/end", `{"turn":1,"step":1}`)))

	// What breaks a rule is refused before anything is written.
	err = se.Append(ev("request/header", `{"header":{"config":{"provider":"p","model":"m"}},"reason":"series"}`))
	fmt.Println("a request outside a step:", errors.Is(err, convlog.ErrTurnPath))
	err = se.Append(ev(convlog.TypeUserMessage, `{"role":"user","content":[]}`))
	fmt.Println("a message without identity:", errors.Is(err, convlog.ErrMessageIdentity))

	must(se.Append(
		ev("step/start", `{"turn":1,"step":2}`),
		surface(convlog.TypeAssistantMessage, 1, 2, msg("a2", "assistant", convlog.SourceModel, "3 files."))))
	must(se.Append(ev("step/end", `{"turn":1,"step":2}`)))
	must(se.EndTurn("completed"))

	// The index: built once, then one incremental update per change.
	_, err = reindex.Run(ctx, st, reindex.Options{})
	must(err)
	db, err := index.Open(st.IndexPath())
	must(err)
	defer db.Close()
	_, err = se.BeginTurn(msg("u2", "user", convlog.SourceUser, "Now delete them"))
	must(err)
	_, err = reindex.Update(ctx, db, st, "c1", reindex.UpdateOptions{})
	must(err)
	rows, _ := db.List(ctx, index.ListOptions{})
	fmt.Printf("indexed: %q, %d turns, running %v\n", rows[0].Title, rows[0].Turns, rows[0].RunningTurn)
	must(se.Interrupt(nil))
	must(se.Close())

	// A conversation of an older runtime: its session log is format v3.
	must(st.CreateConversation("old", "/home/dev/src/app", []string{"coder"}, []string{"deepseek-pro"}))
	must(st.RegisterSession("old", "root", "coder", "deepseek-pro", ""))
	h := &convlog.Header{Type: convlog.SessionLog, Version: 3, ID: "root", CreatedAt: 1790000000000, Cwd: "/home/dev/src/app"}
	conv, _ := st.ConversationPath("old")
	must(convlog.WriteHistorical(filepath.Join(conv, "root.v3.jsonl"), h, [][]byte{
		[]byte(`{"type":"turn/start","seq":0,"time":1790000000001,"data":{"turn":1}}`),
		[]byte(`{"type":"turn/end","seq":1,"time":1790000000002,"data":{"turn":1,"reason":{"kind":"completed"}}}`),
	}, convlog.Plain))
	// Resumed in one call: upgraded beside the untouched original.
	old, err := st.OpenSession("old", "root")
	must(err)
	turn, err = old.BeginTurn(msg("u1", "user", convlog.SourceUser, "Carry on"))
	must(err)
	ents, _ := os.ReadDir(conv)
	for _, e := range ents {
		fmt.Println("  ", e.Name())
	}
	fmt.Println("next turn:", turn)
	must(old.Append(ev("step/start", `{"turn":2,"step":1}`)))
	must(old.Interrupt(nil))
	must(old.Close())

	// Delete, through the dependents guard.
	must(st.Delete("c1"))
	_, err = st.ReadConversation("c1")
	fmt.Println("c1 deleted:", errors.Is(err, store.ErrNoConversation))

	// Output:
	// draft kept: false
	// turn 1, running true, title "List the Go files"
	// a request outside a step: true
	// a message without identity: true
	// indexed: "List the Go files", 2 turns, running true
	//    metadata.v4.jsonl
	//    root.v3.jsonl
	//    root.v4.jsonl
	// next turn: 2
	// c1 deleted: true
}
