package store

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convkit/convkit/convlog"
)

// misuseFixture is a session in a given state, in a store of its own.
type misuseFixture struct {
	s     *Store
	se    *Session
	child *Session
	call  *ModelCall
	dir   string
	conv  string // the conversation se records ("": c)
	cmd   string // a command run by runCommand
}

func runCommand(t *testing.T, f *misuseFixture) {
	var err error
	f.cmd, err = f.se.Command("clear", "")
	mustNil(t, err)
}

// toState brings a session to state, where a misuse can be tried: idle
// after a completed turn (with a subagent), in a step after its request,
// after an answer that asked for tool call k1, after k1 started, and while
// a model call streams.
func toState(t *testing.T, f *misuseFixture, state string) {
	switch state {
	case "idle":
	case "step":
		_, err := f.se.BeginTurn(storedMsg(t, "u2", "user", "user", "go on"))
		mustNil(t, err)
		_, err = f.se.BeginStep()
		mustNil(t, err)
		mustNil(t, f.se.Request(Request{System: "sys", Config: convlog.LLMConfig{Provider: "p", Model: "m"}}))
	case "asked":
		toState(t, f, "step")
		call, err := f.se.BeginModelCall()
		mustNil(t, err)
		call.ToolCall(0, "k1", "bash", `{"command":"ls"}`)
		mustNil(t, call.Complete("a2"))
	case "started":
		toState(t, f, "asked")
		mustNil(t, f.se.ToolCall("k1"))
	case "streaming":
		toState(t, f, "step")
		call, err := f.se.BeginModelCall()
		mustNil(t, err)
		call.Text(0, "partial")
		f.call = call
	default:
		t.Fatalf("no state %q", state)
	}
}

// toSeeded makes f.se the root session of conversation s, a fork of c
// after its compaction (u1 and a1 summarised, u2 and a2 inherited), with a
// turn of its own.
func toSeeded(t *testing.T, f *misuseFixture) {
	_, err := f.se.BeginTurn(storedMsg(t, "u2", "user", "user", "second"))
	mustNil(t, err)
	step(t, f.se, "a2", "done")
	mustNil(t, f.se.EndTurn(OutcomeCompleted, nil))
	mustNil(t, f.se.Compact(Compaction{KeepFrom: "u2", Summary: "one", Provider: "p", Model: "m"}))
	mustNil(t, f.se.Fork("s", "root", ""))
	f.se, err = f.s.OpenSession("s", "root")
	mustNil(t, err)
	t.Cleanup(func() { f.se.Close() })
	_, err = f.se.BeginTurn(storedMsg(t, "u3", "user", "user", "third"))
	mustNil(t, err)
	step(t, f.se, "a3", "done")
	mustNil(t, f.se.EndTurn(OutcomeCompleted, nil))
	f.conv = "s"
}

func endStep(t *testing.T, f *misuseFixture) { mustNil(t, f.se.EndStep()) }

// imagePrompt records a completed turn whose prompt u2 holds two images.
func imagePrompt(t *testing.T, f *misuseFixture) {
	img := convlog.Block{Type: convlog.BlockImage, Attachment: &convlog.Attachment{ID: "i", MediaType: "image/png", Bytes: 9, Width: 2, Height: 2}}
	prompt, err := convlog.NewUserMessage("u2", img, convlog.TextBlock("these"), img)
	mustNil(t, err)
	_, err = f.se.BeginTurn(prompt)
	mustNil(t, err)
	step(t, f.se, "a2", "seen")
	mustNil(t, f.se.EndTurn(OutcomeCompleted, nil))
}

// dispatchThenNextTurn dispatches k1:ptc:1 from running tool call k1,
// ends the turn without its result, and starts a turn whose answer asks
// for a new tool call k1, started.
func dispatchThenNextTurn(t *testing.T, f *misuseFixture) {
	_, err := f.se.Dispatch("k1", "grep", []byte(`{}`))
	mustNil(t, err)
	mustNil(t, f.se.ToolResult(ToolResult{CallID: "k1", ID: "r1", Content: []convlog.Block{convlog.TextBlock("done")}}))
	mustNil(t, f.se.EndStep())
	mustNil(t, f.se.EndTurn(OutcomeCompleted, nil))
	_, err = f.se.BeginTurn(storedMsg(t, "u3", "user", "user", "again"))
	mustNil(t, err)
	_, err = f.se.BeginStep()
	mustNil(t, err)
	mustNil(t, f.se.Request(Request{System: "sys", Config: convlog.LLMConfig{Provider: "p", Model: "m"}}))
	call, err := f.se.BeginModelCall()
	mustNil(t, err)
	call.ToolCall(0, "k1", "bash", `{"command":"ls"}`)
	mustNil(t, call.Complete("a3"))
	mustNil(t, f.se.ToolCall("k1"))
}

