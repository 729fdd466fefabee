package hostile

import (
	"archive/tar"
	"bytes"
	"io"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/convkit/convkit/convlog"
)

// identityCases: a log named by its ids in the store whose header names
// another log. inspect reads it as the store's opener does (refused);
// given by path, it is read as it is, with a warning.
func identityCases() []hcase {
	foreign := func(f *fx) {
		f.session("s1.v4.jsonl", joinLines(append([]string{sessionHeader("s2", 4)}, sessionEvents()...)...))
	}
	const mismatch = `{log}: session log header (line 1) names id "s2", but its file name is session "s1"`
	return []hcase{
		{
			name: "session log header names another id: inspect by ids refuses it",
			setup: func(f *fx) []string {
				foreign(f)
				return []string{"inspect", hostileID, hostileSID}
			},
			code:   1,
			stderr: []string{"convkit: error: " + mismatch},
		},
		{
			name: "session log header names another id: inspect --validate by ids lists it",
			setup: func(f *fx) []string {
				foreign(f)
				return []string{"inspect", "--validate", hostileID, hostileSID}
			},
			code:   1,
			stdout: []string{`{log}: line 1, byte 0: corrupt: session log header (line 1) names id "s2", but its file name is session "s1"`},
			stderr: []string{"{log}: 1 problem(s) found"},
			check: func(f *fx, r result) {
				if strings.Contains(r.stdout, "valid, format") {
					f.t.Errorf("the log was called valid:\n%s", r.stdout)
				}
			},
		},
		{
			name: "session log header names another id: inspect --validate --json by ids reports the header's version",
			setup: func(f *fx) []string {
				foreign(f)
				return []string{"--json", "inspect", "--validate", hostileID, hostileSID}
			},
			code:   1,
			stdout: []string{`"valid":false,"version":4,`, `names id \"s2\", but its file name is session \"s1\"`},
		},
		{
			name: "session log header names another id: inspect --history by ids refuses it",
			setup: func(f *fx) []string {
				foreign(f)
				return []string{"inspect", "--history", hostileID, hostileSID}
			},
			code:   1,
			stderr: []string{"convkit: error: " + mismatch},
		},
		{
			name: "session log header names another id: inspect --transcript by ids refuses it",
			setup: func(f *fx) []string {
				foreign(f)
				return []string{"inspect", "--transcript", hostileID, hostileSID}
			},
			code:   1,
			stderr: []string{"convkit: error: " + mismatch},
		},
		{
			name: "session log header names another id: inspect of its path warns and reads it",
			setup: func(f *fx) []string {
				foreign(f)
				return []string{"inspect", "--validate", f.vars["log"]}
			},
			code:   0,
			stdout: []string{"{log}: valid, format v4"},
			stderr: []string{"convkit: warning: " + mismatch},
		},
		{
			name: "conversation log header names another id: inspect by id refuses it",
			setup: func(f *fx) []string {
				dir := f.addConv(hostileID, hostileSID)
				f.write(filepath.Join(dir, "s1.v4.jsonl"), plainSession(hostileSID))
				p := filepath.Join(dir, "metadata.v4.jsonl")
				f.vars["log"] = p
				lines := readLines(f.t, p)
				lines[0] = strings.Replace(lines[0], `"id":"`+hostileID+`"`, `"id":"someone-else"`, 1)
				f.write(p, joinLines(lines...))
				return []string{"inspect", "--validate", hostileID}
			},
			code:   1,
			stdout: []string{`{log}: line 1, byte 0: corrupt: conversation log names id "someone-else", but its directory is "hostile-0001"`},
			stderr: []string{"{log}: 1 problem(s) found"},
		},
	}
}

// pathCases: an older log whose events break the turn's path. Its
// successor would be refused by every reader (inspect --validate,
// reindex), so migrate fails the log, naming it and the rule, and
// publishes nothing for it; the rest is converted.
func pathCases() []hcase {
	return []hcase{
		{
			name: "v3 log with a step outside a turn: migrate fails it, publishes no successor, converts the rest",
			setup: func(f *fx) []string {
				f.session("s1.v3.jsonl", joinLines(sessionHeader(hostileSID, 3), evStepStart(0), evUser(1, "List the files"), evStepEnd(2)))
				return []string{"migrate"}
			},
			code:   1,
			stdout: []string{"Summary: converted=2, already-V4=9, failed=1, skipped=0"},
			stderr: []string{`the first: "{log}": not converted: its successor would break a rule that reindex and inspect --validate check: step/start at seq 0: step/start outside a turn`},
			allow:  migrated,
		},
		{
			name: "v3 log with a turn left running: migrate converts it",
			setup: func(f *fx) []string {
				f.session("s1.v3.jsonl", joinLines(sessionHeader(hostileSID, 3), evTurnStart(0), evStepStart(1), evUser(2, "List the files")))
				return []string{"migrate"}
			},
			code:   0,
			stdout: []string{"Summary: converted=3, already-V4=9, failed=0, skipped=0"},
			allow:  append([]string{"+{conv}/s1.v4.jsonl"}, migrated...),
			want:   []string{"+{conv}/s1.v4.jsonl"},
		},
	}
}

// framingCases: a session log the zstd tool compressed as one frame whose
// text ends inside a line (a torn line within a complete frame). A reader
// takes its complete lines; export archives exactly those, as a frame of
// their own, with no torn tail, and keeps the conversation.
func framingCases() []hcase {
	return []hcase{
		{
			name: "zstd tool frame ending inside a line: export archives the lines a reader takes",
			setup: func(f *fx) []string {
				zstdBin, err := exec.LookPath("zstd")
				if err != nil {
					f.t.Skip("zstd tool not installed")
				}
				text := append(plainSession(hostileSID), `{"type":"turn/start","seq":6,"ti`...)
				cmd := exec.Command(zstdBin, "-q", "-c")
				cmd.Stdin = bytes.NewReader(text)
				z, err := cmd.Output()
				if err != nil {
					f.t.Fatal(err)
				}
				f.session("s1.v4.jsonl.zst", z)
				return []string{"export", hostileID, "--to", f.path("out.tar.zst")}
			},
			code:   0,
			stdout: []string{"EXPORTED " + hostileID, "unreadable=0"},
			want:   []string{"+out.tar.zst"},
			check: func(f *fx, r result) {
				// The archived log reads as the six events, no torn tail.
				zstdBin, _ := exec.LookPath("zstd")
				tarred, err := exec.Command(zstdBin, "-dc", f.path("out.tar.zst")).Output()
				if err != nil {
					f.t.Fatal(err)
				}
				tr := tar.NewReader(bytes.NewReader(tarred))
				for {
					h, err := tr.Next()
					if err != nil {
						f.t.Fatalf("the archive holds no s1.v4.jsonl.zst: %v", err)
					}
					if !strings.HasSuffix(h.Name, "/s1.v4.jsonl.zst") {
						continue
					}
					data, _ := io.ReadAll(tr)
					z := convlog.Zstd
					lr, err := convlog.NewReader(bytes.NewReader(data), int64(len(data)), h.Name, convlog.ReaderOptions{Compression: &z, Version: 4})
					if err != nil {
						f.t.Fatal(err)
					}
					n := 0
					for _, err = range lr.Events() {
						if err == nil {
							n++
						}
					}
					if st := lr.Stats(); err != nil || n != 6 || st.TornTail {
						f.t.Errorf("the archived log reads %d events, torn tail %v: %v", n, st.TornTail, err)
					}
					lr.Close()
					return
				}
			},
		},
	}
}
