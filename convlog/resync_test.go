package convlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResyncStillReportsGaps: after a damaged line the next good line may
// carry the damaged line's seq or the one after, but a larger jump is a gap
// of its own.
func TestResyncStillReportsGaps(t *testing.T) {
	hdr := `{"type":"session","version":4,"id":"s1","createdAt":1,"isSeeded":false,"delegationDepth":0}`
	rows := []string{hdr,
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"turn/start","seq":1,"time":1,"data":{"turn":1}}`,
		`{not json`,
		`{"type":"turn/start","seq":100,"time":1,"data":{"turn":1}}`,
		`{"type":"turn/start","seq":101,"time":1,"data":{"turn":1}}`,
	}
	p := filepath.Join(t.TempDir(), "s1.v4.jsonl")
	os.WriteFile(p, []byte(strings.Join(rows, "\n")+"\n"), 0o600)
	var probs []string
	r, err := Open(p, ReaderOptions{OnProblem: func(fe *FormatError) { probs = append(probs, fe.Error()) }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for _, err := range r.Events() {
		if err != nil {
			break
		}
		n++
	}
	if len(probs) != 2 || !strings.Contains(probs[0], "line 4") || !strings.Contains(probs[1], "line 5") ||
		!strings.Contains(probs[1], "seq gap (expected 2 or 3 after the damaged line, got 100)") {
		t.Fatalf("problems = %q", probs)
	}
	if n != 3 {
		t.Fatalf("read %d events, want 3 (0, 1 and 101 after re-anchoring)", n)
	}
}
