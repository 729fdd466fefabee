package hostile

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
)

// The hostile conversation every log case adds beside the base store.
const (
	hostileID  = "hostile-0001"
	hostileSID = "s1"
)

// session writes the hostile conversation with its session log named name
// (s1.v4.jsonl, ...) holding data; the log is {log}.
func (f *fx) session(name string, data []byte) string {
	dir := f.addConv(hostileID, hostileSID)
	p := f.write(filepath.Join(dir, name), data)
	f.vars["log"] = p
	return p
}

// zjoin joins frames into one file's bytes.
func zjoin(frames [][]byte) []byte { return bytes.Join(frames, nil) }

// migrated is what migrate of a store holding the base conversations and
// a bad log may write: its report folder, the v4 successors of the v3
// conversation's good logs, runtime.lock's record.
var migrated = append([]string{lockRecord, "+{v3}/*.v4.jsonl"}, migrateReport...)

// reindexed is what reindex may write: metadata.db and runtime.lock's
// record. It must write metadata.db.
var reindexed = []string{lockRecord}

// v3Lines are the lines of the v3 conversation's first session log, and
// that log's file name.
func v3Lines(f *fx) ([]string, string) {
	for _, p := range logsOf(f.t, f.vars["v3"]) {
		if n := filepath.Base(p); strings.HasSuffix(n, ".v3.jsonl") {
			return readLines(f.t, p), n
		}
	}
	f.t.Fatal("the v3 conversation has no plain v3 session log")
	return nil, ""
}

