package hostile

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// Hostile logs of the format's edges: decompression bombs and floods of
// problems (every read bounded), JSON a JavaScript reader would read
// otherwise (duplicate keys, number forms, nesting, byte order marks, CRLF,
// NUL bytes), zstd frames that lie or ask for what no reader allows, and
// files that are not logs at all. docs/FORMAT.md says why each is refused
// or read.

// rleFrame is a zstd frame (no checksum, no content size) of n RLE blocks
// of 128 KiB of b: 4 bytes on disk for each 128 KiB it decodes to.
func rleFrame(b byte, n int) []byte {
	out := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 7 << 3}
	for i := range n {
		bh := uint32(128<<10)<<3 | 1<<1
		if i == n-1 {
			bh |= 1
		}
		out = append(out, byte(bh), byte(bh>>8), byte(bh>>16), b)
	}
	return out
}

// bombBlocks makes a frame decode to 100 GiB (3.2 MB on disk).
const bombBlocks = 819200

// bomb writes the hostile session log: the header frame, then frame 2,
// 100 GiB of fill. It records the frame's offset as {at}.
func bomb(f *fx, fill byte) []string {
	hdr := zframe(f.t, joinLines(sessionHeader(hostileSID, 4)))
	f.vars["at"] = fmt.Sprint(len(hdr))
	f.vars["plain"] = fmt.Sprint(len(sessionHeader(hostileSID, 4)) + 1)
	f.session("s1.v4.jsonl.zst", append(hdr, rleFrame(fill, bombBlocks)...))
	return nil
}

// colOf is the 1-based column of sub in line.
func colOf(line, sub string) string { return fmt.Sprint(strings.Index(line, sub) + 1) }

// lineCase writes a plain v4 session log whose line n (1-based; 1 is the
// header) is line, the others good, and records {off} and {col} (of at in
// line).
func lineCase(f *fx, n int, line, at string) {
	lines := append([]string{sessionHeader(hostileSID, 4)}, sessionEvents()...)
	lines[n-1] = line
	data := joinLines(lines...)
	f.vars["off"] = fmt.Sprint(offsetOfLine(data, n))
	f.vars["col"] = colOf(line, at)
	f.session("s1.v4.jsonl", data)
}

// v3Case writes the v3 conversation's first plain session log again with
// its line n replaced by edit(line), and records {log}, {off} and {col}
// (of at in the new line).
func v3Case(f *fx, n int, edit func(string) string, at string) {
	lines, name := v3Lines(f)
	lines[n-1] = edit(lines[n-1])
	data := joinLines(lines...)
	p := filepath.Join(f.vars["v3"], name)
	f.vars["log"] = p
	f.vars["off"] = fmt.Sprint(offsetOfLine(data, n))
	f.vars["col"] = colOf(lines[n-1], at)
	f.write(p, data)
}

// nested is a JSON value nested depth arrays deep.
func nested(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }

// seqForm is the first event with its seq written as form.
func seqForm(form string) string {
	return strings.Replace(evTurnStart(0), `"seq":0`, `"seq":`+form, 1)
}

// versionForm is the header with its version written as form.
func versionForm(form string) string {
	return strings.Replace(sessionHeader(hostileSID, 4), `"version":4`, `"version":`+form, 1)
}

// lyingFrame is a good compressed session log whose frame 3 states a
// content size off by delta, recorded as {at}.
func lyingFrame(f *fx, delta int) []byte {
	frames := zlog(f.t, hostileSID, zbatches()...)
	fr := frames[2]
	fhd := fr[4]
	off := 5 + [4]int{0, 1, 2, 4}[fhd&3]
	if fhd&0x20 == 0 {
		off++ // the window byte
	}
	n := [4]int{0, 2, 4, 8}[fhd>>6]
	if n == 0 && fhd&0x20 != 0 {
		n = 1
	}
	if n == 0 {
		f.t.Fatalf("frame 3 states no content size (descriptor %#x)", fhd)
	}
	var v uint64
	for k := n - 1; k >= 0; k-- {
		v = v<<8 | uint64(fr[off+k])
	}
	v = uint64(int64(v) + int64(delta))
	for k := range n {
		fr[off+k] = byte(v >> (8 * k))
	}
	f.vars["at"], f.vars["plain"] = fmt.Sprint(frameAt(frames, 2)), zplainAt(2)
	return zjoin(frames)
}

