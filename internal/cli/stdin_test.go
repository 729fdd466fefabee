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
