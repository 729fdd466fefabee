package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
)

// runtimeBin and convkitBin are the binaries TestMain builds: the example
// runtime and the convkit command that checks what it wrote.
var runtimeBin, convkitBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "example-runtime-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	runtimeBin, convkitBin = filepath.Join(dir, "runtime"), filepath.Join(dir, "convkit")
	code := 1
	if err := build(runtimeBin, "."); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else if err := build(convkitBin, "../../cmd/convkit"); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

func build(out, pkg string) error {
	cmd := exec.Command("go", "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return nil
}

// convkit runs the convkit command on the store in data; it returns its
// exit code, stdout and stderr.
func convkit(t *testing.T, data string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(convkitBin, append([]string{"--data-dir", data}, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	case err != nil:
		t.Fatal(err)
	}
	return 0, out.String(), errb.String()
}

// checkStore runs inspect --validate on every log of the store in data,
// and reindex --check.
func checkStore(t *testing.T, data string) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(data, "conversations", "*", "*.jsonl*"))
	if len(logs) == 0 {
		t.Fatal("no logs")
	}
	for _, p := range logs {
		if code, out, errs := convkit(t, data, "inspect", "--validate", p); code != 0 {
			t.Fatalf("inspect --validate %s: exit %d\n%s%s", p, code, out, errs)
		}
	}
	if code, out, errs := convkit(t, data, "reindex", "--check"); code != 0 {
		t.Fatalf("reindex --check: exit %d\n%s%s", code, out, errs)
	}
}

// types lists the event types of the log at path.
func types(t *testing.T, path string) []string {
	t.Helper()
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []string
	for e, err := range r.Events() {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e.Type)
	}
	return out
}

// TestRecord: the example records a conversation of every kind of turn,
// a fork after its compaction and a rewind, and exits 0; every log passes
// inspect --validate, reindex --check agrees, and list reads the index the
// runtime kept.
func TestRecord(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	out, err := exec.Command(runtimeBin, "-data", data).CombinedOutput()
	if err != nil {
		t.Fatalf("runtime: %v\n%s", err, out)
	}
	checkStore(t, data)
	code, stdout, stderr := convkit(t, data, "list")
	if code != 0 || strings.Contains(stderr, "listing from the logs") || strings.Count(stdout, "\n") != 4 {
		t.Fatalf("list: exit %d\n%s%s", code, stdout, stderr)
	}
	roots, _ := filepath.Glob(filepath.Join(data, "conversations", "example-*", "root.v4.jsonl.zst"))
	var root string
	for _, p := range roots {
		if !strings.Contains(p, "-fork") && !strings.Contains(p, "-rewind") {
			root = p
		}
	}
	got := " " + strings.Join(types(t, root), " ") + " "
	for _, want := range []string{"llm/retry", "llm/retry-started", "assistant/attempt", "tool/call", "tool/result",
		"subagent/catalog", "compaction/prune", "image/offload", "compaction/start", "compaction/summary", "compaction/end", "turn/end"} {
		if !strings.Contains(got, " "+want+" ") {
			t.Errorf("the root session records no %s: %s", want, got)
		}
	}
	b, _ := os.ReadFile(root)
	plain, err := exec.Command("zstd", "-dc", root).Output()
	if err == nil {
		b = plain
	}
	for _, want := range []string{`"interrupted":true`, `"kind":"error","error":{"code":"context_length_exceeded"`, `"content":[]`,
		`"source":{"kind":"compact-basic"}`, `"sourceCommandId":`, `"targets":[{"seq":`} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the root session holds no %s", want)
		}
	}
}

// TestLive: while the example holds runtime.lock recording turns, list
// reads the index, reindex --check exits 0, and reindex is refused naming
// the holder; the example exits 0 and leaves a store that checks.
func TestLive(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	// Live until the checks are done (an interrupt ends it after its
	// turn): on a loaded machine a fixed window can close before them.
	cmd := exec.Command(runtimeBin, "-data", data, "-live", "2m")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || lines.Text() != "live: holding runtime.lock" {
		cmd.Process.Kill()
		t.Fatalf("runtime: %q %s", lines.Text(), stderr.String())
	}
	time.Sleep(300 * time.Millisecond)
	for i := 0; i < 3; i++ {
		code, out, errs := convkit(t, data, "list")
		if code != 0 || strings.Contains(errs, "listing from the logs") || !strings.Contains(out, "running") && !strings.Contains(out, "live-") {
			t.Errorf("list beside the runtime: exit %d\n%s%s", code, out, errs)
		}
		if code, out, errs := convkit(t, data, "reindex", "--check"); code != 0 {
			t.Errorf("reindex --check beside the runtime: exit %d\n%s%s", code, out, errs)
		}
		if code, _, errs := convkit(t, data, "reindex"); code != 11 || !strings.Contains(errs, "example runtime") {
			t.Errorf("reindex beside the runtime: exit %d\n%s", code, errs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var rest strings.Builder
	for lines.Scan() {
		rest.WriteString(lines.Text() + "\n")
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("runtime: %v\n%s%s", err, rest.String(), stderr.String())
	}
	if !strings.Contains(rest.String(), "turns recorded") || stderr.Len() > 0 {
		t.Fatalf("runtime: %s%s", rest.String(), stderr.String())
	}
	checkStore(t, data)
}
