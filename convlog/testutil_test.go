package convlog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"github.com/convkit/convkit/internal/rawjson"
	"os"
	"path/filepath"
	"testing"
)

func testHeader(id string) *Header {
	return &Header{Type: SessionLog, Version: CurrentVersion, ID: id, CreatedAt: 1790000000000, Cwd: "/home/u/proj"}
}

func userMsg(id, text string) []byte {
	return []byte(fmt.Sprintf(`{"content":[{"type":"text","text":%s}],"source":{"kind":"user"},"role":"user","id":%q}`, rawjson.AppendString(nil, text), id))
}

func assistantData(id, text string) []byte {
	content := "[]"
	if text != "" {
		t, _ := json.Marshal(text)
		content = fmt.Sprintf(`[{"type":"text","text":%s}]`, t)
	}
	return []byte(fmt.Sprintf(`{"turn":1,"step":1,"message":{"role":"assistant","content":%s,"source":{"kind":"model","provider":"p","model":"m"},"id":%q},"stream":[]}`, content, id))
}

// sampleEvents is one small turn.
func sampleEvents() []Event { return sampleTurn(1) }

// sampleTurn is turn n: one step, the user's message, an empty answer and
// an answer.
func sampleTurn(n int64) []Event {
	app := &SurfaceOp{}
	ts := fmt.Sprintf(`{"turn":%d,"step":1}`, n)
	answer := func(id, text string) []byte {
		return bytes.Replace(assistantData(id, text), []byte(`{"turn":1,"step":1,`), []byte(ts[:len(ts)-1]+","), 1)
	}
	sfx := ""
	if n > 1 {
		sfx = fmt.Sprint("-", n)
	}
	return []Event{
		{Type: "turn/start", Time: 1, Data: []byte(fmt.Sprintf(`{"turn":%d}`, n))},
		{Type: "step/start", Time: 2, Data: []byte(ts)},
		{Type: TypeUserMessage, Time: 3, Data: userMsg("u1"+sfx, "List the files <&>"), SurfaceOp: app},
		{Type: TypeAssistantMessage, Time: 4, Data: answer("a0"+sfx, ""), SurfaceOp: app},
		{Type: TypeAssistantMessage, Time: 5, Data: answer("a1"+sfx, "README.md"), SurfaceOp: app},
		{Type: "step/end", Time: 6, Data: []byte(ts)},
		{Type: TypeTurnEnd, Time: 7, Data: []byte(fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, n))},
	}
}

func writeLog(t testing.TB, dir, name string, comp Compression, batches ...[]Event) string {
	t.Helper()
	path := filepath.Join(dir, name)
	var first []Event
	if len(batches) > 0 {
		first = batches[0]
	}
	w, err := Create(path, testHeader("s1"), first, WriterOptions{Compression: comp})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches[min(1, len(batches)):] {
		if err := w.Append(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// readAll reads every event (cloned) and the stats.
func readAll(t testing.TB, path string) ([]Event, Stats, error) {
	t.Helper()
	r, err := Open(path, ReaderOptions{})
	if err != nil {
		return nil, Stats{}, err
	}
	defer r.Close()
	return drain(r)
}

// drain reads r to its end or first error: every event (cloned) and the
// stats.
func drain(r *Reader) ([]Event, Stats, error) {
	var evs []Event
	for e, err := range r.Events() {
		if err != nil {
			return evs, r.Stats(), err
		}
		evs = append(evs, e.Clone())
	}
	return evs, r.Stats(), nil
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
