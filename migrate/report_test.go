package migrate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/convkit/convkit/internal/dshroot"
)

func TestErrorChain(t *testing.T) {
	pathErr := &fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}
	cases := []struct {
		err  error
		want string
	}{
		{errors.New("plain"), "*errors.errorString"},
		{pathErr, "*fs.PathError > syscall.Errno"},
		{fmt.Errorf("reading: %w", pathErr), "*fmt.wrapError > *fs.PathError > syscall.Errno"},
		{errors.Join(pathErr, errors.New("b")), "*errors.joinError (*fs.PathError > syscall.Errno; *errors.errorString)"},
	}
	for _, c := range cases {
		if got := errorChain(c.err); got != c.want {
			t.Errorf("errorChain(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// One kind of failure has one error name, in the runtime's words, whatever
// the source version or the code that refused it: an unknown event type in
// a v0 log (refused by the upgrade chain) and in a v3 log (refused by the
// reader) alike; never a Go type.
func TestErrorNames(t *testing.T) {
	root := t.TempDir()
	unknown := `{"type":"unrecognized/required","seq":%d,"time":%d,"data":{}}`
	session(t, root, 0, "a-v0", "", "", unknown)
	session(t, root, 3, "b-v3", "", "", unknown)
	session(t, root, 3, "c-v3", "", "", unknown)
	put(t, root, "flat.jsonl", hdr(0, "flat", "", ""))
	put(t, root, "_no-cwd/d-bad/session.v4.jsonl", "not a log")
	sum, _ := runSessions(t, root, Options{Jobs: 2})
	names := map[string]string{}
	for _, g := range sum.FailureGroups {
		if strings.ContainsAny(g.ErrorName, "*.") {
			t.Errorf("group %s: error name %q is a Go type", g.Reason, g.ErrorName)
		}
		if prev, ok := names[g.Reason]; ok && prev != g.ErrorName {
			t.Errorf("%s: error names %q and %q", g.Reason, prev, g.ErrorName)
		}
		names[g.Reason] = g.ErrorName
	}
	want := map[string]string{"unknown_event": "SessionFormatUnsupportedError", "other": "Error", "corrupt_log": "SessionPersistenceCorruptionError"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("error names %v, want %v\n%+v", names, want, sum.FailureGroups)
	}
	if len(sum.FailureGroups) != 4 { // unknown_event of v0, of v3; other; corrupt_log
		t.Fatalf("%d groups: %+v", len(sum.FailureGroups), sum.FailureGroups)
	}
}

// migration.log ends with summary.json's bytes, as the runtime's does; a
// finished run's summary says interrupted false.
func TestLogEndsWithSummary(t *testing.T) {
	root := t.TempDir()
	session(t, root, 3, "s", "", "")
	sum, _ := runSessions(t, root, Options{})
	log, err := os.ReadFile(sum.TextLogPath)
	if err != nil {
		t.Fatal(err)
	}
	js, err := os.ReadFile(sum.SummaryPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(log, js) || !bytes.Contains(log, []byte("\nJSON summary: "+sum.SummaryPath+"\n{\n")) {
		t.Fatalf("migration.log does not end with summary.json:\n%s", log)
	}
	if !bytes.Contains(js, []byte(`"interrupted": false`)) {
		t.Fatalf("summary.json:\n%s", js)
	}
}

// An interrupted run says so in the product's words and in summary.json;
// no Go error text reaches the lines.
func TestInterruptedRun(t *testing.T) {
	root := t.TempDir()
	for i := range 4 {
		session(t, root, 3, fmt.Sprintf("s%d", i), "", "")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	r, _ := dshroot.Open(root)
	sum, err := RunSessions(ctx, r, Options{Jobs: 1, ReportDir: t.TempDir(), OnEvent: lines(&out),
		BeforePublish: func(string) { cancel() }})
	if !errors.Is(err, context.Canceled) || sum == nil || !sum.Interrupted {
		t.Fatalf("err %v, summary %+v", err, sum)
	}
	if !strings.Contains(out.String(), "\nInterrupted: stopped after 1 of 4 input(s); the rest were not worked on, and a rerun goes on from what is done\n") ||
		strings.Contains(out.String(), "context canceled") {
		t.Fatalf("output:\n%s", out.String())
	}
	js, _ := os.ReadFile(sum.SummaryPath)
	if !bytes.Contains(js, []byte(`"interrupted": true`)) {
		t.Fatalf("summary.json:\n%s", js)
	}
}
