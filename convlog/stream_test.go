package convlog

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// expand reads stored stream records back into chunks with their times,
// as a reader of the format expands them.
func expand(t *testing.T, records []byte) []string {
	t.Helper()
	var recs []map[string]json.RawMessage
	if err := json.Unmarshal(records, &recs); err != nil {
		t.Fatalf("records are not a JSON array of objects: %v\n%s", err, records)
	}
	var out []string
	for _, r := range recs {
		var typ string
		json.Unmarshal(r["type"], &typ)
		switch typ {
		case "chunk":
			if len(r) != 3 {
				t.Fatalf("chunk record has members %v", keys(r))
			}
			out = append(out, string(r["time"])+" "+string(r["chunk"]))
		case "text-chunks", "reasoning-chunks", "tool-call-chunks":
			var time0 int64
			var index int
			var dt []int64
			var texts []string
			json.Unmarshal(r["time0"], &time0)
			json.Unmarshal(r["index"], &index)
			json.Unmarshal(r["dt"], &dt)
			member := "texts"
			want := 5
			if typ == "tool-call-chunks" {
				member = "args"
				want = 6
				if _, ok := r["name"]; ok {
					want = 7
				}
			}
			json.Unmarshal(r[member], &texts)
			if len(r) != want || len(dt) != len(texts)-1 || len(texts) == 0 {
				t.Fatalf("%s record has members %v, %d gaps for %d members", typ, keys(r), len(dt), len(texts))
			}
			tm := time0
			for k, text := range texts {
				if k > 0 {
					tm += dt[k-1]
				}
				tj, _ := json.Marshal(text)
				switch typ {
				case "tool-call-chunks":
					name := ""
					if n, ok := r["name"]; ok {
						name = `,"name":` + string(n)
					}
					out = append(out, jsonInt(tm)+` {"type":"tool-call-delta","index":`+jsonInt(int64(index))+`,"id":`+string(r["id"])+name+`,"argumentsDelta":`+string(tj)+`}`)
				default:
					out = append(out, jsonInt(tm)+` {"type":"`+strings.TrimSuffix(typ, "-chunks")+`-delta","index":`+jsonInt(int64(index))+`,"text":`+string(tj)+`}`)
				}
			}
		default:
			t.Fatalf("unknown record type %q", typ)
		}
	}
	return out
}

func keys(m map[string]json.RawMessage) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

func jsonInt(v int64) string { b, _ := json.Marshal(v); return string(b) }

func TestStreamRecordsExpandToChunks(t *testing.T) {
	var s Stream
	s.BlockStart(100, 0, "reasoning")
	s.Reasoning(101, 0, "Let me ")
	s.Reasoning(104, 0, "look.")
	s.BlockEnd(105, 0, Block{Type: BlockReasoning, Text: "Let me look."})
	s.Text(106, 1, "Two")
	s.Text(106, 1, " files")
	s.ToolCall(107, 2, "c1", "bash", `{"co`)
	s.ToolCall(108, 2, "c1", "", `mmand":"ls"}`)
	s.ToolCall(109, 2, "c1", "", ``)
	s.Text(110, 1, ".")
	s.Usage(111, Usage{InputTokens: 10, OutputTokens: 5})
	s.Finish(112, FinishReason{Kind: FinishToolCalls})
	want := []string{
		`100 {"type":"block-start","index":0,"blockType":"reasoning"}`,
		`101 {"type":"reasoning-delta","index":0,"text":"Let me "}`,
		`104 {"type":"reasoning-delta","index":0,"text":"look."}`,
		`105 {"type":"block-end","index":0,"block":{"type":"reasoning","text":"Let me look."}}`,
		`106 {"type":"text-delta","index":1,"text":"Two"}`,
		`106 {"type":"text-delta","index":1,"text":" files"}`,
		`107 {"type":"tool-call-delta","index":2,"id":"c1","name":"bash","argumentsDelta":"{\"co"}`,
		`108 {"type":"tool-call-delta","index":2,"id":"c1","argumentsDelta":"mmand\":\"ls\"}"}`,
		`109 {"type":"tool-call-delta","index":2,"id":"c1","argumentsDelta":""}`,
		`110 {"type":"text-delta","index":1,"text":"."}`,
		`111 {"type":"usage","usage":{"inputTokens":10,"outputTokens":5}}`,
		`112 {"type":"finish","reason":{"kind":"tool-calls"}}`,
	}
	got := expand(t, s.Records())
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("expanded\n%s\nwant\n%s\nrecords %s", strings.Join(got, "\n"), strings.Join(want, "\n"), s.Records())
	}
	// Consecutive deltas of one block share a record; the tool call's
	// first delta, which names it, is a record of its own.
	var recs []json.RawMessage
	json.Unmarshal(s.Records(), &recs)
	if len(recs) != 9 {
		t.Errorf("%d records, want 9: %s", len(recs), s.Records())
	}
	c, err := s.Content()
	if err != nil {
		t.Fatal(err)
	}
	if w := `[{"type":"reasoning","text":"Let me look."},{"type":"text","text":"Two files."},{"type":"tool-call","id":"c1","name":"bash","arguments":"{\"command\":\"ls\"}"}]`; string(c) != w {
		t.Errorf("content %s, want %s", c, w)
	}
	if u := s.UsageReported(); u == nil || u.InputTokens != 10 {
		t.Errorf("usage %+v", u)
	}
}

