package upgrade

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/convkit/convkit/convlog"
)

func systemID(session string, anchorSeq int, anchorType string) string {
	b, _ := json.Marshal([]any{"session-format-v2-to-v3", session, anchorSeq, anchorType})
	s := sha256.Sum256(b)
	return "v2-to-v3-system-" + hex.EncodeToString(s[:])
}

var v0Log = []string{
	`{"type":"session","version":0,"id":"s0","createdAt":1000,"cwd":"/p","delegationDepth":0,"agentPreset":"code"}`,
	`{"type":"turn/start","seq":0,"time":1001,"data":{"turn":1,"trigger":{"kind":"user"}}}`,
	`{"type":"step/start","seq":1,"time":1002,"data":{"turn":1,"step":1}}`,
	`{"type":"user/message","seq":2,"time":1003,"data":{"role":"user","id":"u1","content":[{"type":"text","text":"hi <&>"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
	`{"type":"request/header","seq":3,"time":1004,"data":{"header":{"config":{"provider":"p","model":"m"},"system":"You are helpful.","messagePrefix":[],"tools":[]},"reason":"initial"}}`,
	`{"type":"text-chunks","seq0":4,"time0":1010,"data":{"turn":1,"step":1,"index":0,"dt":[5,5],"texts":["Hel","lo","!"]}}`,
	`{"type":"assistant/chunk","seq":7,"time":1025,"data":{"turn":1,"step":1,"chunk":{"type":"finish","reason":{"kind":"stop"}}}}`,
	`{"type":"assistant/message","seq":8,"time":1030,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"Hello!"}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a1"}},"surfaceOp":"append"}`,
	`{"type":"step/end","seq":9,"time":1031,"data":{"turn":1,"step":1}}`,
	`{"type":"turn/end","seq":10,"time":1032,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
}

func v0Expected() (string, []string) {
	return `{"type":"session","version":4,"id":"s0","createdAt":1000,"cwd":"/p","isSeeded":false,"delegationDepth":0,"agentPreset":"ptc"}`,
		[]string{
			`{"type":"turn/start","seq":0,"time":1001,"data":{"turn":1}}`,
			`{"type":"step/start","seq":1,"time":1002,"data":{"turn":1,"step":1}}`,
			`{"type":"system/message","seq":2,"time":1002,"data":{"turn":1,"step":1,"message":{"id":"` + systemID("s0", 1, "step/start") + `","role":"system","source":{"kind":"system-prompt"},"content":[]}},"surfaceOp":"append"}`,
			`{"type":"user/message","seq":3,"time":1003,"data":{"role":"user","id":"u1","content":[{"type":"text","text":"hi <&>"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
			`{"type":"system/message","seq":4,"time":1004,"data":{"turn":1,"step":1,"message":{"id":"` + systemID("s0", 3, "request/header") + `","role":"system","source":{"kind":"system-prompt"},"content":[{"type":"text","text":"You are helpful."}]}},"sourceEventSeqs":[2],"surfaceOp":{"op":"replace","startSeq":2,"endSeq":2}}`,
			`{"type":"request/header","seq":5,"time":1004,"data":{"header":{"config":{"provider":"p","model":"m"}},"reason":"initial"}}`,
			`{"type":"assistant/message","seq":6,"time":1030,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"Hello!"}],"source":{"kind":"model","provider":"p","model":"m"},"id":"a1"},"stream":[{"type":"text-chunks","time0":1010,"index":0,"dt":[5,5],"texts":["Hel","lo","!"]},{"type":"chunk","time":1025,"chunk":{"type":"finish","reason":{"kind":"stop"}}}]},"surfaceOp":"append"}`,
			`{"type":"step/end","seq":7,"time":1031,"data":{"turn":1,"step":1}}`,
			`{"type":"turn/end","seq":8,"time":1032,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
		}
}

// TestFullV0Chain upgrades a v0 log through all four steps, plain and
// compressed, and compares every line.
func TestFullV0Chain(t *testing.T) {
	for _, zst := range []bool{false, true} {
		t.Run(fmt.Sprintf("zstd=%v", zst), func(t *testing.T) {
			dir := t.TempDir()
			var p string
			if zst {
				p = writeZstdLog(t, dir, "s0.jsonl.zst", v0Log...)
			} else {
				p = writeLog(t, dir, "s0.jsonl", v0Log...)
			}
			hdr, lines := mustUpgrade(t, p, Options{})
			wantHdr, want := v0Expected()
			if hdr != wantHdr {
				t.Errorf("header\n got %s\nwant %s", hdr, wantHdr)
			}
			if len(lines) != len(want) {
				t.Fatalf("got %d events, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
			}
			for i := range want {
				if lines[i] != want[i] {
					t.Errorf("event %d\n got %s\nwant %s", i, lines[i], want[i])
				}
			}
			h := checkV4(t, hdr, lines)
			msgs := h.Messages()
			if len(msgs) != 3 || msgs[0].Message.Role() != "system" || msgs[1].Message.ID() != "u1" || msgs[2].Message.ID() != "a1" {
				t.Fatalf("history %+v", msgs)
			}
		})
	}
}

// TestV4PassThrough: a version 4 log is read as it is.
func TestV4PassThrough(t *testing.T) {
	hdr, want := v0Expected()
	p := writeLog(t, t.TempDir(), "s0.v4.jsonl", append([]string{hdr}, want...)...)
	r, err := Open(p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.SourceVersion() != 4 || string(r.Header().Raw) != hdr {
		t.Fatalf("header %s", r.Header().Raw)
	}
	_, lines := mustUpgrade(t, p, Options{})
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("v4 changed:\n%s", strings.Join(lines, "\n"))
	}
}

func TestConversationLogHasNoUpgrade(t *testing.T) {
	p := writeLog(t, t.TempDir(), "metadata.v3.jsonl", `{"type":"conversation","version":3,"id":"c","createdAt":1}`)
	_, err := Open(p, Options{})
	expectErr(t, err, "only session logs have versions older than v4", convlog.ErrUnsupported)
}
