package convlog

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// TestPrefetchedRunsReadTheSame: small frames decoded ahead in runs give
// the events, problems, error and stats of frames read one at a time on
// one core, whatever the frames: cut inside lines, without a checksum,
// without a stated size, larger than a run, corrupt, or torn at the end.
func TestPrefetchedRunsReadTheSame(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(3))
	var batches [][]Event
	for i := range 2500 {
		evs := sampleTurn(int64(i + 1))
		b := make([]byte, 200+rng.Intn(900))
		rng.Read(b)
		evs[2].Data = userMsg(fmt.Sprint("u", i), base64.StdEncoding.EncodeToString(b))
		batches = append(batches, evs)
	}
	plain := mustRead(t, writeLog(t, dir, "s1.v4.jsonl", Plain, batches...))
	lines := bytes.SplitAfter(plain, []byte("\n"))
	for k := 5001; k < len(lines); k += 3001 {
		// A line refused, at its own column, in a frame far into the log.
		lines[k] = bytes.Replace(lines[k], []byte(`"seq":`), []byte(`"seq":-`), 1)
	}
	plain = bytes.Join(lines, nil)
	noSum, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(false))
	if err != nil {
		t.Fatal(err)
	}
	defer noSum.Close()
	type cut struct{ off, end int }
	var cuts []cut
	for off := len(lines[0]); off < len(plain); {
		n := 1 + rng.Intn(24<<10)
		switch rng.Intn(40) {
		case 0:
			n = 1 << 20 // larger than a run holds
		case 1:
			n = 3 << 20 // and than a frame decoded whole
		}
		if rng.Intn(2) == 0 {
			// Most frames end a line.
			if i := bytes.IndexByte(plain[min(off+n, len(plain)-1):], '\n'); i >= 0 {
				n += i + 1
			}
		}
		end := min(off+n, len(plain))
		cuts = append(cuts, cut{off, end})
		off = end
	}
	frames := [][]byte{encodeFrame(nil, plain[:len(lines[0])])}
	for i, c := range cuts {
		switch {
		case i%17 == 5:
			frames = append(frames, noSum.EncodeAll(plain[c.off:c.end], nil))
		case i%23 == 7:
			frames = append(frames, sizelessFrames(t, plain[c.off:c.end]))
		default:
			frames = append(frames, encodeFrame(nil, plain[c.off:c.end]))
		}
	}
	write := func(name string, fs [][]byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Join(fs, nil), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	corrupt := append([][]byte(nil), frames...)
	k := len(corrupt) * 2 / 3
	corrupt[k] = bytes.Clone(corrupt[k])
	corrupt[k][len(corrupt[k])-2] ^= 0x40 // its checksum
	whole := bytes.Join(frames, nil)
	logs := map[string]string{
		"clean":   write("s1.v4.jsonl.zst", frames),
		"corrupt": filepath.Join(dir, "c", "s1.v4.jsonl.zst"),
		"torn":    filepath.Join(dir, "t", "s1.v4.jsonl.zst"),
	}
	for _, d := range []string{"c", "t"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join("c", "s1.v4.jsonl.zst"), corrupt)
	write(filepath.Join("t", "s1.v4.jsonl.zst"), [][]byte{whole[:len(whole)-len(frames[len(frames)-1])/2]})
	type result struct {
		evs   []Event
		probs []string
		err   string
		stats Stats
	}
	read := func(path string, procs int, opts ReaderOptions) result {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		var res result
		opts.OnProblem = func(fe *FormatError) { res.probs = append(res.probs, fe.Error()) }
		r, err := Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		res.evs, res.stats, err = drain(r)
		if err != nil {
			res.err = err.Error()
		}
		return res
	}
	for name, path := range logs {
		want := read(path, 1, ReaderOptions{})
		if name == "clean" && (want.err != "" || len(want.probs) == 0) {
			t.Fatalf("%s: error %q, problems %q", name, want.err, want.probs)
		}
		if name != "clean" && want.err == "" && !want.stats.TornTail {
			t.Fatalf("%s: read to its end", name)
		}
		for _, opts := range []ReaderOptions{{}, {LowMemory: true}} {
			got := read(path, 2, opts)
			sameEvents(t, got.evs, want.evs)
			if got.err != want.err || !reflect.DeepEqual(got.probs, want.probs) || got.stats != want.stats {
				t.Fatalf("%s, low memory %v: error %q, problems %q, stats %+v;\nwant %q, %q, %+v",
					name, opts.LowMemory, got.err, got.probs, got.stats, want.err, want.probs, want.stats)
			}
		}
	}
}
