package store

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/convkit/convkit/convlog"
)

// lastEvents records with do on a session in state and returns the events
// do wrote, each as type, surface op and data; the log must pass the
// format's rules.
func lastEvents(t *testing.T, state string, prep, do func(t *testing.T, f *misuseFixture)) []string {
	t.Helper()
	f := newMisuseFixture(t, state)
	if prep != nil {
		prep(t, f)
	}
	path, _ := f.s.sessionLogFile("c", "root")
	_, before := readEvents(t, path)
	do(t, f)
	_, after := readEvents(t, path)
	if probs := ruleProblems(t, path); len(probs) > 0 {
		t.Fatal(probs)
	}
	var out []string
	for _, e := range after[len(before):] {
		op := ""
		if e.SurfaceOp != nil {
			op = " append"
		}
		if e.SurfaceOp != nil && e.SurfaceOp.Replace {
			op = fmt.Sprintf(" replace %d..%d citing %v", e.SurfaceOp.StartSeq, e.SurfaceOp.EndSeq, e.SourceEventSeqs)
		}
		out = append(out, e.Type+op+" "+string(e.Data))
	}
	return out
}

// withTools is a step whose request offers tool grep.
func withTools(t *testing.T, f *misuseFixture) {
	mustNil(t, f.se.EndStep())
	_, err := f.se.BeginStep()
	mustNil(t, err)
	mustNil(t, f.se.Request(Request{System: "sys", Config: convlog.LLMConfig{Provider: "p", Model: "m"},
		Tools: []convlog.ToolSchema{{Name: "grep", Description: "search", Parameters: map[string]any{"type": "object"}}}}))
}

