// Package handlog writes session logs by hand, line by line, for tests
// that must not read only what the fixtures package writes: headers of any
// version in that version's key order, a turn, and plain files placed
// under a root.
package handlog

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Header is a hand-written session header of version v, in the key order of
// its version (v0/v1 have no isSeeded); cwd and parent may be empty.
func Header(v int, id, cwd, parent string) string {
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

// Turn is one hand-written turn of events (seq from 0); each extra is a
// line with a %d for its seq and one for its time, appended after it.
func Turn(extra ...string) []string {
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

// Put writes a plain file under root, creating its directories.
func Put(t testing.TB, root, rel string, lines ...string) string {
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
