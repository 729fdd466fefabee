//go:build unix

package crashtest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/convkit/convkit/convlog"
)

// TestSIGKILLRuntimeAppend: the example runtime appends steps to a
// session log through the store's typed calls, printing each once it is
// durable, and is killed with SIGKILL at random moments, each run after
// the log was given a torn tail (half a zstd frame). A last run finishes.
// The log then passes inspect --validate, has no torn tail, and holds
// every step a run printed exactly once; no step is written twice.
func TestSIGKILLRuntimeAppend(t *testing.T) {
	kills, seed := killPlan(t, "")
	rng := rand.New(rand.NewPCG(seed, 3))
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	runtimeBin := filepath.Join(t.TempDir(), "runtime")
	cmd := exec.Command("go", "build", "-o", runtimeBin, "./examples/runtime")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/runtime: %v\n%s", err, out)
	}
	data := filepath.Join(t.TempDir(), "data")
	acked := map[string]int{}
	// run runs the runtime for n steps, killed after delay (0: not), and
	// takes the steps it printed.
	run := func(n int, delay time.Duration) {
		t.Helper()
		c := exec.Command(runtimeBin, "-data", data, "-append", fmt.Sprint(n))
		out, err := c.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		c.Stderr = &stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		if delay > 0 {
			timer := time.AfterFunc(delay, func() { c.Process.Signal(syscall.SIGKILL) })
			defer timer.Stop()
		}
		lines := bufio.NewScanner(out)
		for lines.Scan() {
			acked[lines.Text()]++
		}
		err = c.Wait()
		if delay == 0 && err != nil {
			t.Fatalf("runtime -append %d: %v\n%s", n, err, stderr.String())
		}
		if ws, ok := c.ProcessState.Sys().(syscall.WaitStatus); delay > 0 && err != nil && !(ok && ws.Signaled()) {
			t.Fatalf("runtime -append %d failed before its kill: %v\n%s", n, err, stderr.String())
		}
	}
	run(3, 0)
	logPath := func() string {
		m, _ := filepath.Glob(filepath.Join(data, "conversations", "append", "root.v4.jsonl*"))
		if len(m) != 1 {
			t.Fatalf("session logs %v", m)
		}
		return m[0]
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		t.Fatal(err)
	}
	for k := uint64(0); k < kills; k++ {
		// A torn tail: a frame cut before its line's end (its last 4
		// bytes are the checksum), as a kill during its write leaves it.
		frame := enc.EncodeAll([]byte(`{"type":"step/start","seq":999999,"time":1,"data":{"turn":1,"step":1}}`+"\n"), nil)
		// It takes the place of a torn tail the last kill left, if any:
		// a log has one torn tail, the end of the write a crash cut.
		committed := cutTornTail(t, logPath())
		f, err := os.OpenFile(logPath(), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(frame[:1+rng.IntN(len(frame)-7)], committed); err != nil {
			t.Fatal(err)
		}
		f.Close()
		run(100000, time.Duration(20+rng.IntN(180))*time.Millisecond)
	}
	run(3, 0)
	if code, out, errs := runConvkit(t, data, "inspect", "--validate", logPath()); code != 0 {
		t.Fatalf("inspect --validate: exit %d\n%s%s", code, out, errs)
	}
	r, err := convlog.Open(logPath(), convlog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	logged := map[string]int{}
	for e, err := range r.Events() {
		if err != nil {
			t.Fatal(err)
		}
		var kind string
		switch e.Type {
		case convlog.TypeStepStart:
			kind = "start"
		case convlog.TypeStepEnd:
			kind = "end"
		default:
			continue
		}
		var ts convlog.TurnStep
		if err := json.Unmarshal(e.Data, &ts); err != nil {
			t.Fatal(err)
		}
		logged[fmt.Sprintf("step %d %d %s", ts.Turn, ts.Step, kind)]++
	}
	if r.Stats().TornTail {
		t.Fatal("the log has a torn tail after the last run")
	}
	for s, n := range logged {
		if n != 1 {
			t.Fatalf("%s is written %d times", s, n)
		}
	}
	for s, n := range acked {
		if n != 1 || logged[s] != 1 {
			t.Fatalf("%s was printed %d times and is written %d times", s, n, logged[s])
		}
	}
	if len(acked) < 2*6 {
		t.Fatalf("only %d steps printed over %d runs", len(acked), kills+2)
	}
	t.Logf("%d runs, %d kills: %d step events printed, %d written", kills+2, kills, len(acked), len(logged))
}

// cutTornTail cuts the torn tail of the log at path, if any, and returns
// its length.
func cutTornTail(t *testing.T, path string) int64 {
	t.Helper()
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, err := range r.Events() {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Truncate(path, r.Stats().CommittedBytes); err != nil {
		t.Fatal(err)
	}
	return r.Stats().CommittedBytes
}

// runConvkit runs the convkit binary TestMain built on the store in data.
func runConvkit(t *testing.T, data string, args ...string) (int, string, string) {
	t.Helper()
	c := exec.Command(bin, append([]string{"--data-dir", data}, args...)...)
	var out, errs strings.Builder
	c.Stdout, c.Stderr = &out, &errs
	err := c.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errs.String()
	} else if err != nil {
		t.Fatal(err)
	}
	return 0, out.String(), errs.String()
}