// TestRecordExtraWrites: each call writes exactly the event the format's
// reference describes.
func TestRecordExtraWrites(t *testing.T) {
	cases := []struct {
		name, state string
		prep, do    func(t *testing.T, f *misuseFixture)
		want        []string
	}{
		{"a developer message of text", "step", nil, func(t *testing.T, f *misuseFixture) {
			mustNil(t, f.se.Developer(Developer{ID: "d1", Text: "the cwd is /w", Source: convlog.SourceRuntimeContext}))
		}, []string{`developer/message append {"turn":2,"step":1,"message":{"role":"developer","content":[{"type":"text","text":"the cwd is /w"}],"source":{"kind":"runtime-context"},"id":"d1"}}`}},
		{"a developer message adding and removing tools", "step", withTools, func(t *testing.T, f *misuseFixture) {
			mustNil(t, f.se.Developer(Developer{ID: "d1", Added: []string{"grep"}, Removed: []string{"bash"}}))
		}, []string{`developer/message append {"turn":2,"step":2,"message":{"role":"developer","content":[{"type":"tool-addition","toolName":"grep"},{"type":"tool-removal","toolName":"bash"}],"source":{"kind":"tool-registry"},"id":"d1"},"headerSeq":18}`}},
		{"a title the user gave", "idle", nil, func(t *testing.T, f *misuseFixture) {
			mustNil(t, f.se.Title(SessionTitle{Title: "Flaky tests"}))
		}, []string{`session/title {"title":"Flaky tests","messageSeqs":[],"source":{"kind":"user"}}`}},
		{"a fallback title", "idle", nil, func(t *testing.T, f *misuseFixture) {
			mustNil(t, f.se.Title(SessionTitle{Title: "first", From: []string{"u1"}}))
		}, []string{`session/title {"title":"first","messageSeqs":[4],"source":{"kind":"fallback"}}`}},
		{"a title request", "idle", nil, func(t *testing.T, f *misuseFixture) {
			mustNil(t, f.se.TitleRequest(TitleRequest{Provider: "titler", Route: TitleRoute{Provider: "p", Model: "small"},
				System: "Title the chat.", MaxTokens: 20, From: []string{"u1"}, ID: "q1", Prompt: "first"}))
		}, []string{`session/title-llm-request {"titleProvider":"titler","route":{"provider":"p","model":"small"},"system":"Title the chat.","maxTokens":20,"messageSeqs":[4],"messages":[{"role":"user","content":[{"type":"text","text":"first"}],"source":{"kind":"dsh-session-title-llm"},"id":"q1"}]}`}},
		{"a provider's title while a model call streams", "streaming", nil, func(t *testing.T, f *misuseFixture) {
			mustNil(t, f.se.Title(SessionTitle{Title: "Go on", From: []string{"u2", "u1"}, Provider: "titler",
				Route: &TitleRoute{Provider: "p", Model: "small"}}))
		}, []string{`session/title {"title":"Go on","messageSeqs":[14,4],"source":{"kind":"provider","provider":"titler","model":{"provider":"p","model":"small"}}}`}},
		{"a request context, repeated, then changed", "step", nil, func(t *testing.T, f *misuseFixture) {
			c := RequestContext{Provider: "p", Model: "m", ContextWindow: 128000}
			mustNil(t, f.se.RequestContext(c))
			mustNil(t, f.se.RequestContext(c))
			c.SystemPromptInHistory = true
			mustNil(t, f.se.RequestContext(c))
			mustNil(t, f.se.RequestContext(RequestContext{Provider: "p", Model: "m2"}))
		}, []string{`request/context {"provider":"p","model":"m","contextWindow":128000}`,
			`request/context {"provider":"p","model":"m","contextWindow":128000,"systemPromptUpdate":"in-history"}`,
			`request/context {"provider":"p","model":"m2"}`}},
		{"dispatched calls, one nested, their results", "started", nil, func(t *testing.T, f *misuseFixture) {
			id, err := f.se.Dispatch("k1", "grep", []byte(`{ "q": "x" }`))
			mustNil(t, err)
			sub, err := f.se.Dispatch(id, "read", []byte(`[1, 2]`))
			mustNil(t, err)
			if id != "k1:ptc:1" || sub != "k1:ptc:1:ptc:1" {
				t.Fatalf("ids %q %q", id, sub)
			}
			mustNil(t, f.se.DispatchResult(DispatchResult{ID: sub, Content: []convlog.Block{convlog.TextBlock("12")}}))
			mustNil(t, f.se.DispatchResult(DispatchResult{ID: id, IsError: true, Error: &convlog.ToolError{Name: "grep", Code: "failed"}}))
		}, []string{`tool/ptc-dispatch-start {"rootCallId":"k1","parentCallId":"k1","subCallId":"k1:ptc:1","name":"grep","arguments":{"q":"x"}}`,
			`tool/ptc-dispatch-start {"rootCallId":"k1","parentCallId":"k1:ptc:1","subCallId":"k1:ptc:1:ptc:1","name":"read","arguments":[1,2]}`,
			`tool/ptc-dispatch {"rootCallId":"k1","parentCallId":"k1:ptc:1","subCallId":"k1:ptc:1:ptc:1","name":"read","arguments":[1,2],"isError":false,"content":[{"type":"text","text":"12"}]}`,
			`tool/ptc-dispatch {"rootCallId":"k1","parentCallId":"k1","subCallId":"k1:ptc:1","name":"grep","arguments":{"q":"x"},"isError":true,"error":{"name":"grep","code":"failed"},"content":[]}`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := lastEvents(t, c.state, c.prep, c.do)
			if len(got) != len(c.want) {
				t.Fatalf("events:\n%q", got)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Fatalf("event %d:\n got %s\nwant %s", i, got[i], c.want[i])
				}
			}
		})
	}
}

