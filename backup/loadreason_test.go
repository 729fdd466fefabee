package backup

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadProblemLeavesOutPath: a log that cannot be opened is reported
// beside its path, so the reason does not name the path again.
func TestLoadProblemLeavesOutPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "c1")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(file, "s1.v4.jsonl") // its parent is a file: ENOTDIR
	l := load(&job{name: "conversations/c1/s1.v4.jsonl", path: path}, false, false)
	if l.problem == "" || l.vanished {
		t.Fatalf("problem %q, vanished %v: want a problem", l.problem, l.vanished)
	}
	if strings.Contains(l.problem, path) {
		t.Errorf("problem %q repeats the path %s", l.problem, path)
	}
}
