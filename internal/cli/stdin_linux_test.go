//go:build linux

package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/convkit/convkit/internal/archive"
)

// TestInspectStdinBounded: what inspect - copies from stdin is bounded by
// the free space of $TMPDIR's file system less 64 MiB: past it, inspect
// stops reading, says so and removes its copy. $TMPDIR is a small tmpfs
// (mount(2) needs root; without it the test says so and skips).
func TestInspectStdinBounded(t *testing.T) {
	tmp := t.TempDir()
	if err := syscall.Mount("tmpfs", tmp, "tmpfs", 0, "size=72m"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): the bound is not checked", err)
	}
	defer syscall.Unmount(tmp, 0)
	t.Setenv("TMPDIR", tmp)
	free, _, ok := archive.FreeSpace(tmp)
	if !ok || free < 64<<20 {
		t.Fatalf("free space of the tmpfs: %d, %v", free, ok)
	}
	// A plain log's header, then more zeros than fit: the reader never
	// sees it whole.
	header := `{"type":"session","version":4,"id":"s1","createdAt":1,"isSeeded":false,"delegationDepth":0}` + "\n"
	stdin := io.MultiReader(strings.NewReader(header), io.LimitReader(zeros{}, free))
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"convkit", "inspect", "-"}, stdin, &out, &errb, func(string) string { return "" })
	if code != exitFailure || !strings.Contains(errb.String(), "convkit: error: <stdin> holds more than ") ||
		!strings.Contains(errb.String(), "the free space in "+tmp+" less 64 MiB") || !strings.Contains(errb.String(), "convkit: hint: write it to a file") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left in TMPDIR: %v", ents)
	}

	// Within the bound it reads.
	out.Reset()
	errb.Reset()
	log := header + `{"type":"turn/start","seq":0,"time":2,"data":{"turn":1}}` + "\n"
	code = Main(context.Background(), []string{"convkit", "inspect", "--validate", "-"}, strings.NewReader(log), &out, &errb, func(string) string { return "" })
	if code != 0 || out.String() != "<stdin>: valid, format v4, 1 events\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left in TMPDIR: %v", ents)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
