package rawjson

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchLines are event lines of the shapes logs hold: small lifecycle
// events, messages, a request header with tool definitions (objects of
// a few keys, many of them), a streamed answer.
func benchLines() [][]byte {
	tools := `[` + strings.Repeat(`{"name":"bash","description":"Run a shell command in the workspace and return its output.","parameters":{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}},`, 10) + `{"name":"x","description":"d","parameters":{}}]`
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40)
	var texts []string
	for i := range 60 {
		texts = append(texts, fmt.Sprintf("%q", fmt.Sprint("token ", i, " ")))
	}
	stream := `[{"type":"chunk","time":5,"chunk":{"type":"block-start","index":0,"blockType":"text"}},{"type":"text-chunks","time0":6,"index":0,"dt":[` +
		strings.TrimSuffix(strings.Repeat("3,", 59), ",") + `],"texts":[` + strings.Join(texts, ",") + `]},{"type":"chunk","time":10,"chunk":{"type":"usage","usage":{"inputTokens":10,"outputTokens":60}}}]`
	return [][]byte{
		[]byte(`{"type":"turn/start","seq":0,"time":1790000000001,"data":{"turn":1}}`),
		[]byte(`{"type":"step/start","seq":1,"time":1790000000002,"data":{"turn":1,"step":1}}`),
		[]byte(`{"type":"user/message","seq":2,"time":1790000000003,"data":{"content":[{"type":"text","text":"please look at the failing test"}],"source":{"kind":"user"},"role":"user","id":"u1"},"surfaceOp":"append"}`),
		[]byte(`{"type":"request/header","seq":3,"time":1790000000004,"data":{"header":{"config":{"provider":"p","model":"m"},"tools":` + tools + `},"reason":"initial"}}`),
		[]byte(`{"type":"assistant/message","seq":4,"time":1790000000005,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"` + text[:200] + `"}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a1"},"usage":{"inputTokens":10,"outputTokens":60},"stream":` + stream + `},"surfaceOp":"append"}`),
		[]byte(`{"type":"tool/result","seq":5,"time":1790000000006,"data":{"turn":1,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"c1"},"toolCallId":"c1","content":[{"type":"text","text":"` + text + `"}],"id":"r1"}},"sourceEventSeqs":[4],"surfaceOp":"append"}`),
		[]byte(`{"type":"turn/end","seq":6,"time":1790000000007,"data":{"turn":1,"reason":{"kind":"completed"}}}`),
	}
}

// BenchmarkObject is the envelope scan of every line a reader reads:
// syntax, UTF-8, nesting and duplicate keys checked.
func BenchmarkObject(b *testing.B) {
	lines := benchLines()
	n := 0
	for _, l := range lines {
		n += len(l)
	}
	b.SetBytes(int64(n))
	var buf [10]Member
	for b.Loop() {
		for _, l := range lines {
			if _, err := Object(l, buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkGetFrom is the upgrade chain's lookups of a member near the
// start of a large value: a block-end's block type, a message's id.
func BenchmarkGetFrom(b *testing.B) {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", 400)
	entry := []byte(`{"type":"chunk","time":9,"chunk":{"type":"block-end","index":0,"block":{"type":"text","text":"` + text + `"}}}`)
	data := []byte(`{"turn":1,"step":1,"message":{"role":"tool","source":{"kind":"tool","callId":"c1"},"toolCallId":"c1","content":[{"type":"text","text":"` + text + `"}],"id":"r1"}}`)
	b.SetBytes(int64(len(entry) + len(data)))
	for b.Loop() {
		if t := Get(GetFrom(GetFrom(entry, "chunk"), "block"), "type"); string(t) != `"text"` {
			b.Fatalf("block type %s", t)
		}
		if id := Get(GetFrom(data, "message"), "id"); string(id) != `"r1"` {
			b.Fatalf("message id %s", id)
		}
	}
}

// BenchmarkCorpus checks every line of the log RAWJSON_CORPUS names (one
// of scripts/genlog's, e.g. -lines short) as the reader does: the envelope
// with the members of data and data.message kept; "oracle" is the same
// with the checker of oracle_test.go, for figures from one run. cpu-MB/s
// is from the process's CPU time (the machine is shared).
func BenchmarkCorpus(b *testing.B) {
	path := os.Getenv("RAWJSON_CORPUS")
	if path == "" {
		b.Skip("RAWJSON_CORPUS names no log")
	}
	text, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(text, []byte("\n")), []byte("\n"))
	for _, c := range []struct {
		name  string
		check func([]byte, []Member, *Nested) ([]Member, error)
	}{{"check", ObjectNested}, {"oracle", oldObjectNested}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			var buf []Member
			n := &Nested{Key: "data", Inner: &Nested{Key: "message"}}
			cpu0 := cpuTime()
			for b.Loop() {
				for _, l := range lines {
					if buf, err = c.check(l, buf, n); err != nil {
						b.Fatal(err)
					}
				}
			}
			if d := cpuTime() - cpu0; d > 0 {
				b.ReportMetric(float64(len(text))*float64(b.N)/d.Seconds()/1e6, "cpu-MB/s")
			}
		})
	}
}

// cpuTime is the CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStringScan is the scan of one long string body of each kind: a
// log with an escape a line, base64, code with escapes every few bytes, a
// short one; cpu-MB/s as in BenchmarkCorpus.
func BenchmarkStringScan(b *testing.B) {
	for _, c := range []struct{ name, body string }{
		{"log", strings.Repeat(`2026-09-01T01:03:58.698Z INFO  worker-7 processed batch 3838 in 613ms (ok)\n`, 1<<14)},
		{"base64", strings.Repeat(`hXYmtiCcOdC1EYHyxyl5Hl3ijCrT5Ttfniw9H2SdVmAvvWhMCSFys8/Itf/uNTE6u/+YkpZ+bkmQSwuqhzeU10J`, 1<<14)},
		{"code", strings.Repeat(`\t\treturn fmt.Errorf(\"urfotr yomovest: %w\", err)\n\t// negrneun the tase before beatma returns.\n`, 1<<14)},
		{"short", `\t// peasen the vigereme before mipodeus returns.\n\t\treturn fmt.Errorf(\"padous tienat: %w\", err)\n@@ -395,10 +148,14 @@ func chviro()\nindex 0aa3c6f..30e0745 100644\n\t}\n`},
	} {
		s := []byte(`"` + c.body + `"}`)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			cpu0 := cpuTime()
			defer func() { b.ReportMetric(float64(len(s))*float64(b.N)/(cpuTime()-cpu0).Seconds()/1e6, "cpu-MB/s") }()
			for b.Loop() {
				if e, err := skipString(s, 0); err != nil || e != len(s)-1 {
					b.Fatal(e, err)
				}
			}
		})
	}
}
