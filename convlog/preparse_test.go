package convlog

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand"
	"os"
	"runtime"
	"testing"

	"github.com/convkit/convkit/internal/rawjson"
)

// readWith reads every event (cloned) and every problem reported.
func readWith(t *testing.T, path string, opts ReaderOptions) ([]Event, []string, error) {
	t.Helper()
	var probs []string
	opts.OnProblem = func(fe *FormatError) { probs = append(probs, fe.Error()) }
	r, err := Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var evs []Event
	for e, err := range r.Events() {
		if err != nil {
			return evs, probs, err
		}
		evs = append(evs, e.Clone())
	}
	return evs, probs, nil
}

// TestPrefetchedLinesCheckedTheSame: the lines a prefetcher parses on its
// own goroutines give the events and the problems, with their positions,
// that the reader's own check gives (a LowMemory reader does not parse
// ahead).
func TestPrefetchedLinesCheckedTheSame(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("a log is prefetched on more than one core only")
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(1))
	var batches [][]Event
	for i := range 2500 {
		evs := sampleTurn(int64(i + 1))
		b := make([]byte, 600)
		rng.Read(b)
		evs[2].Data = userMsg(fmt.Sprint("u", i), base64.StdEncoding.EncodeToString(b))
		batches = append(batches, evs)
	}
	plain := writeLog(t, dir, "s1.v4.jsonl", Plain, batches...)
	lines := bytes.SplitAfter(mustRead(t, plain), []byte("\n"))
	// Damage lines far into the log, in several frames: each variant is
	// one the check must refuse at its own column, or accept (an escaped
	// key, which the prefetcher leaves to the reader).
	damage := []func([]byte) []byte{
		func(l []byte) []byte { return bytes.Replace(l, []byte(`"text":"`), []byte("\"text\":\"\xff"), 1) },
		func(l []byte) []byte { return bytes.Replace(l, []byte(`"time":3,`), []byte(`"time":3,"time":3,`), 1) },
		func(l []byte) []byte { return bytes.Replace(l, []byte(`{"type":`), []byte(`{"\u0074ype":`), 1) },
		func(l []byte) []byte { return bytes.Replace(l, []byte(`"text":"`), []byte("\"text\":\"\x01"), 1) },
		func(l []byte) []byte { return bytes.Replace(l, []byte(`"role":"user"`), []byte(`"role":"user",}`), 1) },
		func(l []byte) []byte { return bytes.Replace(l, []byte(`"seq":`), []byte(`"seq":-`), 1) },
	}
	n, refused := 0, 0
	for k := 3001; k < len(lines) && n < len(damage)*3; k += 997 {
		if bytes.Contains(lines[k], []byte(`"user/message"`)) {
			d := damage[n%len(damage)](lines[k])
			if bytes.Equal(d, lines[k]) {
				t.Fatalf("damage %d left line %d as it was", n, k)
			}
			lines[k] = d
			if n%len(damage) != 2 {
				refused++
			}
			n++
		} else {
			k -= 996 // the next line
		}
	}
	if n < len(damage) {
		t.Fatalf("damaged %d lines", n)
	}
	if err := os.WriteFile(plain, bytes.Join(lines, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	zst := noSizeLog(t, plain, "s1.v4.jsonl.zst", 40)
	if fi, _ := os.Stat(zst); fi.Size() < prefetchMinFile {
		t.Fatalf("log of %d bytes is too small to be prefetched", fi.Size())
	}
	got, gotProbs, gotErr := readWith(t, zst, ReaderOptions{})
	want, wantProbs, wantErr := readWith(t, zst, ReaderOptions{LowMemory: true})
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("error %v, want %v", gotErr, wantErr)
	}
	sameEvents(t, got, want)
	if len(wantProbs) != refused {
		t.Fatalf("%d problems for %d damaged lines: %q", len(wantProbs), n, wantProbs)
	}
	if len(gotProbs) != len(wantProbs) {
		t.Fatalf("problems %q, want %q", gotProbs, wantProbs)
	}
	for i := range gotProbs {
		if gotProbs[i] != wantProbs[i] {
			t.Fatalf("problem %d: %s, want %s", i, gotProbs[i], wantProbs[i])
		}
	}
	// And without a problem handler: the first problem ends the read.
	r, err := Open(zst, ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, err = range r.Events() {
		// err is what ended the read: nil at the end.
	}
	if err == nil || err.Error() != wantProbs[0] {
		t.Fatalf("error %v, want %s", err, wantProbs[0])
	}
}

// TestFramePreRestores: what the prefetcher keeps of a line rebuilds the
// members ObjectNested finds, and lines it cannot rebuild by slicing are
// left to the reader.
func TestFramePreRestores(t *testing.T) {
	text := []byte(`{"type":"a","seq":0,"time":1,"data":{"x":[1,{"y":2}],"message":{"id":"m","content":[]}}}` + "\n" +
		`{"type":"b","seq":1,"time":1,"data":{}}` + "\n" +
		`{"\u0074ype":"c","seq":2,"time":1,"data":{}}` + "\n" +
		`{"type":"d","type":"d"}` + "\n" +
		`{"type":"e","seq":4,"time":1,"data":{"message":"not an object"}}` + "\n" +
		`{"type":"f","seq":5,"time":1,"data":7}` + "\n" +
		`{"type":"g"`)
	var fp framePre
	fp.parse(text)
	lines := bytes.Split(text, []byte("\n"))
	if len(fp.lines) != len(lines)-1 {
		t.Fatalf("%d lines parsed, want %d (the last has no newline)", len(fp.lines), len(lines)-1)
	}
	for k, line := range lines[:len(lines)-1] {
		var want envelopeParser
		want.nested.Key, want.nestedMsg.Key, want.nested.Inner = "data", "message", &want.nestedMsg
		var err error
		want.members, err = rawjson.ObjectNested(line, nil, &want.nested)
		var got envelopeParser
		got.nested.Key, got.nestedMsg.Key, got.nested.Inner = "data", "message", &got.nestedMsg
		ok := fp.restore(k, &got)
		if wantOK := err == nil && !bytes.Contains(line, []byte(`\u`)); ok != wantOK {
			t.Fatalf("line %d restored %v, want %v", k, ok, wantOK)
		}
		if !ok {
			continue
		}
		same := func(what string, g, w []member) {
			if len(g) != len(w) {
				t.Fatalf("line %d %s: %d members, want %d", k, what, len(g), len(w))
			}
			for i := range g {
				if string(g[i].Key) != string(w[i].Key) || string(g[i].RawKey) != string(w[i].RawKey) || string(g[i].Value) != string(w[i].Value) ||
					g[i].KeyOff != w[i].KeyOff || g[i].ValOff != w[i].ValOff {
					t.Fatalf("line %d %s member %d: %+v, want %+v", k, what, i, g[i], w[i])
				}
			}
		}
		same("top", got.members, want.members)
		if got.nested.Found != want.nested.Found {
			t.Fatalf("line %d: data found %v, want %v", k, got.nested.Found, want.nested.Found)
		}
		if want.nested.Found {
			same("data", got.nested.Members, want.nested.Members)
			if got.nestedMsg.Found != want.nestedMsg.Found {
				t.Fatalf("line %d: message found %v, want %v", k, got.nestedMsg.Found, want.nestedMsg.Found)
			}
			if want.nestedMsg.Found {
				same("message", got.nestedMsg.Members, want.nestedMsg.Members)
			}
		}
	}
	if fp.restore(len(fp.lines), &envelopeParser{}) {
		t.Fatal("a line past the frame's restored")
	}
}

// TestPrefetchFramesPooled: the frames a closed prefetcher leaves in the
// pool (some queued or being decoded when its reader closed partway) give
// the next readers the events fresh frames give: two logs of different
// frame sizes read in turn, in several rounds.
func TestPrefetchFramesPooled(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("a log is prefetched on more than one core only")
	}
	var logs [2]string
	var want [2][]Event
	for k := range logs {
		dir := t.TempDir()
		rng := rand.New(rand.NewSource(int64(k + 7)))
		var batches [][]Event
		for i := range 1500 + 700*k {
			evs := sampleTurn(int64(i + 1))
			b := make([]byte, 900+300*k)
			rng.Read(b)
			evs[2].Data = userMsg(fmt.Sprint("u", i), base64.StdEncoding.EncodeToString(b))
			if i%50 == 0 {
				batches = append(batches, nil)
			}
			batches[len(batches)-1] = append(batches[len(batches)-1], evs...)
		}
		plain := writeLog(t, dir, "s1.v4.jsonl", Plain, batches...)
		logs[k] = noSizeLog(t, plain, "s1.v4.jsonl.zst", 30+50*k)
		if fi, _ := os.Stat(logs[k]); fi.Size() < prefetchMinFile {
			t.Fatalf("log of %d bytes is too small to be prefetched", fi.Size())
		}
		var err error
		if want[k], _, err = readWith(t, plain, ReaderOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		r, err := Open(logs[round%2], ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Left after some events, with frames in flight.
		n := 0
		for _, err := range r.Events() {
			if err != nil {
				t.Fatal(err)
			}
			if n++; n == 300*(round+1) {
				break
			}
		}
		if n != 300*(round+1) {
			t.Fatalf("round %d: %d events", round, n)
		}
		r.Close()
		for k := range logs {
			got, probs, err := readWith(t, logs[k], ReaderOptions{})
			if err != nil || len(probs) > 0 {
				t.Fatalf("round %d, log %d: %v %q", round, k, err, probs)
			}
			sameEvents(t, got, want[k])
		}
	}
}