func TestStreamContent(t *testing.T) {
	fail := &LLMFailure{Code: "overloaded", Message: "try later"}
	cases := []struct {
		name          string
		build         func(s *Stream)
		content, part string
		err           string
	}{
		{"empty answer", func(s *Stream) { s.Finish(1, FinishReason{Kind: FinishStop}) }, `[]`, `[]`, ""},
		{"cut off at the output limit loses its tool calls", func(s *Stream) {
			s.Text(1, 0, "I will run")
			s.ToolCall(2, 1, "c1", "bash", `{"comm`)
			s.Finish(3, FinishReason{Kind: FinishMaxTokens})
		}, `[{"type":"text","text":"I will run"}]`, `[{"type":"text","text":"I will run"}]`, ""},
		{"a tool call without an id", func(s *Stream) { s.ToolCall(1, 3, "", "", `{}`) },
			`[{"type":"tool-call","id":"call-3","name":"","arguments":"{}"}]`, `[]`, ""},
		{"the first block-end fixes its block", func(s *Stream) {
			s.Text(1, 0, "draft")
			s.BlockEnd(2, 0, TextBlock("final"))
			s.Text(3, 0, " more")
			s.BlockEnd(4, 0, TextBlock("other"))
		}, `[{"type":"text","text":"final"}]`, `[{"type":"text","text":"final"}]`, ""},
		{"white space is no partial answer", func(s *Stream) {
			s.Reasoning(1, 0, "  \n")
			s.Text(2, 1, "Hel")
		}, `[{"type":"reasoning","text":"  \n"},{"type":"text","text":"Hel"}]`, `[{"type":"text","text":"Hel"}]`, ""},
		{"an image opened and never ended", func(s *Stream) { s.BlockStart(1, 0, "image") }, "", "", "opened and never ended"},
		{"a text delta into a tool call", func(s *Stream) {
			s.ToolCall(1, 0, "c1", "bash", "")
			s.Text(2, 0, "x")
		}, "", "", "holds a tool-call block"},
		{"a negative index", func(s *Stream) { s.Text(1, -1, "x") }, "", "", "negative"},
		{"an error finish without its failure", func(s *Stream) { s.Finish(1, FinishReason{Kind: FinishError}) }, "", "", "needs a code"},
		{"an error finish", func(s *Stream) {
			s.Text(1, 0, "partial")
			s.Finish(2, FinishReason{Kind: FinishError, Failure: fail})
		}, `[{"type":"text","text":"partial"}]`, `[{"type":"text","text":"partial"}]`, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s Stream
			c.build(&s)
			got, err := s.Content()
			part, perr := s.Partial()
			if c.err != "" {
				if !errors.Is(err, ErrStream) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want ErrStream with %q", err, c.err)
				}
				return
			}
			if err != nil || perr != nil {
				t.Fatal(err, perr)
			}
			if string(got) != c.content || string(part) != c.part {
				t.Errorf("content %s partial %s, want %s and %s", got, part, c.content, c.part)
			}
			expand(t, s.Records())
		})
	}
}