func newMisuseFixture(t *testing.T, state string) *misuseFixture {
	dir := t.TempDir()
	f := &misuseFixture{s: openTestStore(t, dir, convlog.Plain), dir: dir}
	se, err := f.s.NewConversation(NewConversation{ID: "c", Cwd: "/w", SessionID: "root", Agent: "a", Model: "m"})
	mustNil(t, err)
	f.se = se
	_, err = se.BeginTurn(storedMsg(t, "u1", "user", "user", "first"))
	mustNil(t, err)
	step(t, se, "a1", "done")
	mustNil(t, se.EndTurn(OutcomeCompleted, nil))
	f.child, err = se.Spawn("child", "reviewer", "m")
	mustNil(t, err)
	toState(t, f, state)
	return f
}

// rewind rewinds to message id, which must be refused: the error names
// the id, and no conversation is created.
func (f *misuseFixture) rewind(t *testing.T, id string) error {
	t.Helper()
	_, err := f.se.Rewind("c2", "root", id)
	if err != nil && !strings.Contains(err.Error(), `"`+id+`"`) {
		t.Errorf("error %q does not name message %s", err, id)
	}
	if _, serr := os.Stat(filepath.Join(f.dir, "conversations", "c2")); !errors.Is(serr, fs.ErrNotExist) {
		t.Errorf("conversation c2: %v", serr)
	}
	return err
}

// files is every log of the conversation with its bytes.
func (f *misuseFixture) files(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	conv := cmp.Or(f.conv, "c")
	ents, err := os.ReadDir(filepath.Join(f.dir, "conversations", conv))
	mustNil(t, err)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(f.dir, "conversations", conv, e.Name()))
		mustNil(t, err)
		out[e.Name()] = string(b)
	}
	return out
}

