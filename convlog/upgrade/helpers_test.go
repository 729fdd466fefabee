package upgrade

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convkit/convkit/convlog"
	"github.com/klauspost/compress/zstd"
)

// writeLog writes a plain log (header line, then one line per event).
func writeLog(t testing.TB, dir, name string, lines ...string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeZstdLog writes a compressed log: the header frame, then one frame
// holding the events.
func writeZstdLog(t testing.TB, dir, name string, lines ...string) string {
	t.Helper()
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	out := enc.EncodeAll([]byte(lines[0]+"\n"), nil)
	if len(lines) > 1 {
		out = enc.EncodeAll([]byte(strings.Join(lines[1:], "\n")+"\n"), out)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// upgradeAll reads the log at path through the upgrade chain and returns the
// header line and the event lines as the v4 writer encodes them. A copy of
// the log is published too (Publish writes lifted data where its line puts
// it), and the test fails unless a successor published holds those lines.
func upgradeAll(t testing.TB, path string, opts Options) (string, []string, error) {
	t.Helper()
	hdr, lines, err := upgradeLines(path, opts)
	body, rerr := os.ReadFile(path)
	if err != nil || rerr != nil {
		return hdr, lines, err
	}
	cp := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(cp, body, 0o600); err != nil {
		t.Fatal(err)
	}
	children := opts.Children
	if children == nil {
		children = []ChildFact{}
	}
	if dst, perr := Publish(cp, PublishOptions{Children: children}); perr == nil {
		phdr, plines, err := upgradeLines(dst, Options{})
		if err != nil || phdr != hdr || strings.Join(plines, "\n") != strings.Join(lines, "\n") {
			t.Fatalf("%s: the published successor differs (%v):\n%s\n%s\nagainst\n%s\n%s", filepath.Base(path),
				err, phdr, strings.Join(plines, "\n"), hdr, strings.Join(lines, "\n"))
		}
	}
	return hdr, lines, err
}

func upgradeLines(path string, opts Options) (string, []string, error) {
	r, err := Open(path, opts)
	if err != nil {
		return "", nil, err
	}
	defer r.Close()
	hdr := string(r.Header().AppendJSON(nil))
	var lines []string
	for ev, err := range r.Events() {
		if err != nil {
			return hdr, lines, err
		}
		lines = append(lines, string(ev.AppendJSON(nil)))
	}
	return hdr, lines, nil
}

// mustUpgrade upgrades a log and checks that the result is a valid v4 log:
// convlog reads it strictly and its history applies.
func mustUpgrade(t testing.TB, path string, opts Options) (string, []string) {
	t.Helper()
	hdr, lines, err := upgradeAll(t, path, opts)
	if err != nil {
		t.Fatalf("upgrade %s: %v", filepath.Base(path), err)
	}
	checkV4(t, hdr, lines)
	return hdr, lines
}

// checkV4 writes header and lines as a v4 log and reads it back strictly,
// applying every event to a History.
func checkV4(t testing.TB, hdr string, lines []string) *convlog.History {
	t.Helper()
	p := writeLog(t, t.TempDir(), "check.v4.jsonl", append([]string{hdr}, lines...)...)
	r, err := convlog.Open(p, convlog.ReaderOptions{})
	if err != nil {
		t.Fatalf("v4 header refused: %v\n%s", err, hdr)
	}
	defer r.Close()
	h := &convlog.History{}
	for ev, err := range r.Events() {
		if err != nil {
			t.Fatalf("v4 read: %v\n%s", err, strings.Join(lines, "\n"))
		}
		if err := h.Apply(ev); err != nil {
			t.Fatalf("history: %v\n%s", err, strings.Join(lines, "\n"))
		}
	}
	return h
}

// expectErr checks that err says want (and wraps kind when not nil).
func expectErr(t testing.TB, err error, want string, kind error) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	if !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %q", err, want)
	}
	if kind != nil && !errors.Is(err, kind) {
		t.Fatalf("error %q does not wrap %v", err, kind)
	}
}

// find returns the first line of type typ.
func find(t testing.TB, lines []string, typ string) string {
	t.Helper()
	for _, l := range lines {
		if strings.HasPrefix(l, `{"type":"`+typ+`"`) {
			return l
		}
	}
	t.Fatalf("no %s event in\n%s", typ, strings.Join(lines, "\n"))
	return ""
}

func countType(lines []string, typ string) int {
	n := 0
	for _, l := range lines {
		if strings.HasPrefix(l, `{"type":"`+typ+`"`) {
			n++
		}
	}
	return n
}

func contains(t testing.TB, line string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(line, p) {
			t.Fatalf("%s\ndoes not contain %s", line, p)
		}
	}
}

func sameFile(t testing.TB, a []byte, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Fatalf("%s changed", path)
	}
}

// logb builds a log's lines with consecutive seqs; time is 100+seq.
type logb struct {
	lines []string
	seq   int
}

func newLog(header string) *logb { return &logb{lines: []string{header}} }

// add appends an event; extra holds envelope members such as
// `"surfaceOp":"append"`.
func (b *logb) add(typ, data string, extra ...string) *logb {
	l := fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":%s`, typ, b.seq, 100+b.seq, data)
	for _, x := range extra {
		l += "," + x
	}
	b.lines = append(b.lines, l+"}")
	b.seq++
	return b
}

// raw appends a line as it is, counting n seqs.
func (b *logb) raw(line string, n int) *logb {
	b.lines = append(b.lines, line)
	b.seq += n
	return b
}

const app = `"surfaceOp":"append"`

func userMsg(id, text string) string {
	return `{"role":"user","id":"` + id + `","content":[{"type":"text","text":"` + text + `"}],"source":{"kind":"user"}}`
}

// start adds turn/start and step/start.
func (b *logb) start(turn, step int) *logb {
	if step == 1 {
		b.add("turn/start", fmt.Sprintf(`{"turn":%d}`, turn))
	}
	return b.add("step/start", fmt.Sprintf(`{"turn":%d,"step":%d}`, turn, step))
}

func asError(err error, target **Error) bool { return errors.As(err, target) }
