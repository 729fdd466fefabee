package dshroot

import (
	"path/filepath"
	"testing"

	"github.com/convkit/convkit/internal/handlog"
)

// Hand-written lines and files (package handlog).
var (
	hdr  = handlog.Header
	turn = handlog.Turn
	put  = handlog.Put
)

// session writes a plain generation of version v for session id under the
// project directory its cwd gives: the place the runtime puts it.
func session(t testing.TB, root string, v int, id, cwd, parent string, extra ...string) string {
	t.Helper()
	dir, err := SessionDir(id)
	if err != nil {
		t.Fatal(err)
	}
	return put(t, root, filepath.Join(ProjectDir(cwd), dir, GenerationName(v, 0, "")), append([]string{hdr(v, id, cwd, parent)}, turn(extra...)...)...)
}
