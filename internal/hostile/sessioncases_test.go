package hostile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// dshSession is a hand-written v3 session log of the runtime's layout:
// header (id, cwd) and one turn.
func dshSession(id, cwd string) []byte {
	h := fmt.Sprintf(`{"type":"session","version":3,"id":%q,"createdAt":1,"cwd":%q,"isSeeded":false,"delegationDepth":0}`, id, cwd)
	return []byte(strings.Join([]string{h,
		`{"type":"turn/start","seq":0,"time":10,"data":{"turn":1}}`,
		`{"type":"user/message","seq":1,"time":11,"data":{"role":"user","id":"m1","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"turn/end","seq":2,"time":12,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	}, "\n") + "\n")
}

// sessionsRoot makes {sessions}, a sessions root in the runtime's layout
// holding one good v3 session, --p--/good, which a migration converts.
func (f *fx) sessionsRoot() string {
	root := filepath.Join(f.root, "sessions")
	f.vars["sessions"] = root
	f.write(filepath.Join(root, "--p--", "good", "session.v3.jsonl"), dshSession("good", "/p"))
	return root
}

// converted is what a migration of {sessions} writes for the good
// session: its successor and its session.lock.
var converted = append([]string{"+sessions/--p--/good/session.v4.jsonl", "+sessions/--p--/good/session.lock"}, migrateReport...)

func sessionCases() []hcase {
	migrate := []string{"migrate", "--sessions-dir", "{sessions}"}
	args := func(f *fx) []string {
		out := make([]string, len(migrate))
		for i, a := range migrate {
			out[i] = f.expand(a)
		}
		return out
	}
	return []hcase{
		{
			name: "sessions root: a log whose header names another session: migrate fails it, converts the rest",
			bare: true, noDataDir: true,
			setup: func(f *fx) []string {
				root := f.sessionsRoot()
				f.vars["log"] = f.write(filepath.Join(root, "--p--", "copy", "session.v3.jsonl"), dshSession("good", "/p"))
				return args(f)
			},
			code:   1,
			stdout: []string{`ERROR "{log}": corrupt session log: header id "good" is not the session "copy" its session directory names`},
			stderr: []string{`1 input(s) failed to migrate; the first: "{log}": corrupt session log: header id "good"`},
			allow:  converted, want: converted[:2],
		},
		{
			name: "sessions root: a stray copy of a child's session directory: migrate fails the copy, converts the parent and the child",
			bare: true, noDataDir: true,
			setup: func(f *fx) []string {
				root := f.sessionsRoot()
				kid := strings.Replace(string(dshSession("kid", "/p")), `"delegationDepth":0`, `"parentSession":"good","origin":"subagent","delegationDepth":1`, 1)
				f.write(filepath.Join(root, "--p--", "kid", "session.v3.jsonl"), []byte(kid))
				f.vars["copy"] = f.write(filepath.Join(root, "--p--", "kid-bak", "session.v3.jsonl"), []byte(kid))
				return args(f)
			},
			code: 1,
			stdout: []string{`Ignored "{sessions}/--p--/kid-bak" as a child of session "good": corrupt session log "{copy}": header id "kid"`,
				`ERROR "{copy}": corrupt session log: header id "kid" is not the session "kid-bak" its session directory names`,
				"converted=2, already-V4=0, failed=1"},
			stderr: []string{`1 input(s) failed to migrate; the first: "{copy}"`},
			allow:  append([]string{"+sessions/--p--/kid/session.v4.jsonl", "+sessions/--p--/kid/session.lock"}, converted...),
			want:   append([]string{"+sessions/--p--/kid/session.v4.jsonl"}, converted[:2]...),
		},
		{
			name: "sessions root: session.lock is a symbolic link: migrate locks nothing through it, fails the session",
			bare: true, noDataDir: true,
			setup: func(f *fx) []string {
				root := f.sessionsRoot()
				f.write(filepath.Join(root, "--p--", "linked", "session.v3.jsonl"), dshSession("linked", "/p"))
				f.vars["lock"] = filepath.Join(root, "--p--", "linked", "session.lock")
				if err := os.Symlink(f.outside(), f.vars["lock"]); err != nil {
					f.t.Fatal(err)
				}
				return args(f)
			},
			code:   1,
			stdout: []string{`ERROR "{sessions}/--p--/linked/session.v3.jsonl": refusing to lock {lock}: `, "symbolic link"},
			stderr: []string{"1 input(s) failed to migrate"},
			allow:  converted, want: converted[:2],
		},
		{
			name: "sessions root: a project directory that is a symbolic link: migrate fails it, reads nothing through it",
			bare: true, noDataDir: true,
			setup: func(f *fx) []string {
				root := f.sessionsRoot()
				far := filepath.Join(f.root, "elsewhere", "--far--")
				f.write(filepath.Join(far, "s", "session.v3.jsonl"), dshSession("s", "/far"))
				f.vars["link"] = filepath.Join(root, "--far--")
				if err := os.Symlink(far, f.vars["link"]); err != nil {
					f.t.Fatal(err)
				}
				return args(f)
			},
			code:   1,
			stdout: []string{`ERROR "{link}": project symbolic links are not traversed`, "converted=1, already-V4=0, failed=1"},
			stderr: []string{`the first: "{link}": project symbolic links are not traversed`},
			allow:  converted, want: converted[:2],
		},
		{
			name: "sessions root that mixes compressions: migrate refuses it whole, writes no session",
			bare: true, noDataDir: true,
			setup: func(f *fx) []string {
				root := f.sessionsRoot()
				f.vars["z"] = f.write(filepath.Join(root, "--p--", "z", "session.v3.jsonl.zstd"), zframe(f.t, dshSession("z", "/p")))
				return args(f)
			},
			code:   1,
			stdout: []string{`ERROR "{sessions}": session artifact "{z}" uses .jsonl.zstd, but this root's compression is "none"`, "converted=0, already-V4=0, failed=1, skipped=0"},
			stderr: []string{`session artifact "{z}" uses .jsonl.zstd`},
			allow:  migrateReport,
		},
		{
			name: "sessions root holding both layouts: migrate refuses it before writing anything",
			bare: true, noDataDir: true,
			setup: func(f *fx) []string {
				root := f.sessionsRoot()
				f.write(filepath.Join(root, "c1", "metadata.v4.jsonl"), []byte(`{"type":"conversation","version":4,"id":"c1","createdAt":1}`+"\n"))
				return args(f)
			},
			code:   1,
			stderr: []string{"{sessions}: not a sessions root convkit knows: it holds both layouts: a convkit conversation directory (c1) and a DSH project directory (--p--)"},
		},
		{
			name: "sessions root: the highest generation is a FIFO: migrate fails it without opening it, never reads the lower one",
			bare: true, noDataDir: true,
			setup: func(f *fx) []string {
				root := f.sessionsRoot()
				f.write(filepath.Join(root, "--p--", "fifo", "session.v3.jsonl"), dshSession("fifo", "/p"))
				f.vars["fifo"] = f.mkfifo(filepath.Join(root, "--p--", "fifo", "session.v4.jsonl"))
				return args(f)
			},
			code:   1,
			stdout: []string{`ERROR "{fifo}": the current generation is not a regular file`},
			stderr: []string{"1 input(s) failed to migrate"},
			allow:  converted, want: converted[:2],
		},
		{
			name: "session directory whose highest generation is a symbolic link: inspect refuses it, never reads the lower one",
			bare: true, noDataDir: true,
			setup: func(f *fx) []string {
				root := f.sessionsRoot()
				dir := filepath.Join(root, "--p--", "good")
				f.vars["link"] = filepath.Join(dir, "session.v4.jsonl")
				if err := os.Symlink(f.outside(), f.vars["link"]); err != nil {
					f.t.Fatal(err)
				}
				return []string{"inspect", dir}
			},
			code:   1,
			stderr: []string{"{link}: the current generation is a symbolic link, which is not followed"},
		},
	}
}
