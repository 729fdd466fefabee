package inspect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
)

const header = `{"type":"session","version":4,"id":"s1","createdAt":1790000000000,"cwd":"/p","isSeeded":false,"delegationDepth":0}`

var goodLines = []string{
	`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
	`{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}`,
	`{"type":"user/message","seq":2,"time":2,"data":{"content":[{"type":"text","text":"hi there"}],"source":{"kind":"user"},"role":"user","id":"u1"},"surfaceOp":"append"}`,
	`{"type":"assistant/message","seq":3,"time":3,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"},"id":"a0"},"stream":[]},"surfaceOp":"append"}`,
	`{"type":"assistant/message","seq":4,"time":4,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"hello"}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a1"},"stream":[]},"surfaceOp":"append"}`,
	`{"type":"x/custom","seq":5,"time":5,"data":{},"ignorable":true}`,
	`{"type":"user/message","seq":6,"time":6,"data":{"content":[{"type":"text","text":"summary"}],"source":{"kind":"compact-basic"},"role":"user","id":"u2"},"sourceEventSeqs":[2,3,4],"surfaceOp":{"op":"replace","startSeq":2,"endSeq":4}}`,
	`{"type":"step/end","seq":7,"time":7,"data":{"turn":1,"step":1}}`,
	`{"type":"turn/end","seq":8,"time":7,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
}

func writeFile(t *testing.T, name string, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidateGood(t *testing.T) {
	p := writeFile(t, "s1.v4.jsonl", append([]string{header}, goodLines...)...)
	v, err := Validate(context.Background(), &Target{Path: p}, ValidateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Valid || v.Events != 9 || len(v.Problems) != 0 {
		t.Fatalf("validation = %+v", v)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	lines := append([]string{header}, goodLines...)
	lines[3] = `{"type":"user/message","seq":2,"time":2,"data":{"content":[],"source":{"kind":"user"},"role":"user"},"surfaceOp":"append"}` // no id
	lines[5] = `{"type":"assistant/message","seq":4,"time":4.5,"data":{},"surfaceOp":"append"}`                                             // bad time
	lines[7] = `{"type":"user/message","seq":6,"time":6,"data":{"content":[],"source":{"kind":"user"},"role":"user","id":"u2"},"surfaceOp":{"op":"replace","startSeq":40,"endSeq":41}}`
	p := writeFile(t, "s1.v4.jsonl", lines...)
	before, _ := os.ReadFile(p)
	v, err := Validate(context.Background(), &Target{Path: p}, ValidateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v.Valid {
		t.Fatal("a log with three problems is valid")
	}
	want := map[int64]string{4: "no id", 6: "time must be a safe integer", 8: "replaces 40..41"}
	got := map[int64]string{}
	for _, pr := range v.Problems {
		got[pr.Line] = pr.Message
	}
	for line, msg := range want {
		if !strings.Contains(got[line], msg) {
			t.Errorf("line %d: problem %q, want it to mention %q (all: %+v)", line, got[line], msg, v.Problems)
		}
	}
	after, _ := os.ReadFile(p)
	if !bytes.Equal(before, after) {
		t.Fatal("validate changed the file")
	}
}

func TestMeasureAndTornTail(t *testing.T) {
	lines := append([]string{header}, goodLines...)
	p := filepath.Join(t.TempDir(), "s1.v4.jsonl")
	content := strings.Join(lines, "\n") + "\n" + `{"type":"turn/st`
	os.WriteFile(p, []byte(content), 0o600)
	s, err := Measure(context.Background(), &Target{Path: p}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Events != 9 || !s.TornTail || s.TornBytes != int64(len(`{"type":"turn/st`)) {
		t.Fatalf("stats = %+v", s)
	}
	byType := map[string]int64{}
	for _, ts := range s.ByType {
		byType[ts.Type] = ts.Events
	}
	if byType["user/message"] != 2 || byType["assistant/message"] != 2 || byType["x/custom"] != 1 {
		t.Errorf("by type = %v", byType)
	}
	f, _ := Measure(context.Background(), &Target{Path: p}, Filter{"user/*"})
	if len(f.ByType) != 1 || f.ByType[0].Type != "user/message" {
		t.Errorf("filtered stats = %+v", f.ByType)
	}
}

func TestHistory(t *testing.T) {
	p := writeFile(t, "s1.v4.jsonl", append([]string{header}, goodLines[:5]...)...)
	h, err := History(context.Background(), &Target{Path: p})
	if err != nil {
		t.Fatal(err)
	}
	// The empty answer a0 is recorded but not in the history.
	if len(h) != 2 || h[0].ID != "u1" || h[1].ID != "a1" {
		t.Fatalf("history = %+v", h)
	}
	full := writeFile(t, "s1.v4.jsonl", append([]string{header}, goodLines...)...)
	h, err = History(context.Background(), &Target{Path: full})
	if err != nil {
		t.Fatal(err)
	}
	// The checkpoint replaced seqs 2..4.
	if len(h) != 1 || h[0].ID != "u2" || !strings.Contains(string(h[0].Source), "compact-basic") {
		t.Fatalf("history after replace = %+v", h)
	}
}

func TestRenderAndJSON(t *testing.T) {
	p := writeFile(t, "s1.v4.jsonl", append([]string{header}, goodLines...)...)
	var out bytes.Buffer
	if err := Show(context.Background(), &Target{Path: p}, &out, ShowOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`session log "s1", format v4`, "user: hi there", "[ignorable] [unknown]", "[replaces 2..4]"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("rendering lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := Show(context.Background(), &Target{Path: p}, &out, ShowOptions{JSON: true, Filter: Filter{"turn/*"}}); err != nil {
		t.Fatal(err)
	}
	want := goodLines[0] + "\n" + goodLines[8] + "\n"
	if out.String() != want {
		t.Fatalf("--json --type turn/* =\n%s\nwant\n%s", out.String(), want)
	}
}

func TestOlderVersionReadsRaw(t *testing.T) {
	h := `{"type":"session","version":0,"id":"s0","createdAt":1,"delegationDepth":0}`
	p := writeFile(t, "s0.jsonl", h,
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}`,
		`{"type":"text-chunks","seq0":2,"time0":2,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}`,
		`{"type":"step/end","seq":5,"time":5,"data":{"turn":1,"step":1}}`,
		`{"type":"turn/end","seq":6,"time":5,"data":{"turn":1,"reason":{"kind":"completed"}}}`)
	v, err := Validate(context.Background(), &Target{Path: p}, ValidateOptions{})
	if err != nil || !v.Valid || v.Events != 5 {
		t.Fatalf("v0 validation = %+v, %v", v, err)
	}
	// The history of an older log is read through the upgrade, in memory:
	// the packed chunks become the attempt's stream, not a message; the
	// v2→v3 step puts the (empty) system prompt in the first step.
	before, _ := os.ReadFile(p)
	if h, err := History(context.Background(), &Target{Path: p}); err != nil || len(h) != 1 || h[0].Role != "system" {
		t.Fatalf("history of a v0 log: %+v, %v", h, err)
	}
	if after, _ := os.ReadFile(p); !bytes.Equal(before, after) {
		t.Fatal("history changed the file")
	}
	_ = convlog.CurrentVersion
}

// rleFrame is a zstd frame (no checksum) of n RLE blocks of 128 KiB of b:
// 4 bytes on disk for each 128 KiB it decodes to.
func rleFrame(b byte, n int) []byte {
	out := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 7 << 3} // no size, no checksum; 128 KiB window
	for i := range n {
		bh := uint32(128<<10)<<3 | 1<<1 // an RLE block
		if i == n-1 {
			bh |= 1
		}
		out = append(out, byte(bh), byte(bh>>8), byte(bh>>16), b)
	}
	return out
}

// TestValidateBounded: problems past --max-problems are counted, not
// listed; a frame of 100 GiB of newlines (3.2 MB on disk) is read only
// until 10,000 problems past the limit, and a frame of 100 GiB of one
// byte only to the line limit.
func TestValidateBounded(t *testing.T) {
	lines := []string{header}
	for i := range 250 {
		lines = append(lines, fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":1,"data":{}`, i))
	}
	p := writeFile(t, "s1.v4.jsonl", lines...)
	v, err := Validate(context.Background(), &Target{Path: p}, ValidateOptions{MaxProblems: 30})
	if err != nil || v.Valid || len(v.Problems) != 30 || v.MoreProblems != 220 || v.StoppedAt != nil || v.MaxProblems != 30 {
		t.Fatalf("validation %d problems, %d more, stopped %v: %v", len(v.Problems), v.MoreProblems, v.StoppedAt, err)
	}
	if v.Problems[29].Line != 31 {
		t.Errorf("the 30th problem is on line %d", v.Problems[29].Line)
	}

	hdr := headerFrame(t)
	for _, tc := range []struct {
		name  string
		fill  byte
		check func(v *Validation) bool
	}{
		{"newlines", '\n', func(v *Validation) bool {
			return len(v.Problems) == DefaultMaxProblems && v.MoreProblems == maxUnlisted && v.StoppedAt != nil && v.StoppedAt.Line == DefaultMaxProblems+maxUnlisted+1
		}},
		{"one byte", 'a', func(v *Validation) bool {
			return len(v.Problems) == 2 && strings.Contains(v.Problems[1].Message, "longer than the limit") && v.StoppedAt == nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "s1.v4.jsonl.zst")
			os.WriteFile(p, append(bytes.Clone(hdr), rleFrame(tc.fill, 819200)...), 0o600)
			start := time.Now()
			v, err := Validate(context.Background(), &Target{Path: p}, ValidateOptions{})
			if err != nil || v.Valid || !tc.check(v) {
				t.Fatalf("%d problems (%v), %d more, stopped at %+v: %v", len(v.Problems), v.Problems[:min(2, len(v.Problems))], v.MoreProblems, v.StoppedAt, err)
			}
			t.Logf("%s: %v", tc.name, time.Since(start))
		})
	}
}

// headerFrame is the header frame of a compressed session log, as the
// writer writes it.
func headerFrame(t *testing.T) []byte {
	t.Helper()
	p := filepath.Join(t.TempDir(), "h.v4.jsonl.zst")
	w, err := convlog.Create(p, &convlog.Header{Type: convlog.SessionLog, Version: 4, ID: "s1", CreatedAt: 1790000000000, Cwd: "/p"}, nil, convlog.WriterOptions{Compression: convlog.Zstd})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestForkShapeRefused: a log of a fork of the runtime that keeps version
// 3 tool-result wrappers (user role) under a version 4 header is refused by
// --validate (its line, byte and rule) and by --history, as a version 4
// reader refuses it.
func TestForkShapeRefused(t *testing.T) {
	p := writeFile(t, "s1.v4.jsonl", header,
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}`,
		`{"type":"assistant/message","seq":2,"time":2,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"c1","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a1"},"stream":[]},"surfaceOp":"append"}`,
		`{"type":"tool/result","seq":3,"time":3,"data":{"turn":1,"step":1,"message":{"role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[]}],"source":{"kind":"tool","callId":"c1"},"id":"r1"}},"surfaceOp":"append"}`)
	v, err := Validate(context.Background(), &Target{Path: p}, ValidateOptions{})
	if err != nil || v.Valid || len(v.Problems) != 1 {
		t.Fatalf("validation = %+v, %v", v, err)
	}
	if pr := v.Problems[0]; pr.Line != 5 || pr.Offset == 0 || pr.Rule != "message" || !strings.Contains(pr.Message, `needs a toolCallId equal to its source's callId`) {
		t.Fatalf("problem %+v", pr)
	}
	if _, err := History(context.Background(), &Target{Path: p}); err == nil || !strings.Contains(err.Error(), "line 5, byte ") ||
		!strings.Contains(err.Error(), "needs a toolCallId") {
		t.Fatalf("history: %v", err)
	}
}

// TestValidateVectors: inspect --validate gives each of the format's test
// vectors (convlog/testdata/vectors) its verdict: valid, or a first
// problem at the manifest's line (or frame) with its rule.
func TestValidateVectors(t *testing.T) {
	dir := filepath.Join("..", "convlog", "testdata", "vectors")
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Vectors []struct {
			Name, Read, Rule string
			Files            []string
			Valid, Torn      bool
			Line, Frame      int64
		}
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, vec := range m.Vectors {
		if vec.Read != "log" {
			continue
		}
		for _, f := range vec.Files {
			n++
			v, err := Validate(context.Background(), &Target{Path: filepath.Join(dir, f)}, ValidateOptions{})
			if err != nil {
				t.Errorf("%s: %v", f, err)
				continue
			}
			if v.Valid != vec.Valid || v.TornTail != vec.Torn {
				t.Errorf("%s: valid %v torn %v, want %v %v: %+v", f, v.Valid, v.TornTail, vec.Valid, vec.Torn, v.Problems)
				continue
			}
			if vec.Valid {
				continue
			}
			p := v.Problems[0]
			line, frame := p.Line, p.Frame
			if line > 0 {
				frame = 0
			}
			if line != vec.Line || frame != vec.Frame || p.Rule != vec.Rule {
				t.Errorf("%s: first problem %+v, want line %d frame %d rule %s", f, p, vec.Line, vec.Frame, vec.Rule)
			}
		}
	}
	if n < 100 {
		t.Fatalf("only %d vectors read", n)
	}
}
