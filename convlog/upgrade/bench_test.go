package upgrade

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convkit/convkit/convlog"
)

// genV3 writes a v3 log of about size bytes shaped like a real session:
// prompts, request headers with tool definitions, streamed answers, tool
// calls and lifted tool results.
func genV3(tb testing.TB, dir string, size int) string {
	tb.Helper()
	var sb strings.Builder
	sb.WriteString(v3Header + "\n")
	seq := 0
	add := func(typ, data string, extra ...string) {
		fmt.Fprintf(&sb, `{"type":%q,"seq":%d,"time":%d,"data":%s`, typ, seq, 1000+seq, data)
		for _, x := range extra {
			sb.WriteString("," + x)
		}
		sb.WriteString("}\n")
		seq++
	}
	tools := `[` + strings.Repeat(`{"name":"bash","description":"Run a shell command in the workspace and return its output.","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}},`, 10) + `{"name":"x","description":"d","parameters":{}}]`
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40)
	var texts []string
	for i := 0; i < 60; i++ {
		texts = append(texts, fmt.Sprintf("%q", "token "+fmt.Sprint(i)+" "))
	}
	stream := `[{"type":"chunk","time":5,"chunk":{"type":"block-start","index":0,"blockType":"text"}},{"type":"text-chunks","time0":6,"index":0,"dt":[` +
		strings.TrimSuffix(strings.Repeat("3,", 59), ",") + `],"texts":[` + strings.Join(texts, ",") + `]},{"type":"chunk","time":9,"chunk":{"type":"block-end","index":0,"block":{"type":"text","text":"` + text[:200] + `"}}},{"type":"chunk","time":10,"chunk":{"type":"usage","usage":{"inputTokens":10,"outputTokens":60}}},{"type":"chunk","time":11,"chunk":{"type":"finish","reason":{"kind":"stop"}}}]`
	for turn := 1; sb.Len() < size; turn++ {
		add("turn/start", fmt.Sprintf(`{"turn":%d}`, turn))
		add("step/start", fmt.Sprintf(`{"turn":%d,"step":1}`, turn))
		add("user/message", userMsg(fmt.Sprintf("u%d", turn), "please look"), app)
		add("request/header", `{"header":{"config":{"provider":"p","model":"m"},"tools":`+tools+`},"reason":"initial"}`)
		add("assistant/message", fmt.Sprintf(`{"turn":%d,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"%s"},{"type":"tool-call","id":"c%d","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a%d"},"usage":{"inputTokens":10,"outputTokens":60},"stream":%s}`, turn, text[:200], turn, turn, stream), app)
		add("tool/call", fmt.Sprintf(`{"turn":%d,"step":1,"callId":"c%d","name":"bash","arguments":"{}"}`, turn, turn))
		add("tool/result", fmt.Sprintf(`{"turn":%d,"step":1,"message":{"role":"user","id":"r%d","content":[{"type":"tool-result","toolCallId":"c%d","content":[{"type":"text","text":"%s"}]}],"source":{"kind":"tool","callId":"c%d"}}}`, turn, turn, turn, text, turn), fmt.Sprintf(`"sourceEventSeqs":[%d]`, seq-1), app)
		add("step/end", fmt.Sprintf(`{"turn":%d,"step":1}`, turn))
		add("turn/end", fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, turn))
	}
	p := filepath.Join(dir, "s.v3.jsonl")
	if err := os.WriteFile(p, []byte(sb.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

func BenchmarkUpgradeV3(b *testing.B) {
	p := genV3(b, b.TempDir(), 32<<20)
	fi, _ := os.Stat(p)
	b.SetBytes(fi.Size())
	b.ResetTimer()
	var buf []byte
	for i := 0; i < b.N; i++ {
		r, err := Open(p, Options{})
		if err != nil {
			b.Fatal(err)
		}
		for ev, err := range r.Events() {
			if err != nil {
				b.Fatal(err)
			}
			buf = ev.AppendJSON(buf[:0])
		}
		r.Close()
	}
}

// BenchmarkReadV3 is the floor: the convlog reader alone.
func BenchmarkReadV3(b *testing.B) {
	p := genV3(b, b.TempDir(), 32<<20)
	fi, _ := os.Stat(p)
	b.SetBytes(fi.Size())
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := convlog.Open(p, convlog.ReaderOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for _, err := range r.Events() {
			if err != nil {
				b.Fatal(err)
			}
		}
		r.Close()
	}
}

func BenchmarkPublishV3Zstd(b *testing.B) {
	dir := b.TempDir()
	p := genV3(b, dir, 32<<20)
	fi, _ := os.Stat(p)
	b.SetBytes(fi.Size())
	z := convlog.Zstd
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		dst, err := Publish(p, PublishOptions{Compression: &z, Children: []ChildFact{}})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		os.Remove(dst)
		b.StartTimer()
	}
}
