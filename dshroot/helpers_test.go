package dshroot

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// hdr is a hand-written session header of version v, in the key order of
// its version (v0/v1 have no isSeeded); cwd and parent may be empty.
func hdr(v int, id, cwd, parent string) string {
	h := fmt.Sprintf(`{"type":"session","version":%d,"id":%q,"createdAt":%d`, v, id, 1000+len(id))
	if cwd != "" {
		h += fmt.Sprintf(`,"cwd":%q`, cwd)
	}
	if parent != "" {
		h += fmt.Sprintf(`,"parentSession":%q`, parent)
	}
	if v >= 2 {
		h += `,"isSeeded":false`
	}
	if parent != "" {
		h += `,"origin":"subagent"`
	}
	depth := 0
	if parent != "" {
		depth = 1
	}
	return h + fmt.Sprintf(`,"delegationDepth":%d}`, depth)
}

// turn is one hand-written turn of events (seq from 0).
func turn(extra ...string) []string {
	lines := []string{
		`{"type":"turn/start","seq":0,"time":10,"data":{"turn":1}}`,
		`{"type":"step/start","seq":1,"time":11,"data":{"turn":1,"step":1}}`,
		`{"type":"user/message","seq":2,"time":12,"data":{"role":"user","id":"m1","content":[{"type":"text","text":"hello"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"step/end","seq":3,"time":13,"data":{"turn":1,"step":1}}`,
		`{"type":"turn/end","seq":4,"time":14,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	}
	for i, x := range extra {
		lines = append(lines, fmt.Sprintf(x, 5+i, 15+i))
	}
	return lines
}

// put writes a plain file under root, creating its directories.
func put(t testing.TB, root, rel string, lines ...string) string {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	body := ""
	if len(lines) > 0 {
		body = strings.Join(lines, "\n") + "\n"
	}
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

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
