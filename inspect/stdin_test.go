package inspect

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
)

type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

const stdinHeader = `{"type":"session","version":4,"id":"s1","createdAt":1,"isSeeded":false,"delegationDepth":0}` + "\n"

// TestStdinCopyLimit: the copy of stdin stops at its fixed bound, whatever
// the free space, leaving nothing in $TMPDIR; within it, the log is read.
func TestStdinCopyLimit(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	defer func(l int64) { stdinCopyLimit = l }(stdinCopyLimit)
	stdinCopyLimit = 1 << 20
	z := &zeros{}
	_, err := Stdin(context.Background(), io.MultiReader(strings.NewReader(stdinHeader), z), t.TempDir())
	if _, ok := err.(*TooLargeError); !ok || err.Error() != "<stdin> holds more than 1048576 bytes, the most inspect - copies" {
		t.Errorf("Stdin of endless bytes: %v", err)
	}
	if z.n > 1<<20+64<<10 {
		t.Errorf("read %d bytes of stdin", z.n)
	}
	log := stdinHeader + `{"type":"turn/start","seq":0,"time":2,"data":{"turn":1}}` + "\n"
	tg, err := Stdin(context.Background(), strings.NewReader(log), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	v, err := Validate(context.Background(), tg, ValidateOptions{})
	if err != nil || !v.Valid || v.Events != 1 || tg.Path != StdinName {
		t.Errorf("Validate of the copy: %+v, %v", v, err)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		t.Errorf("left in TMPDIR: %v", ents)
	}
}