// TestCommands: a command's run and its end, the id made by Command.
func TestCommands(t *testing.T) {
	var ids []string
	a1 := int64(-1)
	got := lastEvents(t, "idle", nil, func(t *testing.T, f *misuseFixture) {
		for _, h := range f.se.History() {
			if h.Message.ID() == "a1" {
				a1 = h.Seq
			}
		}
		id, err := f.se.Command("compact", "keep the last turn")
		mustNil(t, err)
		mustNil(t, f.se.CommandDone(CommandResult{ID: id, Text: "compacted", Message: "a1"}))
		id2, err := f.se.Command("clear", "")
		mustNil(t, err)
		mustNil(t, f.se.CommandDone(CommandResult{ID: id2, Failed: true, Text: "nothing to clear"}))
		ids = append(ids, id, id2)
	})
	if len(ids[0]) != 36 || ids[0] == ids[1] {
		t.Fatalf("command ids %q", ids)
	}
	want := []string{
		`command/run {"commandId":"` + ids[0] + `","name":"compact","args":"keep the last turn","source":{"kind":"user"}}`,
		`command/done {"commandId":"` + ids[0] + `","kind":"success","text":"compacted","sourceEventSeq":` + strconv.FormatInt(a1, 10) + `}`,
		`command/run {"commandId":"` + ids[1] + `","name":"clear","source":{"kind":"user"}}`,
		`command/done {"commandId":"` + ids[1] + `","kind":"error","text":"nothing to clear"}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestPruneCompactOffload: a prune replaces a span of the history with one
// message, a compaction a command asked for names the command, and an
// offload names a kept prompt's images by their seq; the log passes the
// format's rules and History reads the replacements.
func TestPruneCompactOffload(t *testing.T) {
	img := convlog.Block{Type: convlog.BlockImage, Attachment: &convlog.Attachment{ID: "i", MediaType: "image/png", Bytes: 9, Width: 2, Height: 2}}
	var cmd string
	var u2 int64
	got := lastEvents(t, "idle", nil, func(t *testing.T, f *misuseFixture) {
		prompt, err := convlog.NewUserMessage("u2", convlog.TextBlock("look"), img, img, img)
		mustNil(t, err)
		_, err = f.se.BeginTurn(prompt)
		mustNil(t, err)
		step(t, f.se, "a2", "seen")
		mustNil(t, f.se.EndTurn(OutcomeCompleted, nil))
		mustNil(t, f.se.Prune(Prune{From: "u1", To: "a1", ID: "p1", Content: []convlog.Block{convlog.TextBlock("(pruned)")}, TokenCount: 7}))
		if got := historyIDs(f.se); !strings.HasSuffix(got, " p1 u2 a2") || strings.Count(got, " ") != 3 {
			t.Fatalf("history after the prune: %s", got)
		}
		cmd, err = f.se.Command("compact", "")
		mustNil(t, err)
		mustNil(t, f.se.Compact(Compaction{ID: "k", KeepFrom: "u2", Summary: "s", Provider: "p", Model: "m", CheckpointID: "cp", TokenCount: 3, CommandID: cmd}))
		u2 = f.se.History()[2].Seq
		mustNil(t, f.se.Offload(Offload{Message: "u2", Images: []int{0, 2}}))
	})
	got = got[len(got)-8:]
	want := []string{
		`compaction/prune {"shadowedRange":{"start":4,"end":6},"shadowedSeqs":[4,6],"shadowedTokenCount":7}`,
		`user/message replace 4..6 citing [4 6] {"role":"user","content":[{"type":"text","text":"(pruned)"}],"source":{"kind":"compact-basic"},"id":"p1"}`,
		`command/run {"commandId":"` + cmd + `","name":"compact","source":{"kind":"user"}}`,
		`compaction/start {"compactionId":"k","sourceCommandId":"` + cmd + `","turn":null}`,
		`compaction/summary {"compactionId":"k","sourceCommandId":"` + cmd + `","summary":[{"type":"text","text":"s"}],"shadowedRange":{"start":18,"end":18},"shadowedSeqs":[18],"shadowedTokenCount":3,"provider":"p","model":"m"}`,
		`user/message replace 18..18 citing [18] {"role":"user","content":[{"type":"text","text":"s"}],"source":{"kind":"compact-checkpoint","compactionId":"k","sourceCommandId":"` + cmd + `"},"id":"cp"}`,
		`compaction/end {"compactionId":"k","sourceCommandId":"` + cmd + `","turn":null}`,
		`image/offload {"targets":[{"seq":` + strconv.FormatInt(u2, 10) + `,"imageIndexes":[0,2]}]}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
