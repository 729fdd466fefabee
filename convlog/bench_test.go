package convlog

import (
	"encoding/base64"
	"fmt"
	"github.com/convkit/convkit/internal/rawjson"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Benchmarks over a generated v4 log of about 64 MiB of realistic events:
// user and assistant messages with text, tool calls with multi-KB output,
// now and then a base64 image. Set CONVLOG_BENCH_DIR to keep the generated
// logs (for comparing with the zstd tool on the same file):
//
//	CONVLOG_BENCH_DIR=/tmp/cb go test -run '^$' -bench . ./convlog
//	time zstd -dc /tmp/cb/bench.v4.jsonl.zst > /dev/null

const benchTarget = 64 << 20

var benchWords = strings.Fields(`the a to of and in is it that for on with as this be are you can file
function return error value list read write config path test build run go package import type struct
func main string int len make map slice append range if else for break continue defer panic recover
the user asked assistant answer tool call result output directory module version update change fix
bug issue review commit branch merge diff patch line column byte offset frame header event session
conversation store index migrate backup restore export import lock runtime model request response`)

type benchGen struct {
	rng *rand.Rand
	seq int64
}

func (g *benchGen) words(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			if g.rng.IntN(12) == 0 {
				b.WriteString(".\n")
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(benchWords[g.rng.IntN(len(benchWords))])
	}
	return b.String()
}

// toolOutput looks like a directory listing or source code, a few KB.
func (g *benchGen) toolOutput() string {
	var b strings.Builder
	n := 40 + g.rng.IntN(300)
	code := g.rng.IntN(2) == 0
	for i := range n {
		if code {
			fmt.Fprintf(&b, "%4d\t%sif err := %s(%s); err != nil {\n", i+1, strings.Repeat("\t", g.rng.IntN(4)),
				benchWords[g.rng.IntN(len(benchWords))], benchWords[g.rng.IntN(len(benchWords))])
		} else {
			fmt.Fprintf(&b, "-rw-r--r-- 1 user user %8d Jan %2d 12:%02d %s_%d.go\n", g.rng.IntN(1<<20), 1+g.rng.IntN(28),
				g.rng.IntN(60), benchWords[g.rng.IntN(len(benchWords))], g.rng.IntN(1000))
		}
	}
	return b.String()
}

func (g *benchGen) add(evs []Event, typ string, data []byte, surface bool, sources ...int64) []Event {
	e := Event{Type: typ, Time: 1790000000000 + g.seq*137, Data: data, SourceEventSeqs: sources}
	if surface {
		e.SurfaceOp = &SurfaceOp{}
	}
	g.seq++
	return append(evs, e)
}

// turn appends the events of one agent turn.
func (g *benchGen) turn(evs []Event, turn int) []Event {
	q := func(s string) string { return string(rawjson.AppendString(nil, s)) }
	evs = g.add(evs, "turn/start", fmt.Appendf(nil, `{"turn":%d}`, turn), false)
	content := fmt.Sprintf(`[{"type":"text","text":%s}]`, q(g.words(20+g.rng.IntN(150))))
	if g.rng.IntN(25) == 0 {
		img := make([]byte, 24<<10+g.rng.IntN(72<<10))
		for i := range img {
			img[i] = byte(g.rng.Uint32())
		}
		content = fmt.Sprintf(`[{"type":"text","text":"see the screenshot"},{"type":"image","attachment":{"attachmentId":"img%d","mediaType":"image/png","bytes":%d,"width":1440,"height":900},"data":"%s"}]`,
			g.seq, len(img), base64.StdEncoding.EncodeToString(img))
	}
	evs = g.add(evs, TypeUserMessage, fmt.Appendf(nil, `{"role":"user","content":%s,"source":{"kind":"user"},"id":"u%d"}`, content, g.seq), true)
	steps := 1 + g.rng.IntN(4)
	for step := 1; step <= steps; step++ {
		evs = g.add(evs, "step/start", fmt.Appendf(nil, `{"turn":%d,"step":%d}`, turn, step), false)
		callID := fmt.Sprintf("call_%d_%d", turn, step)
		args := fmt.Sprintf(`{"path":"/home/u/proj/%s","pattern":%s}`, benchWords[g.rng.IntN(len(benchWords))], q(g.words(3)))
		text := g.words(30 + g.rng.IntN(200))
		evs = g.add(evs, TypeAssistantMessage, fmt.Appendf(nil,
			`{"turn":%d,"step":%d,"message":{"role":"assistant","content":[{"type":"text","text":%s},{"type":"tool-call","id":%q,"name":"read","arguments":%s}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"},"id":"a%d"},"stream":[{"type":"text-chunks","time0":1,"index":0,"dt":[3],"texts":[%s,%s]}],"usage":{"inputTokens":%d,"outputTokens":%d}}`,
			turn, step, q(text), callID, q(args), g.seq, q(text[:len(text)/2]), q(text[len(text)/2:]), g.rng.IntN(100000), g.rng.IntN(4000)), true)
		callSeq := g.seq
		evs = g.add(evs, "tool/call", fmt.Appendf(nil, `{"turn":%d,"step":%d,"callId":%q,"name":"read","arguments":%s}`, turn, step, callID, q(args)), false)
		evs = g.add(evs, TypeToolResult, fmt.Appendf(nil,
			`{"turn":%d,"step":%d,"message":{"role":"tool","source":{"kind":"tool","callId":%q},"toolCallId":%q,"content":[{"type":"text","text":%s}],"isError":false,"id":"r%d"}}`,
			turn, step, callID, callID, q(g.toolOutput()), g.seq), true, callSeq)
		evs = g.add(evs, "step/end", fmt.Appendf(nil, `{"turn":%d,"step":%d}`, turn, step), false)
	}
	// The answer is a step of its own, as a turn's path requires.
	last := steps + 1
	evs = g.add(evs, "step/start", fmt.Appendf(nil, `{"turn":%d,"step":%d}`, turn, last), false)
	evs = g.add(evs, TypeAssistantMessage, fmt.Appendf(nil,
		`{"turn":%d,"step":%d,"message":{"role":"assistant","content":[{"type":"text","text":%s}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"},"id":"a%d"},"stream":[]}`,
		turn, last, q(g.words(50+g.rng.IntN(300))), g.seq), true)
	evs = g.add(evs, "step/end", fmt.Appendf(nil, `{"turn":%d,"step":%d}`, turn, last), false)
	return g.add(evs, TypeTurnEnd, fmt.Appendf(nil, `{"turn":%d,"reason":{"kind":"completed"}}`, turn), false)
}

var benchData = sync.OnceValues(func() ([][]Event, int64) {
	g := &benchGen{rng: rand.New(rand.NewPCG(1, 2))}
	var all []Event
	size := int64(len(testHeader("bench").AppendJSON(nil)) + 1)
	for turn := 1; size < benchTarget; turn++ {
		n := len(all)
		all = g.turn(all, turn)
		for i := n; i < len(all); i++ {
			e := all[i]
			e.Seq = int64(i)
			size += int64(len(e.AppendJSON(nil))) + 1
		}
	}
	var batches [][]Event
	for len(all) > 0 {
		k := min(len(all), 20)
		batches = append(batches, all[:k])
		all = all[k:]
	}
	return batches, size
})

// writeBenchLog writes the generated events to path with Create and
// Append batches of 20 events.
func writeBenchLog(b *testing.B, path string, comp Compression) {
	batches, _ := benchData()
	w, err := Create(path, testHeader("bench"), batches[0], WriterOptions{Compression: comp})
	if err != nil {
		b.Fatal(err)
	}
	for _, batch := range batches[1:] {
		if err := w.Append(batch); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

// benchLog returns a generated log, writing it once.
func benchLog(b *testing.B, comp Compression) (string, int64) {
	dir := os.Getenv("CONVLOG_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	path := filepath.Join(dir, FileName("bench", CurrentVersion, comp))
	if _, err := os.Stat(path); err != nil {
		writeBenchLog(b, path, comp)
	}
	_, size := benchData()
	return path, size
}

func benchRead(b *testing.B, comp Compression) {
	path, size := benchLog(b, comp)
	b.SetBytes(size)
	b.ReportAllocs()
	defer reportCPU(b, cpuTime())
	for b.Loop() {
		r, err := Open(path, ReaderOptions{})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, err := range r.Events() {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		st := r.Stats()
		r.Close()
		if st.PlainBytes != size || st.TornTail {
			b.Fatalf("read %d plain bytes of %d, stats %+v", st.PlainBytes, size, st)
		}
	}
}

func BenchmarkReadPlain(b *testing.B) { benchRead(b, Plain) }
func BenchmarkReadZstd(b *testing.B)  { benchRead(b, Zstd) }

// BenchmarkValidate reads the plain log and checks every event with a
// Validator, as inspect --validate and reindex do: the cost of the rules
// beyond one line is its time less BenchmarkReadPlain's.
func BenchmarkValidate(b *testing.B) {
	path, size := benchLog(b, Plain)
	b.SetBytes(size)
	b.ReportAllocs()
	defer reportCPU(b, cpuTime())
	for b.Loop() {
		r, err := Open(path, ReaderOptions{})
		if err != nil {
			b.Fatal(err)
		}
		v := NewValidator(r.Header())
		for e, err := range r.Events() {
			if err != nil {
				b.Fatal(err)
			}
			if err := v.Check(e); err != nil {
				b.Fatal(r.RuleProblem(err))
			}
		}
		r.Close()
	}
}

// reportCPU reports the CPU seconds per operation since start.
func reportCPU(b *testing.B, start time.Duration) {
	if b.N > 0 {
		b.ReportMetric((cpuTime()-start).Seconds()/float64(b.N), "cpu-s/op")
	}
}

func benchWrite(b *testing.B, comp Compression) {
	_, size := benchData()
	dir := b.TempDir()
	b.SetBytes(size)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		path := filepath.Join(dir, FileName(fmt.Sprintf("w%d", i), CurrentVersion, comp))
		writeBenchLog(b, path, comp)
		b.StopTimer()
		os.Remove(path)
		b.StartTimer()
		i++
	}
}

// The write benchmarks include one fsync per batch of 20 events, as every
// durable append does.
func BenchmarkWritePlain(b *testing.B) { benchWrite(b, Plain) }
func BenchmarkWriteZstd(b *testing.B)  { benchWrite(b, Zstd) }
