//go:build linux

package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/convkit/convkit/fixtures"
)

// openPty opens a pseudo-terminal: what is written to tty is read from
// the returned buffer (filled by a goroutine until the test ends).
func openPty(t *testing.T) (tty *os.File, read func() string) {
	t.Helper()
	tty, _, read = openPtyTyped(t)
	return tty, read
}

// openPtyTyped is openPty with a way to type on the terminal: what type
// writes, a program reads from tty (a line at a time, as typed).
func openPtyTyped(t *testing.T) (tty *os.File, typeIn func(string), read func() string) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		t.Skipf("unlock the pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		master.Close()
		t.Skipf("pseudo-terminal number: %v", err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		t.Skipf("open the pseudo-terminal: %v", err)
	}
	var mu sync.Mutex
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			mu.Lock()
			buf.Write(b[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		tty.Close()
		master.Close()
		<-done
	})
	typeIn = func(s string) {
		if _, err := master.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	return tty, typeIn, func() string {
		time.Sleep(50 * time.Millisecond) // let the reader drain what was written
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
}

// TestBinaryToTerminalRefused: an archive is never written to a terminal
// (exit 2, with a hint, before anything is read), as zstd refuses; to a
// file or a pipe it is.
func TestBinaryToTerminalRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	rep, err := fixtures.Generate(dir, fixtures.Options{Seed: 3, Conversations: fixtures.SpecialCases})
	if err != nil {
		t.Fatal(err)
	}
	basic := rep.Find(fixtures.CaseBasic).ID
	tty, read := openPty(t)
	for _, args := range [][]string{{"backup", "--to", "-"}, {"export", basic, "--to", "-"}, {"--json", "export", "--to", "-", basic}} {
		var errb bytes.Buffer
		code := Main(context.Background(), append([]string{"convkit", "--data-dir", dir}, args...), strings.NewReader(""), tty, &errb,
			func(string) string { return "" })
		stderr := errb.String()
		if code != exitUsage || !strings.Contains(stderr, "convkit: error: refusing to write a binary archive to a terminal\n") ||
			!strings.Contains(stderr, "convkit: hint: redirect stdout to a file or a pipe") {
			t.Errorf("%q to a terminal: exit %d, stderr %q; want exit 2 and the hint", args, code, stderr)
		}
	}
	if got := read(); got != "" {
		t.Errorf("the terminal received %q", got)
	}
	// --dry-run writes no archive: its plan may go to the terminal.
	var out bytes.Buffer
	if code := Main(context.Background(), []string{"convkit", "--data-dir", dir, "backup", "--to", "-", "--dry-run"}, nil, &out, io.Discard,
		func(string) string { return "" }); code != 0 {
		t.Errorf("backup --to - --dry-run: exit %d", code)
	}
	// Not a terminal: written.
	f, err := os.Create(filepath.Join(t.TempDir(), "out.tar.zst"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if code := Main(context.Background(), []string{"convkit", "--data-dir", dir, "export", basic, "--to", "-"}, nil, f, io.Discard,
		func(string) string { return "" }); code != 0 {
		t.Fatalf("export --to - to a file: exit %d", code)
	}
	if fi, _ := f.Stat(); fi.Size() == 0 {
		t.Error("export --to - wrote nothing to a file")
	}
}

// TestProgressOnTerminal: on a terminal, a job's bar says what it counts,
// and it is gone when the result is printed; -q draws none.
func TestProgressOnTerminal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := fixtures.Generate(dir, fixtures.Options{Seed: 3, Conversations: 40}); err != nil {
		t.Fatal(err)
	}
	tty, read := openPty(t)
	var out bytes.Buffer
	code := Main(context.Background(), []string{"convkit", "--data-dir", dir, "reindex"}, nil, &out, tty, func(string) string { return "" })
	if code != exitPartial {
		t.Fatalf("reindex: exit %d", code)
	}
	got := read()
	if !regexp.MustCompile(`% \|[^|]*\| +reindex: \d+/40 conversations \[0s\]`).MatchString(got) || strings.Contains(got, "/s") {
		t.Errorf("the terminal shows %q: want the bar of conversations, with the total and no rate (too early)", got)
	}
	if strings.Contains(out.String(), "reindex: ") {
		t.Error("the bar went to stdout")
	}

	tty2, read2 := openPty(t)
	code = Main(context.Background(), []string{"convkit", "--data-dir", dir, "-q", "reindex"}, nil, io.Discard, tty2, func(string) string { return "" })
	if code != exitPartial {
		t.Fatalf("-q reindex: exit %d", code)
	}
	if got := read2(); strings.Contains(got, "reindex: ") {
		t.Errorf("-q drew a bar: %q", got)
	}
}

// TestDeleteAsksOnTerminal: with stdin a terminal, delete lists what it is
// about to delete and deletes only on yes; --yes does not ask. From a
// script (stdin not a terminal) it does not ask (the other tests).
func TestDeleteAsksOnTerminal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	rep, err := fixtures.Generate(dir, fixtures.Options{Seed: 3, Conversations: fixtures.SpecialCases})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range rep.Conversations {
		if len(c.Cases) == 1 && c.Cases[0] == fixtures.CaseHistorical && len(ids) < 3 {
			ids = append(ids, c.ID)
		}
	}
	if len(ids) < 3 {
		t.Fatalf("want three ordinary conversations, found %d", len(ids))
	}
	exists := func(id string) bool {
		p, _ := reader(t, dir).ConversationPath(id)
		_, err := os.Lstat(p)
		return err == nil
	}
	del := func(tty *os.File, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Main(context.Background(), append([]string{"convkit", "--data-dir", dir, "delete"}, args...), tty, &out, &errb,
			func(string) string { return "" })
		return code, out.String(), errb.String()
	}

	tty, typeIn, _ := openPtyTyped(t)
	typeIn("n\n")
	code, stdout, stderr := del(tty, ids[0][:8])
	if code != exitFailure || stdout != "" || !exists(ids[0]) ||
		!strings.Contains(stderr, "delete "+ids[0]+` "`) || !strings.Contains(stderr, "convkit: delete 1 conversation(s), ") ||
		!strings.Contains(stderr, "? [y/N] ") || !strings.Contains(stderr, "nothing was deleted: the answer was not yes") {
		t.Fatalf("answered n: exit %d, stdout %q, stderr %q; want exit 1, the question, nothing deleted", code, stdout, stderr)
	}

	typeIn("yes\n")
	code, stdout, stderr = del(tty, ids[0][:8], ids[1])
	if code != 0 || stdout != "deleted "+ids[0]+"\ndeleted "+ids[1]+"\n" || exists(ids[0]) || exists(ids[1]) ||
		!strings.Contains(stderr, "convkit: delete 2 conversation(s), ") {
		t.Fatalf("answered yes: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}

	code, stdout, stderr = del(tty, "--yes", ids[2])
	if code != 0 || stdout != "deleted "+ids[2]+"\n" || stderr != "" || exists(ids[2]) {
		t.Fatalf("--yes: exit %d, stdout %q, stderr %q; want no question", code, stdout, stderr)
	}
}

// TestBarAndLinesOnOneTerminal: migrate with stdout and stderr on one
// terminal prints a line per log while its bar is drawn; no line the
// terminal shows holds both.
func TestBarAndLinesOnOneTerminal(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := fixtures.Generate(dir, fixtures.Options{Seed: 3, Conversations: 30}); err != nil {
		t.Fatal(err)
	}
	tty, read := openPty(t)
	code := Main(context.Background(), []string{"convkit", "--data-dir", dir, "migrate"}, nil, tty, tty, func(k string) string {
		if k == "TMPDIR" {
			return t.TempDir()
		}
		return ""
	})
	if code != exitFailure { // the corrupt log
		t.Fatalf("migrate: exit %d", code)
	}
	lines := screen(read())
	logLine := regexp.MustCompile(`\[\d+/\d+\] "`)
	bars, logLines := 0, 0
	for _, l := range lines {
		bar := strings.Contains(l, "migrate: ") && strings.Contains(l, " logs [")
		log := logLine.MatchString(l)
		if bar {
			bars++
		}
		if log {
			logLines++
		}
		if bar && log || bar && strings.Contains(l, "Summary:") {
			t.Errorf("the terminal shows a line with the bar and other output: %q", l)
		}
	}
	if logLines < 20 {
		t.Errorf("%d per-log lines on the terminal:\n%s", logLines, strings.Join(lines, "\n"))
	}
	t.Logf("%d lines, %d per-log lines, %d with the bar left on them", len(lines), logLines, bars)
}