// TestRecorderRefusesMisuse: each wrong shape the typed calls can still be
// handed is refused with a *RecordError of its kind, and nothing is
// written.
func TestRecorderRefusesMisuse(t *testing.T) {
	text := []convlog.Block{convlog.TextBlock("x")}
	fail := &convlog.LLMFailure{Code: "overloaded", Message: "busy"}
	cases := []struct {
		name, state string
		kind        error
		// prep records what the misuse needs before it; do is the misuse.
		prep func(t *testing.T, f *misuseFixture)
		do   func(t *testing.T, f *misuseFixture) error
	}{
		{"a turn from a message without id", "idle", ErrEmptyID, nil, func(t *testing.T, f *misuseFixture) error {
			_, err := f.se.BeginTurn(convlog.StoredMessage{})
			return err
		}},
		{"a turn from a model's message", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			_, err := f.se.BeginTurn(storedMsg(t, "x", "assistant", "model", "hi"))
			return err
		}},
		{"a turn from a message id used before", "idle", ErrDuplicateID, nil, func(t *testing.T, f *misuseFixture) error {
			_, err := f.se.BeginTurn(storedMsg(t, "a1", "user", "user", "again"))
			return err
		}},
		{"a second turn while one runs", "step", ErrTurnRunning, nil, func(t *testing.T, f *misuseFixture) error {
			_, err := f.se.BeginTurn(storedMsg(t, "u3", "user", "user", "more"))
			return err
		}},
		{"steering without a turn", "idle", ErrNoTurn, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Steer(storedMsg(t, "s1", "user", "user", "faster"))
		}},
		{"steering with an id used before", "step", ErrDuplicateID, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Steer(storedMsg(t, "u1", "user", "user", "faster"))
		}},
		{"steering with a message without id", "step", ErrEmptyID, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Steer(convlog.StoredMessage{})
		}},
		{"a step without a turn", "idle", ErrNoTurn, nil, func(t *testing.T, f *misuseFixture) error {
			_, err := f.se.BeginStep()
			return err
		}},
		{"a step inside a step", "step", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			_, err := f.se.BeginStep()
			return err
		}},
		{"a request outside a step", "idle", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Request(Request{Config: convlog.LLMConfig{Provider: "p", Model: "m"}})
		}},
		{"a request without a model", "step", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Request(Request{Config: convlog.LLMConfig{Provider: "p"}})
		}},
		{"a tool whose parameters are no object", "step", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Request(Request{Config: convlog.LLMConfig{Provider: "p", Model: "m"},
				Tools: []convlog.ToolSchema{{Name: "bash", Parameters: []string{"command"}}}})
		}},
		{"a request while a model call streams", "streaming", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Request(Request{Config: convlog.LLMConfig{Provider: "p", Model: "m"}})
		}},
		{"a second model call while one streams", "streaming", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			_, err := f.se.BeginModelCall()
			return err
		}},
		{"an answer without id", "streaming", ErrEmptyID, nil, func(t *testing.T, f *misuseFixture) error {
			return f.call.Complete("")
		}},
		{"an answer with an id used before", "streaming", ErrDuplicateID, nil, func(t *testing.T, f *misuseFixture) error {
			return f.call.Complete("u2")
		}},
		{"an answer whose stream does not assemble", "streaming", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			f.call.ToolCall(0, "k2", "bash", "{}")
			return f.call.Complete("a9")
		}},
		{"an answer asking for a tool call id the turn has", "asked", ErrDuplicateID, func(t *testing.T, f *misuseFixture) {
			mustNil(t, f.se.ToolCall("k1"))
			mustNil(t, f.se.ToolResult(ToolResult{CallID: "k1", ID: "r1", Content: text}))
			mustNil(t, f.se.Request(Request{Config: convlog.LLMConfig{Provider: "p", Model: "m"}}))
			call, err := f.se.BeginModelCall()
			mustNil(t, err)
			call.ToolCall(0, "k1", "bash", "{}")
			f.call = call
		}, func(t *testing.T, f *misuseFixture) error {
			return f.call.Complete("a9")
		}},
		{"an answer ended twice", "streaming", ErrOrder, func(t *testing.T, f *misuseFixture) {
			mustNil(t, f.call.Complete("a9"))
		}, func(t *testing.T, f *misuseFixture) error {
			return f.call.Complete("a10")
		}},
		{"a retry without its failure", "streaming", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.call.Retry(Retry{Delay: 1000})
		}},
		{"a failure without its code", "streaming", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.call.Fail(convlog.LLMFailure{Message: "no code"})
		}},
		{"a tool call no answer asked for", "asked", ErrUnknownCall, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.ToolCall("k9")
		}},
		{"a tool call started twice", "started", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.ToolCall("k1")
		}},
		{"a tool result for an unknown call", "started", ErrUnknownCall, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.ToolResult(ToolResult{CallID: "k9", ID: "r9", Content: text})
		}},
		{"a tool result before its call started", "asked", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.ToolResult(ToolResult{CallID: "k1", ID: "r1", Content: text})
		}},
		{"a tool result without id", "started", ErrEmptyID, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.ToolResult(ToolResult{CallID: "k1", Content: text})
		}},
		{"a tool result with an id used before", "started", ErrDuplicateID, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.ToolResult(ToolResult{CallID: "k1", ID: "a2", Content: text})
		}},
		{"a tool error on a result that is no error", "started", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.ToolResult(ToolResult{CallID: "k1", ID: "r1", Content: text, Error: &convlog.ToolError{Name: "E", Code: "E"}})
		}},
		{"a tool result with an image of no known type", "started", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.ToolResult(ToolResult{CallID: "k1", ID: "r1", Content: []convlog.Block{{Type: convlog.BlockImage,
				Attachment: &convlog.Attachment{ID: "i", MediaType: "image/tiff", Bytes: 1, Width: 1, Height: 1}}}})
		}},
		{"a tool result answered twice", "started", ErrOrder, func(t *testing.T, f *misuseFixture) {
			mustNil(t, f.se.ToolResult(ToolResult{CallID: "k1", ID: "r1", Content: text}))
		}, func(t *testing.T, f *misuseFixture) error {
			return f.se.ToolResult(ToolResult{CallID: "k1", ID: "r2", Content: text})
		}},
		{"a step ended with a tool call open", "started", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.EndStep()
		}},
		{"a turn ended with a step open", "step", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.EndTurn(OutcomeCompleted, nil)
		}},
		{"a failed turn without its error", "step", ErrInvalid, endStep, func(t *testing.T, f *misuseFixture) error {
			return f.se.EndTurn(OutcomeFailed, nil)
		}},
		{"a completed turn with an error", "step", ErrInvalid, endStep, func(t *testing.T, f *misuseFixture) error {
			return f.se.EndTurn(OutcomeCompleted, fail)
		}},
		{"a turn ended with the session log's word for failed", "step", ErrInvalid, endStep, func(t *testing.T, f *misuseFixture) error {
			return f.se.EndTurn("error", fail)
		}},
		{"an interrupt through EndTurn", "step", ErrInvalid, endStep, func(t *testing.T, f *misuseFixture) error {
			return f.se.EndTurn(OutcomeInterrupted, nil)
		}},
		{"a turn ended while a model call streams", "streaming", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.EndTurn(OutcomeCompleted, nil)
		}},
		{"an interrupt of another session's call", "streaming", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Interrupt(&ModelCall{se: f.se})
		}},
		{"a compaction keeping a message the history lacks", "idle", ErrUnknownMessage, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Compact(Compaction{KeepFrom: "nope", Summary: "s", Provider: "p", Model: "m"})
		}},
		{"a compaction with nothing to summarise", "idle", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Compact(Compaction{KeepFrom: "u1", Summary: "s", Provider: "p", Model: "m"})
		}},
		{"a compaction without its summary", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Compact(Compaction{Provider: "p", Model: "m"})
		}},
		{"a compaction reusing a compaction's id", "idle", ErrDuplicateID, func(t *testing.T, f *misuseFixture) {
			mustNil(t, f.se.Compact(Compaction{ID: "k", KeepFrom: "a1", Summary: "s", Provider: "p", Model: "m"}))
		}, func(t *testing.T, f *misuseFixture) error {
			return f.se.Compact(Compaction{ID: "k", Summary: "s2", Provider: "p", Model: "m"})
		}},
		{"a manual compaction with input waiting", "idle", ErrOrder, func(t *testing.T, f *misuseFixture) {
			_, err := f.se.SubagentReport("child", "rep", "done", text)
			mustNil(t, err)
		}, func(t *testing.T, f *misuseFixture) error {
			return f.se.Compact(Compaction{Summary: "s", Provider: "p", Model: "m"})
		}},
		{"a compaction while a model call streams", "streaming", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Compact(Compaction{Summary: "s", Provider: "p", Model: "m"})
		}},
		{"a report from a session that is no subagent", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			_, err := f.child.SubagentReport("root", "rep", "done", text)
			return err
		}},
		{"a report with an id used before", "idle", ErrDuplicateID, nil, func(t *testing.T, f *misuseFixture) error {
			_, err := f.se.SubagentReport("child", "u1", "done", text)
			return err
		}},
		{"a title with a line break", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.s.Rename("c", "two\nlines")
		}},
		{"an empty title", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.s.Rename("c", "  ")
		}},
		{"a rewind to a message never recorded", "idle", ErrUnknownMessage, nil, func(t *testing.T, f *misuseFixture) error {
			_, err := f.se.Rewind("c2", "root", "nope")
			return err
		}},
		{"a rewind to the model's message", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.rewind(t, "a1")
		}},
		{"a rewind to a user message not from the user", "idle", ErrInvalid, func(t *testing.T, f *misuseFixture) {
			_, err := f.se.BeginTurn(storedMsg(t, "r1", "user", "auto-review", "review"))
			mustNil(t, err)
			step(t, f.se, "a2", "done")
			mustNil(t, f.se.EndTurn(OutcomeCompleted, nil))
		}, func(t *testing.T, f *misuseFixture) error {
			return f.rewind(t, "r1")
		}},
		{"a rewind to no message", "idle", ErrEmptyID, nil, func(t *testing.T, f *misuseFixture) error {
			_, err := f.se.Rewind("c2", "root", "")
			return err
		}},
		{"a fork through a message never recorded", "idle", ErrUnknownMessage, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Fork("c2", "root", "nope")
		}},
		{"a fork of a subagent", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.child.Fork("c2", "root", "")
		}},
		{"a rewind of a subagent", "idle", ErrInvalid, func(t *testing.T, f *misuseFixture) {
			_, err := f.child.BeginTurn(storedMsg(t, "cu1", "user", "user", "check"))
			mustNil(t, err)
			step(t, f.child, "ca1", "checked")
			mustNil(t, f.child.EndTurn(OutcomeCompleted, nil))
		}, func(t *testing.T, f *misuseFixture) error {
			_, err := f.child.Rewind("c2", "root", "cu1")
			return err
		}},
		{"a fork through an inherited message", "idle", ErrInvalid, toSeeded, func(t *testing.T, f *misuseFixture) error {
			err := f.se.Fork("c2", "root", "a2")
			if err != nil && !strings.Contains(err.Error(), `"a2"`) {
				t.Errorf("error %q does not name message a2", err)
			}
			return err
		}},
		{"a rewind to an inherited message", "idle", ErrInvalid, toSeeded, func(t *testing.T, f *misuseFixture) error {
			return f.rewind(t, "u2")
		}},
		{"a batch inside a batch", "step", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Batch(func() error { return f.se.Batch(func() error { return nil }) })
		}},
		{"a developer message outside a turn", "idle", ErrNoTurn, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Developer(Developer{ID: "d1", Text: "x"})
		}},
		{"a developer message between steps", "step", ErrOrder, endStep, func(t *testing.T, f *misuseFixture) error {
			return f.se.Developer(Developer{ID: "d1", Text: "x"})
		}},
		{"a developer message while a model call streams", "streaming", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Developer(Developer{ID: "d1", Text: "x"})
		}},
		{"a developer message without id", "step", ErrEmptyID, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Developer(Developer{Text: "x"})
		}},
		{"a developer message with an id used before", "step", ErrDuplicateID, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Developer(Developer{ID: "u2", Text: "x"})
		}},
		{"an empty developer message", "step", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Developer(Developer{ID: "d1"})
		}},
		{"a developer message from a plugin", "step", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Developer(Developer{ID: "d1", Text: "x", Source: convlog.SourcePlugin})
		}},
		{"a developer message adding a tool the request lacks", "step", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Developer(Developer{ID: "d1", Added: []string{"grep"}})
		}},
		{"a developer message adding a tool the request defines twice", "idle", ErrInvalid, func(t *testing.T, f *misuseFixture) {
			_, err := f.se.BeginTurn(storedMsg(t, "u2", "user", "user", "go on"))
			mustNil(t, err)
			_, err = f.se.BeginStep()
			mustNil(t, err)
			grep := convlog.ToolSchema{Name: "grep", Description: "search", Parameters: map[string]any{"type": "object"}}
			mustNil(t, f.se.Request(Request{System: "sys", Config: convlog.LLMConfig{Provider: "p", Model: "m"}, Tools: []convlog.ToolSchema{grep, grep}}))
		}, func(t *testing.T, f *misuseFixture) error {
			return f.se.Developer(Developer{ID: "d1", Added: []string{"grep"}})
		}},
		{"a title from an inherited message", "idle", ErrInvalid, toSeeded, func(t *testing.T, f *misuseFixture) error {
			return f.se.Title(SessionTitle{Title: "t", From: []string{"u2"}})
		}},
		{"a title request from an inherited message", "idle", ErrInvalid, toSeeded, func(t *testing.T, f *misuseFixture) error {
			return f.se.TitleRequest(TitleRequest{Provider: "t", Route: TitleRoute{Provider: "p", Model: "m"}, From: []string{"u2"}, Prompt: "x"})
		}},
		{"a title with a route and no provider", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Title(SessionTitle{Title: "t", From: []string{"u1"}, Route: &TitleRoute{Provider: "p", Model: "m"}})
		}},
		{"a title request with a title request's id", "idle", ErrDuplicateID, func(t *testing.T, f *misuseFixture) {
			mustNil(t, f.se.TitleRequest(TitleRequest{Provider: "t", Route: TitleRoute{Provider: "p", Model: "m"}, From: []string{"u1"}, ID: "tr1", Prompt: "x"}))
		}, func(t *testing.T, f *misuseFixture) error {
			return f.se.TitleRequest(TitleRequest{Provider: "t", Route: TitleRoute{Provider: "p", Model: "m"}, From: []string{"u1"}, ID: "tr1", Prompt: "x"})
		}},
		{"an empty title", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Title(SessionTitle{From: []string{"u1"}})
		}},
		{"a provider's title from no message", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Title(SessionTitle{Title: "t", Provider: "titler"})
		}},
		{"a title with half a route", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Title(SessionTitle{Title: "t", From: []string{"u1"}, Provider: "titler", Route: &TitleRoute{Provider: "p"}})
		}},
		{"a title from the model's message", "idle", ErrUnknownMessage, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Title(SessionTitle{Title: "t", From: []string{"a1"}})
		}},
		{"a title from a message twice", "idle", ErrDuplicateID, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Title(SessionTitle{Title: "t", From: []string{"u1", "u1"}})
		}},
		{"a title request from no message", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.TitleRequest(TitleRequest{Provider: "t", Route: TitleRoute{Provider: "p", Model: "m"}, Prompt: "x"})
		}},
		{"a title request without a route", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.TitleRequest(TitleRequest{Provider: "t", From: []string{"u1"}, Prompt: "x"})
		}},
		{"a title request without its prompt", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.TitleRequest(TitleRequest{Provider: "t", Route: TitleRoute{Provider: "p", Model: "m"}, From: []string{"u1"}})
		}},
		{"a title request from the model's message", "idle", ErrUnknownMessage, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.TitleRequest(TitleRequest{Provider: "t", Route: TitleRoute{Provider: "p", Model: "m"}, From: []string{"a1"}, Prompt: "x"})
		}},
		{"a title request with a message id used before", "idle", ErrDuplicateID, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.TitleRequest(TitleRequest{Provider: "t", Route: TitleRoute{Provider: "p", Model: "m"}, From: []string{"u1"}, ID: "a1", Prompt: "x"})
		}},
		{"a title as a raw event", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Append(convlog.Event{Type: convlog.TypeSessionTitle, Data: []byte(`{}`)})
		}},
		{"a request context outside a turn", "idle", ErrNoTurn, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.RequestContext(RequestContext{Provider: "p", Model: "m"})
		}},
		{"a request context between steps", "step", ErrOrder, endStep, func(t *testing.T, f *misuseFixture) error {
			return f.se.RequestContext(RequestContext{Provider: "p", Model: "m"})
		}},
		{"a request context while a model call streams", "streaming", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.RequestContext(RequestContext{Provider: "p", Model: "m"})
		}},
		{"a request context without a model", "step", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.RequestContext(RequestContext{Provider: "p"})
		}},
		{"a request context with a negative window", "step", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.RequestContext(RequestContext{Provider: "p", Model: "m", ContextWindow: -1})
		}},
		{"a request context as a raw event", "step", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Append(convlog.Event{Type: convlog.TypeRequestContext, Data: []byte(`{"provider":"p","model":"m"}`)})
		}},
		{"a command without a name", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			_, err := f.se.Command("", "x")
			return err
		}},
		{"the end of a command never run", "idle", ErrUnknownCall, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.CommandDone(CommandResult{ID: "nope"})
		}},
		{"a command ended twice", "idle", ErrOrder, func(t *testing.T, f *misuseFixture) {
			runCommand(t, f)
			mustNil(t, f.se.CommandDone(CommandResult{ID: f.cmd}))
		}, func(t *testing.T, f *misuseFixture) error {
			return f.se.CommandDone(CommandResult{ID: f.cmd})
		}},
		{"a failed command naming a message", "idle", ErrInvalid, runCommand, func(t *testing.T, f *misuseFixture) error {
			return f.se.CommandDone(CommandResult{ID: f.cmd, Failed: true, Message: "a1"})
		}},
		{"a command naming a message never recorded", "idle", ErrUnknownMessage, runCommand, func(t *testing.T, f *misuseFixture) error {
			return f.se.CommandDone(CommandResult{ID: f.cmd, Message: "nope"})
		}},
		{"a command as a raw event", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Append(convlog.Event{Type: convlog.TypeCommandRun, Data: []byte(`{}`)})
		}},
		{"a dispatch outside a turn", "idle", ErrNoTurn, nil, func(t *testing.T, f *misuseFixture) error {
			_, err := f.se.Dispatch("k1", "grep", []byte(`{}`))
			return err
		}},
		{"a dispatch from a tool call not started", "asked", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			_, err := f.se.Dispatch("k1", "grep", []byte(`{}`))
			return err
		}},
		{"a dispatch from no tool call", "started", ErrUnknownCall, nil, func(t *testing.T, f *misuseFixture) error {
			_, err := f.se.Dispatch("k9", "grep", []byte(`{}`))
			return err
		}},
		{"a dispatch with arguments not JSON", "started", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			_, err := f.se.Dispatch("k1", "grep", []byte(`{`))
			return err
		}},
		{"a result of a call never dispatched", "started", ErrUnknownCall, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.DispatchResult(DispatchResult{ID: "k1:ptc:1"})
		}},
		{"a dispatched call's second result", "started", ErrOrder, func(t *testing.T, f *misuseFixture) {
			id, err := f.se.Dispatch("k1", "grep", []byte(`{}`))
			mustNil(t, err)
			mustNil(t, f.se.DispatchResult(DispatchResult{ID: id}))
		}, func(t *testing.T, f *misuseFixture) error {
			return f.se.DispatchResult(DispatchResult{ID: "k1:ptc:1"})
		}},
		{"a result of a call dispatched in an earlier turn", "started", ErrOrder, dispatchThenNextTurn, func(t *testing.T, f *misuseFixture) error {
			return f.se.DispatchResult(DispatchResult{ID: "k1:ptc:1"})
		}},
		{"a dispatch from a call dispatched in an earlier turn", "started", ErrOrder, dispatchThenNextTurn, func(t *testing.T, f *misuseFixture) error {
			_, err := f.se.Dispatch("k1:ptc:1", "grep", []byte(`{}`))
			return err
		}},
		{"a dispatch after the tool call's result", "started", ErrOrder, func(t *testing.T, f *misuseFixture) {
			mustNil(t, f.se.ToolResult(ToolResult{CallID: "k1", ID: "r1", Content: []convlog.Block{convlog.TextBlock("done")}}))
		}, func(t *testing.T, f *misuseFixture) error {
			_, err := f.se.Dispatch("k1", "grep", []byte(`{}`))
			return err
		}},
		{"a dispatch as a raw event", "started", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Append(convlog.Event{Type: convlog.TypePTCStart, Data: []byte(`{}`)})
		}},
		{"a developer message as a raw event", "step", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Append(convlog.Event{Type: convlog.TypeDeveloperMessage, Data: []byte(`{}`)})
		}},
		{"a compaction naming a command never run", "idle", ErrUnknownCall, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Compact(Compaction{Summary: "s", Provider: "p", Model: "m", CommandID: "nope"})
		}},
		{"a compaction naming a subagent's command", "idle", ErrUnknownCall, func(t *testing.T, f *misuseFixture) {
			var err error
			f.cmd, err = f.child.Command("compact", "")
			mustNil(t, err)
		}, func(t *testing.T, f *misuseFixture) error {
			return f.se.Compact(Compaction{Summary: "s", Provider: "p", Model: "m", CommandID: f.cmd})
		}},
		{"a compaction with a negative token count", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Compact(Compaction{Summary: "s", Provider: "p", Model: "m", TokenCount: -1})
		}},
		{"a prune while a model call streams", "streaming", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Prune(Prune{From: "u1", To: "a1", Content: text})
		}},
		{"a prune naming no message", "idle", ErrEmptyID, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Prune(Prune{From: "u1", Content: text})
		}},
		{"a prune of a message never recorded", "idle", ErrUnknownMessage, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Prune(Prune{From: "u1", To: "nope", Content: text})
		}},
		{"a prune of a message a compaction replaced", "idle", ErrUnknownMessage, func(t *testing.T, f *misuseFixture) {
			mustNil(t, f.se.Compact(Compaction{KeepFrom: "a1", Summary: "s", Provider: "p", Model: "m"}))
		}, func(t *testing.T, f *misuseFixture) error {
			return f.se.Prune(Prune{From: "u1", To: "a1", Content: text})
		}},
		{"a prune ending before it starts", "idle", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Prune(Prune{From: "a1", To: "u1", Content: text})
		}},
		{"a prune of the system prompt", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Prune(Prune{From: f.se.History()[0].Message.ID(), To: "a1", Content: text})
		}},
		{"a prune without its replacement", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Prune(Prune{From: "u1", To: "a1"})
		}},
		{"a prune with a negative token count", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Prune(Prune{From: "u1", To: "a1", Content: text, TokenCount: -1})
		}},
		{"a prune whose replacement has an id used before", "idle", ErrDuplicateID, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Prune(Prune{From: "u1", To: "u1", ID: "a1", Content: text})
		}},
		{"a prune as a raw event", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			h := f.se.History()
			return f.se.Append(convlog.Event{Type: convlog.TypeCompactionPrune, Data: []byte(fmt.Sprintf(
				`{"shadowedRange":{"start":%d,"end":%[1]d},"shadowedSeqs":[%[1]d],"shadowedTokenCount":1}`, h[1].Seq))})
		}},
		{"an offload of nothing", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Offload()
		}},
		{"an offload while a model call streams", "streaming", ErrOrder, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Offload(Offload{Message: "u2", Images: []int{0}})
		}},
		{"an offload of a message never recorded", "idle", ErrUnknownMessage, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Offload(Offload{Message: "nope", Images: []int{0}})
		}},
		{"an offload of a message a compaction replaced", "idle", ErrUnknownMessage, func(t *testing.T, f *misuseFixture) {
			imagePrompt(t, f)
			mustNil(t, f.se.Compact(Compaction{Summary: "s", Provider: "p", Model: "m"}))
		}, func(t *testing.T, f *misuseFixture) error {
			return f.se.Offload(Offload{Message: "u2", Images: []int{0}})
		}},
		{"an offload of the model's message", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Offload(Offload{Message: "a1", Images: []int{0}})
		}},
		{"an offload of no image of a message", "idle", ErrInvalid, imagePrompt, func(t *testing.T, f *misuseFixture) error {
			return f.se.Offload(Offload{Message: "u2"})
		}},
		{"an offload of an image the message lacks", "idle", ErrInvalid, imagePrompt, func(t *testing.T, f *misuseFixture) error {
			return f.se.Offload(Offload{Message: "u2", Images: []int{1, 2}})
		}},
		{"an offload of images out of order", "idle", ErrInvalid, imagePrompt, func(t *testing.T, f *misuseFixture) error {
			return f.se.Offload(Offload{Message: "u2", Images: []int{1, 0}})
		}},
		{"an offload naming a message twice", "idle", ErrDuplicateID, imagePrompt, func(t *testing.T, f *misuseFixture) error {
			return f.se.Offload(Offload{Message: "u2", Images: []int{0}}, Offload{Message: "u2", Images: []int{1}})
		}},
		{"an offload as a raw event", "idle", ErrInvalid, nil, func(t *testing.T, f *misuseFixture) error {
			return f.se.Append(convlog.Event{Type: convlog.TypeImageOffload, Data: []byte(`{"targets":[{"seq":4,"imageIndexes":[0]}]}`)})
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newMisuseFixture(t, c.state)
			if c.prep != nil {
				c.prep(t, f)
			}
			before := f.files(t)
			err := c.do(t, f)
			var re *RecordError
			if !errors.Is(err, c.kind) || !errors.As(err, &re) {
				t.Fatalf("error %v, want a *RecordError of kind %v", err, c.kind)
			}
			if after := f.files(t); len(after) != len(before) {
				t.Fatalf("files %d, before %d", len(after), len(before))
			} else {
				for name, b := range before {
					if after[name] != b {
						t.Fatalf("%s changed", name)
					}
				}
			}
			// What the session can still do is unchanged by the refusal.
			if c.state == "step" && !errors.Is(err, ErrTurnRunning) {
				if _, err := f.se.BeginModelCall(); err != nil && !errors.Is(err, ErrOrder) {
					t.Fatalf("after the refusal: %v", err)
				}
			}
		})
	}
}