// frameHeader is a zstd frame header with descriptor fhd and the given
// window, dictionary and content size bytes, then one empty last raw block.
func frameHeader(fhd byte, rest ...byte) []byte {
	b := []byte{0x28, 0xB5, 0x2F, 0xFD, fhd}
	b = append(b, rest...)
	return append(b, 1, 0, 0)
}

func formatCases() []hcase {
	ev := sessionEvents()
	hdr := sessionHeader(hostileSID, 4)
	// goodConv adds the hostile conversation with a good session log.
	goodConv := func(f *fx) string {
		dir := f.addConv(hostileID, hostileSID)
		f.write(filepath.Join(dir, "s1.v4.jsonl"), plainSession(hostileSID))
		return dir
	}
	bombWhere := "line 2, frame 2 at file byte {at}, plain byte {plain}: line is longer than the limit of 67108864 bytes (the log is not decoded past it)"
	bombLine := "{log}: " + bombWhere
	cases := []hcase{
		// Bounded reads: a 3.2 MB frame of 100 GiB of one byte is read to
		// the line limit and no further, by every command that reads it.
		{
			name:  "zstd frame of 100 GiB of one byte (3.2 MB): inspect --validate stops at the line limit",
			setup: func(f *fx) []string { bomb(f, 'a'); return []string{"inspect", "--validate", f.vars["log"]} },
			code:  1, stdout: []string{"{log}: line 2, frame 2 at file byte {at}, plain byte {plain}: corrupt: line is longer than the limit of 67108864 bytes (the log is not decoded past it)"},
			stderr: []string{"{log}: 2 problem(s) found"},
		},
		{
			name:  "zstd frame of 100 GiB of one byte: reindex skips the log at the line limit",
			setup: func(f *fx) []string { bomb(f, 'a'); return []string{"reindex"} },
			code:  3, stdout: []string{"SKIPPED {log}: unreadable session log: " + bombWhere, "indexed=3, skipped=1"},
			stderr: []string{"the first: {log}: unreadable session log: " + bombWhere},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name:  "zstd frame of 100 GiB of one byte: inspect --stats stops at the line limit",
			setup: func(f *fx) []string { bomb(f, 'a'); return []string{"inspect", "--stats", f.vars["log"]} },
			code:  1, stderr: []string{bombLine},
		},
		{
			name:  "zstd frame of 100 GiB of one byte: migrate fails the log at the line limit",
			setup: func(f *fx) []string { bomb(f, 'a'); return []string{"migrate"} },
			code:  1, stdout: []string{"failed=1"}, stderr: []string{`the first: "{log}": ` + bombWhere},
			allow: migrated,
		},
		{
			name: "zstd frame of 100 GiB of one byte: export leaves the conversation out",
			setup: func(f *fx) []string {
				bomb(f, 'a')
				return []string{"export", hostileID, "--to", f.path("out.tar.zst")}
			},
			code: 3, stderr: []string{"UNREADABLE " + bombLine}, stdout: []string{"unreadable=1"},
			want: []string{"+out.tar.zst"},
		},
		{
			name:  "zstd frame of 100 GiB of one byte: backup --strict archives it whole as INVALID",
			setup: func(f *fx) []string { bomb(f, 'a'); return []string{"backup", "--strict", "--to", f.path("backups")} },
			code:  3, stderr: []string{"INVALID {log}: archived whole: line 2, frame 2"},
			want: []string{"+backups", "+backups/convkit-*.tar.zst", "+backups/convkit-*.tar.zst.json"}, allow: []string{lockRecord},
		},
		// A frame of newlines: one problem per empty line.
		{
			name: "zstd frame of 100 GiB of newlines: inspect --validate lists 100 problems, counts 10000 more, stops",
			setup: func(f *fx) []string {
				bomb(f, '\n')
				// Line 10101 is the 10100th empty line.
				f.vars["stop"] = fmt.Sprint(len(sessionHeader(hostileSID, 4)) + 1 + 10099)
				return []string{"inspect", "--validate", f.vars["log"]}
			},
			code: 1,
			stdout: []string{"{log}: line 2 column 1, frame 2 at file byte {at}, plain byte {plain}: corrupt: event is not valid JSON: not a JSON object",
				"{log}: more than 10000 further problems not listed; reading stopped at line 10101, frame 2 at file byte {at}, plain byte {stop} (--max-problems N lists up to N)"},
			stderr: []string{"{log}: more than 10100 problems found; reading stopped at line 10101, frame 2 at file byte {at}, plain byte {stop}"},
			check: func(f *fx, r result) {
				if n := strings.Count(r.stdout, ": corrupt: "); n != 100 {
					f.t.Errorf("%d problems listed, want 100", n)
				}
			},
		},
		{
			name:   "zstd frame of 100 GiB of newlines: reindex skips the log at its first empty line",
			setup:  func(f *fx) []string { bomb(f, '\n'); return []string{"reindex"} },
			code:   3,
			stdout: []string{"SKIPPED {log}: unreadable session log: line 2 column 1, frame 2 at file byte {at}, plain byte {plain}: event is not valid JSON: not a JSON object"},
			stderr: []string{"the first: {log}: unreadable session log: line 2 column 1"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "valid events decoding to 128 times the log's size: reindex skips it as a decompression bomb",
			setup: func(f *fx) []string {
				// 300 events of 1 MiB of one letter each, a frame each:
				// 300 MiB from some 100 KB.
				frames := [][]byte{zframe(f.t, joinLines(hdr))}
				pad := strings.Repeat("A", 1<<20)
				for i := range 300 {
					frames = append(frames, zframe(f.t, joinLines(fmt.Sprintf(`{"type":"x-plugin/pad","seq":%d,"time":1,"data":%q,"ignorable":true}`, i, pad))))
				}
				data := zjoin(frames)
				budget := max(256<<20, 128*len(data))
				k := budget / (len(pad) + 80)
				f.vars["budget"] = fmt.Sprint(budget)
				f.vars["size"] = fmt.Sprint(len(data))
				f.vars["frame"] = fmt.Sprint(k + 2)
				f.session("s1.v4.jsonl.zst", data)
				return []string{"reindex"}
			},
			code: 3,
			stdout: []string{"SKIPPED {log}: unreadable session log: frame {frame} at file byte",
				"the log decodes to more than {budget} bytes (128 times its {size} bytes on disk, at least 256 MiB): refused as a decompression bomb"},
			stderr: []string{"the first: {log}: unreadable session log: frame {frame}"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "--max-problems 5 on a log of 40 bad lines: 5 listed, 35 counted",
			setup: func(f *fx) []string {
				lines := []string{hdr}
				for i := range 40 {
					lines = append(lines, fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":1,"data":{"turn":1},"x":1}`, i))
				}
				f.session("s1.v4.jsonl", joinLines(lines...))
				return []string{"inspect", "--validate", "--max-problems", "5", f.vars["log"]}
			},
			code:   1,
			stdout: []string{`{log}: line 6 column 57, byte `, `turn/start event has unexpected member "x"`, "{log}: 35 further problem(s) not listed (--max-problems N lists up to N)"},
			stderr: []string{"{log}: 40 problem(s) found"},
			check: func(f *fx, r result) {
				if strings.Contains(r.stdout, "line 7 ") {
					f.t.Error("a sixth problem is listed")
				}
			},
		},

		// Deeply nested JSON.
		{
			name: "JSON nested 100000 levels deep in event data: inspect --validate names line and column",
			setup: func(f *fx) []string {
				line := strings.Replace(ev[0], `{"turn":1}`, nested(100000), 1)
				lineCase(f, 2, line, "[")
				// The 512th bracket is one too deep (data is at depth 1).
				f.vars["col"] = fmt.Sprint(strings.Index(line, "[") + 512)
				return []string{"inspect", "--validate", f.vars["log"]}
			},
			code:   1,
			stdout: []string{"{log}: line 2 column {col}, byte {off}: corrupt: event is not valid JSON: JSON nested deeper than 512 levels"},
		},
		{
			name: "JSON nested 100000 levels deep in the header: reindex skips the log",
			setup: func(f *fx) []string {
				line := strings.Replace(hdr, `"cwd":`, `"agentPreset":`+nested(100000)+`,"cwd":`, 1)
				lineCase(f, 1, line, "[")
				f.vars["col"] = fmt.Sprint(strings.Index(line, "[") + 512)
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{"SKIPPED {log}: unreadable session log: line 1 column {col}, byte 0: header line is not valid JSON: JSON nested deeper than 512 levels"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "JSON nested 100000 levels deep in a v3 log: migrate fails it",
			setup: func(f *fx) []string {
				v3Case(f, 3, func(l string) string { return strings.Replace(l, `"data":{`, `"data":{"deep":`+nested(100000)+`,`, 1) }, "[")
				lines, _ := v3Lines(f)
				// data.deep is at depth 2: its 511th bracket is too deep.
				f.vars["col"] = fmt.Sprint(strings.Index(lines[2], "[") + 511)
				return []string{"migrate"}
			},
			code:   1,
			stdout: []string{"failed=1"},
			stderr: []string{`the first: "{log}": line 3 column {col}, byte {off}: event is not valid JSON: JSON nested deeper than 512 levels`},
			allow:  migrated,
		},

		// Duplicate keys: JSON.parse keeps the last, other readers the
		// first; refused everywhere.
		{
			name: "duplicate id in the header: reindex skips the log",
			setup: func(f *fx) []string {
				line := strings.Replace(hdr, `"createdAt"`, `"id":"s2","createdAt"`, 1)
				lineCase(f, 1, line, `"id":"s2"`)
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{`SKIPPED {log}: unreadable session log: line 1 column {col}, byte 0: header line is not valid JSON: duplicate member "id"`},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "duplicate seq in the envelope: inspect names line and column",
			setup: func(f *fx) []string {
				line := strings.Replace(ev[2], `"time"`, `"seq":9,"time"`, 1)
				lineCase(f, 4, line, `"seq":9`)
				return []string{"inspect", f.vars["log"]}
			},
			code:   1,
			stderr: []string{`{log}: line 4 column {col}, byte {off}: event is not valid JSON: duplicate member "seq"`},
			stdout: []string{"step/start"},
		},
		{
			name: "duplicate key deep in event data (role twice, once escaped): inspect --validate refuses the line",
			setup: func(f *fx) []string {
				line := strings.Replace(ev[3], `"role":"assistant"`, `"role":"assistant","r\u006fle":"tool"`, 1)
				lineCase(f, 5, line, `"r\u006fle"`)
				return []string{"inspect", "--validate", f.vars["log"]}
			},
			code:   1,
			stdout: []string{`{log}: line 5 column {col}, byte {off}: corrupt: event is not valid JSON: duplicate member "role"`},
		},
		{
			name: "duplicate key in a v3 log's data: migrate fails it and writes no successor",
			setup: func(f *fx) []string {
				v3Case(f, 2, func(l string) string { return strings.Replace(l, `"data":{`, `"data":{"k":1,"k":2,`, 1) }, `"k":2`)
				return []string{"migrate"}
			},
			code:   1,
			stdout: []string{"failed=1"},
			stderr: []string{`the first: "{log}": line 2 column {col}, byte {off}: event is not valid JSON: duplicate member "k"`},
			allow:  migrated,
		},

		// Number forms of seq and version: only JavaScript safe integers
		// written as JSON.stringify writes them.
		{
			name: "seq written 1e999: inspect refuses it",
			setup: func(f *fx) []string {
				lineCase(f, 2, seqForm("1e999"), "1e999")
				return []string{"inspect", f.vars["log"]}
			},
			code: 1, stderr: []string{"{log}: line 2 column {col}, byte {off}: seq must be a non-negative safe integer"},
		},
		{
			name:  "seq written -0: reindex skips the log",
			setup: func(f *fx) []string { lineCase(f, 2, seqForm("-0"), "-0"); return []string{"reindex"} },
			code:  3, stdout: []string{"SKIPPED {log}: unreadable session log: line 2 column {col}, byte {off}: seq must be a non-negative safe integer"},
			allow: reindexed, want: []string{newIndex},
		},
		{
			name: "seq written 2^53+1: inspect --validate refuses it",
			setup: func(f *fx) []string {
				lineCase(f, 2, seqForm("9007199254740993"), "9007199254740993")
				return []string{"inspect", "--validate", f.vars["log"]}
			},
			code: 1, stdout: []string{"{log}: line 2 column {col}, byte {off}: corrupt: seq must be a non-negative safe integer"},
		},
		{
			name: `seq written "0": export leaves the conversation out`,
			setup: func(f *fx) []string {
				lineCase(f, 2, seqForm(`"0"`), `"0"`)
				return []string{"export", hostileID, "--to", f.path("out.tar.zst")}
			},
			code: 3, stderr: []string{"UNREADABLE {log}: line 2 column {col}, byte {off}: seq must be a non-negative safe integer"},
			want: []string{"+out.tar.zst"},
		},
		{
			name: "header version written -0: inspect refuses it",
			setup: func(f *fx) []string {
				lineCase(f, 1, versionForm("-0"), "-0")
				return []string{"inspect", f.vars["log"]}
			},
			code: 1, stderr: []string{"{log}: line 1 column {col}, byte 0: header version is not a non-negative safe integer"},
		},
		{
			name:  "header version written 1e999: reindex skips the log",
			setup: func(f *fx) []string { lineCase(f, 1, versionForm("1e999"), "1e999"); return []string{"reindex"} },
			code:  3, stdout: []string{"SKIPPED {log}: unreadable session log: line 1 column {col}, byte 0: header version is not a non-negative safe integer"},
			allow: reindexed, want: []string{newIndex},
		},
		{
			name: "header version written 2^53+1: backup --strict archives it whole as INVALID",
			setup: func(f *fx) []string {
				lineCase(f, 1, versionForm("9007199254740993"), "9007199254740993")
				return []string{"backup", "--strict", "--to", f.path("backups")}
			},
			code:   3,
			stderr: []string{"INVALID {log}: archived whole: line 1 column {col}, byte 0: header version is not a non-negative safe integer"},
			want:   []string{"+backups", "+backups/convkit-*.tar.zst", "+backups/convkit-*.tar.zst.json"}, allow: []string{lockRecord},
		},
		{
			name: `header version written "3" in a v3 log: migrate fails it`,
			setup: func(f *fx) []string {
				v3Case(f, 1, func(l string) string { return strings.Replace(l, `"version":3`, `"version":"3"`, 1) }, `"3"`)
				return []string{"migrate"}
			},
			code:   1,
			stdout: []string{"failed=1"},
			stderr: []string{`the first: "{log}": line 1 column {col}, byte 0: header version is not a non-negative safe integer`},
			allow:  migrated,
		},

		// Byte order mark, CRLF, NUL.
		{
			name: "UTF-8 byte order mark before the header: reindex skips the log",
			setup: func(f *fx) []string {
				f.session("s1.v4.jsonl", append([]byte("\xEF\xBB\xBF"), plainSession(hostileSID)...))
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{"SKIPPED {log}: unreadable session log: line 1 column 1, byte 0: header line starts with a UTF-8 byte order mark (EF BB BF)"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "CRLF line ends: inspect --validate reads the log as JSON.parse does (valid)",
			setup: func(f *fx) []string {
				f.session("s1.v4.jsonl", bytes.ReplaceAll(plainSession(hostileSID), []byte("\n"), []byte("\r\n")))
				return []string{"inspect", "--validate", f.vars["log"]}
			},
			code:   0,
			stdout: []string{"{log}: valid, format v4, 6 events"},
		},
		{
			name: "CRLF line ends in a v3 log: migrate converts it, the original untouched",
			setup: func(f *fx) []string {
				lines, name := v3Lines(f)
				p := filepath.Join(f.vars["v3"], name)
				f.write(p, bytes.ReplaceAll(joinLines(lines...), []byte("\n"), []byte("\r\n")))
				return []string{"migrate"}
			},
			code:   0,
			stdout: []string{"Summary: converted=2, already-V4=8, failed=0, skipped=0"},
			allow:  migrated, want: []string{"+{v3}/*.v4.jsonl"},
		},
		{
			name: "NUL byte between two members of an event: inspect --validate names line and column",
			setup: func(f *fx) []string {
				line := strings.Replace(ev[1], `,"time"`, ",\x00\"time\"", 1)
				lineCase(f, 3, line, "\x00")
				return []string{"inspect", "--validate", f.vars["log"]}
			},
			code:   1,
			stdout: []string{`{log}: line 3 column {col}, byte {off}: corrupt: event is not valid JSON: expected a string key in object`},
		},
		{
			name: "NUL byte inside a string: reindex skips the log",
			setup: func(f *fx) []string {
				line := strings.Replace(ev[2], "List the files", "List\x00the files", 1)
				lineCase(f, 4, line, "\x00")
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{"SKIPPED {log}: unreadable session log: line 4 column {col}, byte {off}: event is not valid JSON: control character 0x00 in string"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "NUL bytes after the last line (a crash's zero fill): inspect --stats reports a torn tail",
			setup: func(f *fx) []string {
				data := plainSession(hostileSID)
				f.vars["end"] = fmt.Sprint(len(data))
				f.session("s1.v4.jsonl", append(data, make([]byte, 4096)...))
				return []string{"inspect", "--stats", f.vars["log"]}
			},
			code:   0,
			stdout: []string{"events:      6", "torn tail:   4096 bytes after byte {end}"},
		},
		{
			name: "NUL bytes after the last zstd frame (a crash's zero fill): inspect --stats reports a torn tail",
			setup: func(f *fx) []string {
				frames := zlog(f.t, hostileSID, zbatches()...)
				f.vars["end"] = fmt.Sprint(len(zjoin(frames)))
				f.session("s1.v4.jsonl.zst", append(zjoin(frames), make([]byte, 4096)...))
				return []string{"inspect", "--stats", f.vars["log"]}
			},
			code:   0,
			stdout: []string{"torn tail:   4096 bytes after byte {end}"},
		},

		// Files that are not logs.
		{
			name: "the zero device given to inspect as PATH: refused without reading it",
			bare: true,
			setup: func(f *fx) []string {
				return []string{"inspect", "/dev/zero"}
			},
			code:   1,
			stderr: []string{"/dev/zero: byte 0: not a regular file (a device)"},
		},
		{
			name: "symbolic link to the zero device given to inspect as PATH: refused, not followed",
			bare: true,
			setup: func(f *fx) []string {
				p := filepath.Join(f.root, "zero.v4.jsonl")
				if err := os.Symlink("/dev/zero", p); err != nil {
					f.t.Fatal(err)
				}
				f.vars["link"] = p
				return []string{"inspect", p}
			},
			code:   1,
			stderr: []string{"{link}: byte 0: a symbolic link: symbolic links are never followed"},
		},
		{
			name: "Unix socket named like a session log: reindex reports it without opening it",
			setup: func(f *fx) []string {
				dir := goodConv(f)
				f.vars["sock"] = f.socket(filepath.Join(dir, "s2.v4.jsonl"))
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{"SKIPPED {sock}: not a regular file", "indexed=4, skipped=1"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "Unix socket given to inspect as PATH: refused",
			bare: true,
			setup: func(f *fx) []string {
				f.vars["sock"] = f.socket(filepath.Join(f.root, "s.v4.jsonl"))
				return []string{"inspect", f.vars["sock"]}
			},
			code:   1,
			stderr: []string{"{sock}: byte 0: not a regular file (a socket)"},
		},

		// zstd frames that lie or ask for what no reader allows.
		{
			name: "zstd frame stating a smaller content size than it holds: inspect names the frame",
			setup: func(f *fx) []string {
				f.session("s1.v4.jsonl.zst", lyingFrame(f, -7))
				return []string{"inspect", f.vars["log"]}
			},
			code:   1,
			stderr: []string{"{log}: frame 3 at file byte {at}, plain byte {plain}: frame failed validation"},
		},
		{
			name: "zstd frame stating a larger content size than it holds: reindex skips the log",
			setup: func(f *fx) []string {
				f.session("s1.v4.jsonl.zst", lyingFrame(f, +7))
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{"SKIPPED {log}: unreadable session log: frame 3 at file byte {at}, plain byte {plain}: frame failed validation"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "zstd frame that needs a dictionary: inspect refuses it before decoding",
			setup: func(f *fx) []string {
				frames := zlog(f.t, hostileSID, zbatches()...)
				f.vars["at"], f.vars["plain"] = fmt.Sprint(len(zjoin(frames))+5), zplainAt(4) // the window byte
				// Dictionary id 7 in one byte, a 1 KiB window.
				f.session("s1.v4.jsonl.zst", append(zjoin(frames), frameHeader(0x01, 0x00, 7)...))
				return []string{"inspect", f.vars["log"]}
			},
			code:   1,
			stderr: []string{"{log}: frame 5 at file byte {at}, plain byte {plain}: corrupt zstd log: frame needs zstd dictionary 7: log frames are written without a dictionary"},
			stdout: []string{"turn/end"},
		},
		{
			name: "zstd frame with a 2 TiB window: reindex skips the log without decoding it",
			setup: func(f *fx) []string {
				frames := zlog(f.t, hostileSID, zbatches()...)
				f.vars["at"], f.vars["plain"] = fmt.Sprint(frameAt(frames, 2)+5), zplainAt(2) // the window byte
				// Window exponent 31: 2^41 bytes.
				frames[2] = frameHeader(0x00, 31<<3)
				f.session("s1.v4.jsonl.zst", zjoin(frames))
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{"SKIPPED {log}: unreadable session log: frame 3 at file byte {at}, plain byte {plain}: corrupt zstd log: frame window of 2199023255552 bytes (2 TiB) exceeds the 128 MiB a log reader allows"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "zstd single-segment frame declaring 2 TiB of content: inspect refuses it",
			setup: func(f *fx) []string {
				frames := zlog(f.t, hostileSID, zbatches()...)
				f.vars["at"], f.vars["plain"] = fmt.Sprint(frameAt(frames, 2)+4), zplainAt(2) // the descriptor
				size := make([]byte, 8)
				binary.LittleEndian.PutUint64(size, 2<<40)
				frames[2] = frameHeader(0xE0, size...) // 8-byte content size, single segment
				f.session("s1.v4.jsonl.zst", zjoin(frames))
				return []string{"inspect", f.vars["log"]}
			},
			code:   1,
			stderr: []string{"{log}: frame 3 at file byte {at}, plain byte {plain}: corrupt zstd log: single-segment frame of 2199023255552 bytes (2 TiB) exceeds the 128 MiB window a log reader allows"},
		},
	}
	return cases
}

// socket makes a Unix socket at p (its listener closed when the case ends;
// the socket file stays).
func (f *fx) socket(p string) string {
	f.t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		f.t.Fatal(err)
	}
	// A socket's path must fit sun_path (108 bytes) and a test's temp
	// directory may not: it is bound under a short name, then renamed
	// into place (rename moves the socket file itself).
	short, err := os.MkdirTemp("", "sock")
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { os.RemoveAll(short) })
	l, err := net.Listen("unix", filepath.Join(short, "s"))
	if err != nil {
		f.t.Skipf("no Unix socket: %v", err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	f.t.Cleanup(func() { l.Close() })
	if err := os.Rename(filepath.Join(short, "s"), p); err != nil {
		f.t.Fatal(err)
	}
	return p
}