func TestPayloadJSON(t *testing.T) {
	temp := 0.5
	max := int64(10)
	cases := []struct {
		v    any
		want string
	}{
		{RequestHeaderData{Header: EpochHeader{Config: LLMConfig{Provider: "p", Model: "m", MaxTokens: 8, Temperature: &temp},
			AdapterDefaults: &AdapterDefaults{ReasoningEffort: true},
			Tools:           []ToolSchema{{Name: "bash", Description: "run", Parameters: json.RawMessage(`{"type":"object"}`)}}}, Reason: HeaderInitial},
			`{"header":{"config":{"provider":"p","model":"m","maxTokens":8,"temperature":0.5},"adapterDefaults":{"reasoningEffort":true},"tools":[{"name":"bash","description":"run","parameters":{"type":"object"}}]},"reason":"initial"}`},
		{RequestHeaderData{Header: EpochHeader{Config: LLMConfig{Provider: "p", Model: "m"}}, Reason: HeaderSeries},
			`{"header":{"config":{"provider":"p","model":"m"}},"reason":"series"}`},
		{TurnEndData{Turn: 2, Reason: TurnEndReason{Kind: EndError, Error: &LLMFailure{Code: "c", Message: "m", Status: 503}}},
			`{"turn":2,"reason":{"kind":"error","error":{"code":"c","message":"m","status":503}}}`},
		{RetryData{Mode: RetryNormal, Turn: 1, Step: 1, Provider: "p", PolicyKey: "k", RetryID: "r", Retry: 1, DelayMs: 1000, MaxRetries: &max,
			Failure: LLMFailure{Code: "c", Message: "m"}},
			`{"mode":"normal","turn":1,"step":1,"provider":"p","policyKey":"k","retryId":"r","retry":1,"delayMs":1000,"maxRetries":10,"failure":{"code":"c","message":"m"}}`},
		{CompactionStartData{CompactionID: "k"}, `{"compactionId":"k","turn":null}`},
		{CompactionSummaryData{CompactionID: "k", Summary: []Block{TextBlock("s")}, ShadowedRange: SeqRange{3, 5}, ShadowedSeqs: []int64{3, 5},
			ShadowedTokenCount: 9, Provider: "p", Model: "m"},
			`{"compactionId":"k","summary":[{"type":"text","text":"s"}],"shadowedRange":{"start":3,"end":5},"shadowedSeqs":[3,5],"shadowedTokenCount":9,"provider":"p","model":"m"}`},
		{InboxSplicedData{Target: SpliceNextTurn, Inserted: []json.RawMessage{json.RawMessage(`{}`)}}, `{"target":"next-turn","start":0,"inserted":[{}]}`},
		{[]Block{{Type: BlockImage, Attachment: &Attachment{ID: "a", MediaType: "image/png", Bytes: 3, Width: 1, Height: 2}},
			{Type: BlockFile, Attachment: &Attachment{ID: "f", Bytes: 4, Name: "x.txt"}}},
			`[{"type":"image","attachment":{"attachmentId":"a","mediaType":"image/png","bytes":3,"width":1,"height":2}},{"type":"file","attachment":{"attachmentId":"f","bytes":4,"name":"x.txt"}}]`},
	}
	for _, c := range cases {
		got, err := EncodeData(c.v)
		if err != nil || string(got) != c.want {
			t.Errorf("%T: %s (%v)\nwant %s", c.v, got, err, c.want)
		}
	}
	for _, b := range []Block{{}, {Type: "video"}, {Type: BlockToolCall, Name: "x"}, {Type: BlockImage, Attachment: &Attachment{ID: "a", MediaType: "image/bmp", Width: 1, Height: 1}}} {
		if _, err := EncodeData(b); err == nil {
			t.Errorf("block %+v encoded", b)
		}
	}
	m, err := NewToolMessage("r1", "c1", true, []Block{TextBlock("no")})
	if err != nil {
		t.Fatal(err)
	}
	if w := `{"role":"tool","source":{"kind":"tool","callId":"c1"},"toolCallId":"c1","content":[{"type":"text","text":"no"}],"isError":true,"id":"r1"}`; string(m.JSON()) != w {
		t.Errorf("tool message %s", m.JSON())
	}
	m, err = NewMessage("a1", "assistant", ModelSource("p", "m"), nil)
	if err != nil || string(m.JSON()) != `{"role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"},"id":"a1"}` {
		t.Errorf("answer %s %v", m.JSON(), err)
	}
}