func logCases() []hcase {
	plainPlus := func(f *fx, name string, lines ...string) []string {
		f.session(name, joinLines(lines...))
		return nil
	}
	hdr := sessionHeader(hostileSID, 4)
	ev := sessionEvents()
	return []hcase{
		{
			name: "zstd corrupt frame: inspect",
			setup: func(f *fx) []string {
				frames := zlog(f.t, hostileSID, zbatches()...)
				// One flipped byte inside frame 3's block.
				frames[2][len(frames[2])/2] ^= 0x55
				f.vars["at"], f.vars["plain"] = fmt.Sprint(frameAt(frames, 2)), zplainAt(2)
				f.session("s1.v4.jsonl.zst", zjoin(frames))
				return []string{"inspect", f.vars["log"]}
			},
			code:   1,
			stderr: []string{"{log}: frame 3 at file byte {at}, plain byte {plain}: frame failed validation"},
		},
		{
			name: "zstd frame truncated mid-log: reindex skips it",
			setup: func(f *fx) []string {
				frames := zlog(f.t, hostileSID, zbatches()...)
				f.vars["at"], f.vars["plain"] = fmt.Sprint(frameAt(frames, 2)), zplainAt(2)
				// Frame 3 loses the last two bytes of its checksum; frame 4
				// follows it.
				frames[2] = frames[2][:len(frames[2])-2]
				f.session("s1.v4.jsonl.zst", zjoin(frames))
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{"SKIPPED {log}: unreadable session log: frame 3 at file byte {at}, plain byte {plain}: frame failed validation", "Summary: indexed=3, skipped=1,"},
			stderr: []string{"reindex skipped 1 item(s), each reported with its reason; the first: {log}: unreadable session log: frame 3 at file byte {at}, plain byte {plain}: frame failed validation: CRC check failed"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			// A frame cut short and followed by more frames cannot be told
			// from a torn last frame by its structure: the first block of
			// frame 3 claims more bytes than the file has left. It is read
			// as a torn tail starting at frame 3, reported with its offset;
			// the log is left as it is (docs/FORMAT.md, Torn tails).
			name: "zstd frame cut in half mid-log: inspect --stats reports a torn tail from that frame",
			setup: func(f *fx) []string {
				frames := zlog(f.t, hostileSID, zbatches()...)
				frames[2] = frames[2][:len(frames[2])/2]
				at := frameAt(frames, 2)
				f.vars["at"] = fmt.Sprint(at)
				f.vars["torn"] = fmt.Sprint(len(zjoin(frames)) - at)
				f.session("s1.v4.jsonl.zst", zjoin(frames))
				return []string{"inspect", "--stats", f.vars["log"]}
			},
			code:   0,
			stdout: []string{"events:      2", "torn tail:   {torn} bytes after byte {at}"},
		},
		{
			name: "zstd bad content checksum: export leaves the conversation out",
			setup: func(f *fx) []string {
				frames := zlog(f.t, hostileSID, zbatches()...)
				fr := frames[2]
				fr[len(fr)-1] ^= 0xFF // the last byte of the content checksum
				f.vars["at"], f.vars["plain"] = fmt.Sprint(frameAt(frames, 2)), zplainAt(2)
				f.session("s1.v4.jsonl.zst", zjoin(frames))
				return []string{"export", f.vars["basic.id"], hostileID, "--to", f.path("out.tar.zst")}
			},
			code:   3,
			stderr: []string{"UNREADABLE {log}: frame 3 at file byte {at}, plain byte {plain}: frame failed validation: CRC check failed", "export left out 1 item(s)"},
			stdout: []string{"EXPORTED {basic.id}", "unreadable=1"},
			want:   []string{"+out.tar.zst"},
		},
		{
			name: "zstd skippable frame: migrate fails the log",
			setup: func(f *fx) []string {
				frames := zlog(f.t, hostileSID, zbatches()...)
				skippable := []byte{0x50, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 'j', 'u', 'n', 'k'}
				frames = append(frames[:2], append([][]byte{skippable}, frames[2:]...)...)
				f.vars["at"], f.vars["plain"] = fmt.Sprint(frameAt(frames, 2)), zplainAt(2)
				f.session("s1.v4.jsonl.zst", zjoin(frames))
				return []string{"migrate"}
			},
			code:   1,
			stdout: []string{"failed=1", "Summary: converted=2, already-V4=9, failed=1, skipped=0"},
			stderr: []string{`1 input(s) failed to migrate; the first: "{log}": frame 3 at file byte {at}, plain byte {plain}: corrupt zstd log: skippable frame (magic 0x184D2A50)`, "; see {tmp}/convkit-migrate-v4-"},
			allow:  migrated,
		},
		{
			name: "zstd bad magic: inspect by id",
			setup: func(f *fx) []string {
				frames := zlog(f.t, hostileSID, zbatches()...)
				copy(frames[1], "\x28\xb5\x2f\xfe")
				f.vars["at"], f.vars["plain"] = fmt.Sprint(frameAt(frames, 1)), zplainAt(1)
				f.session("s1.v4.jsonl.zst", zjoin(frames))
				return []string{"inspect", hostileID, hostileSID}
			},
			code:   1,
			stderr: []string{"{log}: frame 2 at file byte {at}, plain byte {plain}: ", "invalid frame magic 0xFE2FB528, expected 0xFD2FB528"},
		},
		{
			name: "seq gap: inspect",
			setup: func(f *fx) []string {
				lines := append([]string{hdr}, ev[:3]...)
				lines = append(lines, ev[4:]...) // seq 3 is missing
				data := joinLines(lines...)
				f.vars["off"] = fmt.Sprint(offsetOfLine(data, 5))
				f.session("s1.v4.jsonl", data)
				return []string{"inspect", f.vars["log"]}
			},
			code:   1,
			stderr: []string{"{log}: line 5 column 26, byte {off}: seq gap (expected 3, got 4)"},
			stdout: []string{"user/message"},
		},
		{
			name: "seq repeat: reindex skips it",
			setup: func(f *fx) []string {
				lines := append([]string{hdr}, ev[:4]...)
				lines = append(lines, ev[3]) // seq 3 twice
				data := joinLines(lines...)
				f.vars["off"] = fmt.Sprint(offsetOfLine(data, 6))
				f.session("s1.v4.jsonl", data)
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{"SKIPPED {log}: unreadable session log: line 6 column 35, byte {off}: seq repeats or goes back (expected 4, got 3)"},
			stderr: []string{"the first: {log}: unreadable session log: line 6 column 35, byte {off}: seq repeats or goes back (expected 4, got 3)"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			// Every line reads, but the log breaks the rules beyond a line:
			// reindex refuses what inspect --validate refuses, with the
			// same message at the same line and byte.
			name: "a message without identity or source: reindex skips it",
			setup: func(f *fx) []string {
				data := joinLines(hdr, ev[0], ev[1], `{"type":"user/message","seq":2,"time":1790000000003,"data":{"role":"user","content":[{"type":"text","text":"hi"}]},"surfaceOp":"append"}`)
				f.vars["off"] = fmt.Sprint(offsetOfLine(data, 4))
				f.session("s1.v4.jsonl", data)
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{"SKIPPED {log}: unreadable session log: line 4, byte {off}: user/message at seq 2: stored message has no id and no source"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "events outside the turn's path: inspect --validate lists each",
			setup: func(f *fx) []string {
				data := joinLines(hdr, ev[1], ev[0], ev[4], evAssistant(3, "late"))
				data = bytes.Replace(data, []byte(`"seq":1,"time":1790000000002,"data":{"turn":1,"step":1}`), []byte(`"seq":0,"time":1790000000002,"data":{"turn":1,"step":1}`), 1)
				data = bytes.Replace(data, []byte(`{"type":"turn/start","seq":0,`), []byte(`{"type":"turn/start","seq":1,`), 1)
				data = bytes.Replace(data, []byte(`"seq":4,"time"`), []byte(`"seq":2,"time"`), 1)
				f.vars["a"] = fmt.Sprint(offsetOfLine(data, 2))
				f.vars["b"] = fmt.Sprint(offsetOfLine(data, 4))
				f.vars["c"] = fmt.Sprint(offsetOfLine(data, 5))
				f.session("s1.v4.jsonl", data)
				return []string{"inspect", "--validate", f.vars["log"]}
			},
			code: 1,
			stdout: []string{"{log}: line 2, byte {a}: corrupt (rule turn-path): step/start at seq 0: step/start outside a turn",
				"{log}: line 4, byte {b}: corrupt (rule turn-path): step/end at seq 2: step/end without its step/start (no step of turn 1 is open)",
				"{log}: line 5, byte {c}: corrupt (rule turn-path): assistant/message at seq 3: outside a step (turn 1 has no open step): an answer belongs to a step"},
			stderr: []string{"{log}: 3 problem(s) found"},
		},
		{
			name: "seq goes back in a v3 log: migrate fails it, converts the rest",
			setup: func(f *fx) []string {
				lines, name := v3Lines(f)
				// Event 4 (line 6) is followed by event 2 again, in a log
				// whose header names s1, the session of its file name.
				bad := append(append([]string{}, lines[:6]...), lines[3])
				sid := strings.TrimSuffix(name, ".v3.jsonl")
				bad[0] = strings.Replace(bad[0], `"id":"`+sid+`"`, `"id":"`+hostileSID+`"`, 1)
				data := joinLines(bad...)
				f.vars["off"] = fmt.Sprint(offsetOfLine(data, 7))
				f.session("s1.v3.jsonl", data)
				return []string{"migrate"}
			},
			code:   1,
			stdout: []string{"Summary: converted=2, already-V4=9, failed=1, skipped=0"},
			stderr: []string{`1 input(s) failed to migrate; the first: "{log}": line 7 column 32, byte {off}: seq repeats or goes back (expected 5, got 2)`},
			allow:  migrated,
			want:   []string{"+{v3}/*.v4.jsonl"},
		},
		{
			name: "unknown required event type: reindex skips it as unsupported",
			setup: func(f *fx) []string {
				data := joinLines(hdr, ev[0], ev[1], `{"type":"x-plugin/thing","seq":2,"time":1790000000003,"data":{}}`)
				f.vars["off"] = fmt.Sprint(offsetOfLine(data, 4))
				f.session("s1.v4.jsonl", data)
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{`SKIPPED {log}: session log this build cannot read: line 4 column 9, byte {off}: unknown event type "x-plugin/thing" at seq 2 is not marked ignorable`},
			stderr: []string{`the first: {log}: session log this build cannot read: line 4 column 9, byte {off}: unknown event type "x-plugin/thing" at seq 2 is not marked ignorable`},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "ignorable event with a bad envelope: inspect",
			setup: func(f *fx) []string {
				// ignorable excuses an unknown type, not a broken envelope:
				// a fractional time.
				bad := `{"type":"x-plugin/thing","seq":2,"time":1.5,"data":{},"ignorable":true}`
				data := joinLines(hdr, ev[0], ev[1], bad)
				f.vars["off"] = fmt.Sprint(offsetOfLine(data, 4))
				f.session("s1.v4.jsonl", data)
				return []string{"inspect", f.vars["log"]}
			},
			code:   1,
			stderr: []string{"{log}: line 4 column 41, byte {off}: time must be a safe integer"},
		},
		{
			name: "invalid UTF-8 in a string: backup --strict archives it whole as INVALID",
			setup: func(f *fx) []string {
				// A raw 0xE9 byte (Latin-1 é) inside the message text.
				bad := strings.Replace(evUser(2, "cafe"), "cafe", "caf\xe9", 1)
				data := joinLines(hdr, ev[0], ev[1], bad)
				f.vars["off"] = fmt.Sprint(offsetOfLine(data, 4))
				f.vars["col"] = fmt.Sprint(strings.Index(bad, "\xe9") + 1)
				f.session("s1.v4.jsonl", data)
				return []string{"backup", "--strict", "--to", f.path("backups")}
			},
			code: 3,
			stderr: []string{"INVALID {log}: archived whole: line 4 column {col}, byte {off}: event is not valid JSON: invalid UTF-8 in string",
				"the backup archived 1 invalid log(s) whole (INVALID lines)"},
			stdout: []string{"invalid=1"},
			want:   []string{"+backups", "+backups/convkit-*.tar.zst", "+backups/convkit-*.tar.zst.json"},
			allow:  []string{lockRecord},
		},
		{
			name: "100 MB line: inspect stops at the line limit",
			setup: func(f *fx) []string {
				dir := f.addConv(hostileID, hostileSID)
				p := filepath.Join(dir, "s1.v4.jsonl")
				f.vars["log"] = p
				f.vars["off"] = fmt.Sprint(writeHugeLine(f.t, p, hostileSID, 100<<20))
				return []string{"inspect", p}
			},
			code:   1,
			stderr: []string{"{log}: line 3, byte {off}: line is longer than the limit of 67108864 bytes"},
			stdout: []string{"turn/start"},
		},
		{
			name: "file name says v3, header says v4: migrate fails it",
			setup: func(f *fx) []string {
				plainPlus(f, "s1.v3.jsonl", append([]string{hdr}, ev...)...)
				return []string{"migrate"}
			},
			code:   1,
			stdout: []string{"Summary: converted=2, already-V4=9, failed=1, skipped=0"},
			stderr: []string{`the first: "{log}": line 1 column 29, byte 0: file name identifies v3, but its header identifies v4`},
			allow:  migrated,
		},
		{
			name: "file name says v4, header says v3: reindex skips it",
			setup: func(f *fx) []string {
				plainPlus(f, "s1.v4.jsonl", append([]string{sessionHeader(hostileSID, 3)}, ev...)...)
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{"SKIPPED {log}: unreadable session log: line 1 column", "file name identifies v4, but its header identifies v3"},
			stderr: []string{"the first: {log}: unreadable session log: line 1 column 29, byte 0: file name identifies v4, but its header identifies v3"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "conversation log header names another id: reindex skips it",
			setup: func(f *fx) []string {
				dir := f.addConv(hostileID, hostileSID)
				f.write(filepath.Join(dir, "s1.v4.jsonl"), plainSession(hostileSID))
				p := filepath.Join(dir, "metadata.v4.jsonl")
				f.vars["log"] = p
				lines := readLines(f.t, p)
				lines[0] = strings.Replace(lines[0], `"id":"`+hostileID+`"`, `"id":"someone-else"`, 1)
				f.write(p, joinLines(lines...))
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{`SKIPPED {log}: conversation log names id "someone-else", but its directory is "hostile-0001"`},
			stderr: []string{`the first: {log}: conversation log names id "someone-else", but its directory is "hostile-0001"`},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "session log header names another id: reindex skips it",
			setup: func(f *fx) []string {
				plainPlus(f, "s1.v4.jsonl", append([]string{sessionHeader("s2", 4)}, ev...)...)
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{`SKIPPED {log}: session log header (line 1) names id "s2", but its file name is session "s1"`, "indexed=3, skipped=1"},
			stderr: []string{`{log}: session log header (line 1) names id "s2", but its file name is session "s1"`},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "session log header names another id in a v3 log: migrate fails it before writing, converts the rest",
			setup: func(f *fx) []string {
				plainPlus(f, "s1.v3.jsonl", append([]string{sessionHeader("s2", 3)}, ev...)...)
				return []string{"migrate"}
			},
			code:   1,
			stdout: []string{"Summary: converted=2, already-V4=9, failed=1, skipped=0"},
			stderr: []string{`the first: "{log}": session log header (line 1) names id "s2", but its file name is session "s1"`},
			allow:  migrated,
		},
		{
			name: "session log header names another id in a v4 log: migrate fails it, converts the rest",
			setup: func(f *fx) []string {
				plainPlus(f, "s1.v4.jsonl", append([]string{sessionHeader("s2", 4)}, ev...)...)
				return []string{"migrate"}
			},
			code:   1,
			stdout: []string{"Summary: converted=2, already-V4=9, failed=1, skipped=0"},
			stderr: []string{`the first: "{log}": session log header (line 1) names id "s2", but its file name is session "s1"`},
			allow:  migrated,
		},
		{
			name: "empty file: inspect",
			setup: func(f *fx) []string {
				f.session("s1.v4.jsonl", nil)
				return []string{"inspect", f.vars["log"]}
			},
			code:   1,
			stderr: []string{"{log}: byte 0: empty or header-less log: the first line must be a complete header line"},
		},
		{
			name: "header missing: migrate fails the log",
			setup: func(f *fx) []string {
				lines, _ := v3Lines(f)
				f.session("s1.v3.jsonl", joinLines(lines[1:]...))
				return []string{"migrate"}
			},
			code:   1,
			stdout: []string{"Summary: converted=2, already-V4=9, failed=1, skipped=0"},
			stderr: []string{`the first: "{log}": line 1 column 9, byte 0: first line is not a log header: type must be "session" or "conversation"`},
			allow:  migrated,
		},
		{
			name: "format v5 header: reindex skips it as unsupported",
			setup: func(f *fx) []string {
				plainPlus(f, "s1.v5.jsonl", append([]string{sessionHeader(hostileSID, 5)}, ev...)...)
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{"SKIPPED {log}: session log this build cannot read: line 1", "log uses format v5, but this build reads only up to v4"},
			stderr: []string{"the first: {log}: session log this build cannot read: line 1 column 29, byte 0: log uses format v5, but this build reads only up to v4"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "invalid JSON in the conversation log: list warns and lists the rest",
			setup: func(f *fx) []string {
				dir := f.addConv(hostileID, hostileSID)
				f.write(filepath.Join(dir, "s1.v4.jsonl"), plainSession(hostileSID))
				p := filepath.Join(dir, "metadata.v4.jsonl")
				f.vars["log"] = p
				lines := readLines(f.t, p)
				lines[1] = `{"type":"conversation/created","seq":0,` + "\x00garbage"
				data := joinLines(lines...)
				f.vars["off"] = fmt.Sprint(offsetOfLine(data, 2))
				f.write(p, data)
				return []string{"list", "--all"}
			},
			code:   0,
			stderr: []string{"convkit: listing from the logs: metadata.db does not exist", "convkit: warning: {log}: unreadable conversation log: line 2 column 40, byte {off}: event is not valid JSON"},
			stdout: []string{"{basic.id}", "{v3.id}", "{zstd.id}"},
		},
		{
			name: "torn zstd tail: reindex indexes it and leaves the tail",
			setup: func(f *fx) []string {
				frames := zlog(f.t, hostileSID, zbatches()...)
				last := len(frames) - 1
				frames[last] = frames[last][:len(frames[last])-7]
				f.session("s1.v4.jsonl.zst", zjoin(frames))
				return []string{"reindex"}
			},
			code:   0,
			stdout: []string{"Summary: indexed=4, skipped=0,"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "torn plain tail: migrate counts it already V4 and leaves the tail",
			setup: func(f *fx) []string {
				data := plainSession(hostileSID)
				f.session("s1.v4.jsonl", data[:len(data)-10])
				return []string{"migrate"}
			},
			code:   0,
			stdout: []string{"failed=0", "already V4"},
			allow:  migrated,
		},
		{
			name: "noncanonical log name: reindex reports it",
			setup: func(f *fx) []string {
				dir := f.addConv(hostileID, hostileSID)
				f.write(filepath.Join(dir, "s1.v4.jsonl"), plainSession(hostileSID))
				f.vars["log"] = f.write(filepath.Join(dir, "s1.v04.jsonl"), plainSession(hostileSID))
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{"SKIPPED {log}: noncanonical log file name", "indexed=4"},
			stderr: []string{"the first: {log}: noncanonical log file name"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "plain and compressed generations of one version: reindex reports them",
			setup: func(f *fx) []string {
				dir := f.addConv(hostileID, hostileSID)
				f.write(filepath.Join(dir, "s1.v4.jsonl"), plainSession(hostileSID))
				f.vars["log"] = f.write(filepath.Join(dir, "s1.v4.jsonl.zst"), zjoin(zlog(f.t, hostileSID, zbatches()...)))
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{"both compressed and plain generations of s1 v4"},
			stderr: []string{"the first: {log}: both compressed and plain generations of s1 v4"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "temporary file of an interrupted write: reindex removes it",
			setup: func(f *fx) []string {
				dir := f.addConv(hostileID, hostileSID)
				f.write(filepath.Join(dir, "s1.v4.jsonl"), plainSession(hostileSID))
				f.vars["tmpfile"] = f.write(filepath.Join(dir, ".s1.v4.jsonl.0123456789abcdef.tmp"), []byte("half a log"))
				return []string{"reindex"}
			},
			code:   0,
			stdout: []string{"REMOVED {tmpfile}: left by an interrupted write", "indexed=4, skipped=0"},
			allow:  reindexed, want: []string{newIndex, "-{tmpfile}"},
		},
	}
}
