package migrate

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/convkit/convkit/internal/dshroot"
)

// TestAlreadyV4IsAdmitted: a log already at version 4 is "already V4" only
// when a version 4 reader admits it (convlog.Admit); the shape of a fork of
// the runtime (version 3 tool-result wrappers, user role, under a version 4
// header) is a failure, grouped as a corrupt log, naming the line and the
// rule.
func TestAlreadyV4IsAdmitted(t *testing.T) {
	root := t.TempDir()
	app := "/home/dev/app"
	session(t, root, 4, "good", app, "")
	dir, err := dshroot.SessionDir("fork")
	if err != nil {
		t.Fatal(err)
	}
	put(t, root, filepath.Join(dshroot.ProjectDir(app), dir, dshroot.GenerationName(4, 0, "")), hdr(4, "fork", app, ""),
		`{"type":"turn/start","seq":0,"time":10,"data":{"turn":1}}`,
		`{"type":"step/start","seq":1,"time":11,"data":{"turn":1,"step":1}}`,
		`{"type":"assistant/message","seq":2,"time":12,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"c1","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a1"},"stream":[]},"surfaceOp":"append"}`,
		`{"type":"tool/call","seq":3,"time":13,"data":{"turn":1,"step":1,"callId":"c1","name":"bash","arguments":"{}"}}`,
		`{"type":"tool/result","seq":4,"time":14,"data":{"turn":1,"step":1,"message":{"role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"ok"}]}],"source":{"kind":"tool","callId":"c1"},"id":"r1"}},"sourceEventSeqs":[3],"surfaceOp":"append"}`)
	sum, out := runSessions(t, root, Options{Jobs: 1})
	if sum.Totals != (Counts{AlreadyV4: 1, Failed: 1}) {
		t.Fatalf("totals %+v\n%s", sum.Totals, out)
	}
	it := items(t, root, sum)["--home-dev-app--/fork/session.v4.jsonl"]
	if it.Reason != "corrupt_log" || !strings.Contains(it.Message, "line 6, byte ") ||
		!strings.Contains(it.Message, "tool/result at seq 4: tool result \"r1\" needs a toolCallId equal to its source's callId") {
		t.Fatalf("failure %+v\n%s", it, out)
	}
	if !strings.Contains(out, `"--home-dev-app--/good" already V4 (opened successfully)`) {
		t.Errorf("the valid log is not already V4:\n%s", out)
	}
}
