package convlog

import (
	"bytes"
	"fmt"
	"github.com/klauspost/compress/zstd"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// aheadEverywhere decodes every streamed frame ahead (prefetch.go), seven
// bytes a chunk, until the test ends.
func aheadEverywhere(t *testing.T) {
	minFrame, chunk, procs := streamMinFrame, aheadChunkLen, runtime.GOMAXPROCS(2)
	streamMinFrame, aheadChunkLen = 0, 7
	t.Cleanup(func() { streamMinFrame, aheadChunkLen = minFrame, chunk; runtime.GOMAXPROCS(procs) })
}

// TestHostileInputDecodedAhead reads every hostile log with its frames
// decoded ahead on a goroutine: the same events, the same errors at the
// same positions.
func TestHostileInputDecodedAhead(t *testing.T) {
	aheadEverywhere(t)
	for _, tc := range hostileCases() {
		t.Run(tc.name, func(t *testing.T) { runHostile(t, tc) })
	}
}

// TestFuzzCorpusDecodedAhead reads the reader's fuzz corpus with streamed
// frames decoded ahead, under fuzzRead's checks (the text read is what
// zstd decodes; every error a *FormatError naming the file).
func TestFuzzCorpusDecodedAhead(t *testing.T) {
	aheadEverywhere(t)
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzReader", "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		corpus, err := parseCorpusBytes(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		t.Run(filepath.Base(f), func(t *testing.T) {
			for _, onProblem := range []bool{false, true} {
				fuzzRead(t, corpus, Zstd, onProblem)
			}
		})
	}
}

// parseCorpusBytes reads a corpus file of one []byte value ("go test fuzz
// v1").
func parseCorpusBytes(data []byte) ([]byte, error) {
	lines := strings.SplitN(strings.TrimSpace(string(data)), "\n", 2)
	if len(lines) != 2 || lines[0] != "go test fuzz v1" {
		return nil, fmt.Errorf("not a corpus file of one value")
	}
	v := strings.TrimSpace(lines[1])
	if !strings.HasPrefix(v, "[]byte(") || !strings.HasSuffix(v, ")") {
		return nil, fmt.Errorf("not a []byte value: %.40q", v)
	}
	s, err := strconv.Unquote(v[len("[]byte(") : len(v)-1])
	return []byte(s), err
}

// TestOneFrameDecodedAhead reads a log held in one zstd frame (as the zstd
// tool writes it), whole and damaged in several ways, with the frame
// decoded ahead on a goroutine and without: the same events, stats and
// errors.
func TestOneFrameDecodedAhead(t *testing.T) {
	const turns = 6000
	dir := t.TempDir()
	var evs []Event
	for n := int64(1); n <= turns; n++ {
		evs = append(evs, sampleTurn(n)...)
	}
	plain := mustRead(t, writeLog(t, dir, "s1.v4.jsonl", Plain, evs))
	if len(plain) <= smallFrameContent {
		t.Fatalf("the log is %d bytes: its frame would be decoded whole", len(plain))
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		t.Fatal(err)
	}
	one := enc.EncodeAll(plain, nil)
	// A frame that does not state its size, as a stream writer makes it.
	var unsized bytes.Buffer
	enc.Reset(&unsized)
	if _, err := enc.Write(plain); err != nil || enc.Close() != nil {
		t.Fatal(err)
	}
	flip := func(at int) []byte { b := bytes.Clone(one); b[at] ^= 0x5a; return b }
	for _, tc := range []struct {
		name string
		data []byte
		opts ReaderOptions
	}{
		{"whole", one, ReaderOptions{}},
		{"damaged checksum", flip(len(one) - 2), ReaderOptions{}},
		{"damaged block", flip(len(one) / 2), ReaderOptions{}},
		{"torn", one[:len(one)*2/3], ReaderOptions{}},
		{"size not stated", unsized.Bytes(), ReaderOptions{}},
		{"a line over the limit", one, ReaderOptions{MaxLineBytes: 150}},
		{"over the decode limit", one, ReaderOptions{MaxPlainBytes: int64(len(plain)) / 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s1.v4.jsonl.zst")
			if err := os.WriteFile(path, tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			read := func(ahead bool) ([]Event, Stats, string) {
				minFrame := streamMinFrame
				defer func() { streamMinFrame = minFrame }()
				if ahead {
					aheadEverywhere(t)
				} else {
					streamMinFrame = 1 << 62
				}
				evs, st, _, err := readLogStrict(path, tc.opts)
				msg := ""
				if err != nil {
					msg = err.Error()
				}
				return evs, st, msg
			}
			evs, st, msg := read(false)
			aEvs, aSt, aMsg := read(true)
			if len(aEvs) != len(evs) || aSt != st || aMsg != msg {
				t.Fatalf("decoded ahead: %d events, %+v, %q; not: %d events, %+v, %q", len(aEvs), aSt, aMsg, len(evs), st, msg)
			}
			for i := range evs {
				if !bytes.Equal(aEvs[i].Raw, evs[i].Raw) {
					t.Fatalf("event %d differs: %q, %q", i, aEvs[i].Raw, evs[i].Raw)
				}
			}
			if (tc.name == "whole" || tc.name == "size not stated") && (len(evs) != 7*turns || msg != "") {
				t.Fatalf("%d events, %q", len(evs), msg)
			}
			if !strings.HasPrefix(tc.name, "whole") && tc.name != "torn" && tc.name != "size not stated" && msg == "" {
				t.Fatalf("accepted")
			}
		})
	}
}
