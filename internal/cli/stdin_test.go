package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"testing"
)

// countingReader counts what inspect - took from stdin.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// repeat is an endless stream of one byte.
type repeat byte

func (b repeat) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

const stdinHeader = `{"type":"session","version":4,"id":"s1","createdAt":1,"isSeeded":false,"delegationDepth":0}` + "\n"

// TestInspectStdinDecidesFirst: inspect - decides from the first bytes
// whether a log begins there (the zstd magic, or a header line within the
// line limit); endless bytes that begin none are refused having read one
// buffer, naming <stdin> and the position, with nothing copied to $TMPDIR.
func TestInspectStdinDecidesFirst(t *testing.T) {
	for _, c := range []struct {
		name  string
		stdin io.Reader
		want  string
		most  int64 // bytes read at most
	}{
		{"zeros", repeat(0), "<stdin>: line 1 column 1, byte 0: header line is not valid JSON", 64 << 10},
		{"text", repeat('a'), "<stdin>: line 1 column 1, byte 0: header line is not valid JSON", 64 << 10},
		{"a NUL in the header", io.MultiReader(strings.NewReader(`  {"type":"session"`), repeat(0)), "<stdin>: line 1 column 20, byte 0: header line is not valid JSON", 64 << 10},
		{"an endless header", io.MultiReader(strings.NewReader(`{"type":"`), repeat('a')), "<stdin>: line 1: no newline within the limit of 67108864 bytes", 64<<20 + 64<<10},
		{"a bad header line", io.MultiReader(strings.NewReader("{\"type\":\"session\"}\n"), repeat(0)), "<stdin>: line 1 column 1, byte 0: ", 64 << 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			in := &countingReader{r: c.stdin}
			var out, errb bytes.Buffer
			code := Main(context.Background(), []string{"convkit", "inspect", "-"}, in, &out, &errb, func(string) string { return "" })
			if code != exitFailure || !strings.HasPrefix(errb.String(), "convkit: error: "+c.want) || out.Len() != 0 {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out.String(), errb.String(), c.want)
			}
			if in.n > c.most {
				t.Errorf("read %d bytes of stdin, want at most %d", in.n, c.most)
			}
			if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
				t.Errorf("left in TMPDIR: %v", ents)
			}
		})
	}
}

// TestInspectStdinCopyLimit: the copy of stdin stops at its fixed bound,
// whatever the free space.
func TestInspectStdinCopyLimit(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	defer func(l int64) { stdinCopyLimit = l }(stdinCopyLimit)
	stdinCopyLimit = 1 << 20
	in := &countingReader{r: io.MultiReader(strings.NewReader(stdinHeader), repeat(0))}
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"convkit", "inspect", "-"}, in, &out, &errb, func(string) string { return "" })
	if code != exitFailure || !strings.Contains(errb.String(), "convkit: error: <stdin> holds more than 1048576 bytes, the most inspect - copies") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
	if in.n > 1<<20+64<<10 {
		t.Errorf("read %d bytes of stdin", in.n)
	}
	// Within it, the log is read.
	errb.Reset()
	log := stdinHeader + `{"type":"turn/start","seq":0,"time":2,"data":{"turn":1}}` + "\n"
	code = Main(context.Background(), []string{"convkit", "inspect", "--validate", "-"}, strings.NewReader(log), &out, &errb, func(string) string { return "" })
	if code != 0 || !strings.Contains(out.String(), "<stdin>: valid, format v4, 1 events\n") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
}
