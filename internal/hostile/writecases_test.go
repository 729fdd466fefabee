package hostile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/store"
)

// The cases of every class of file convkit opens for writing or locking
// (docs/HOSTILE.md, "Files convkit writes or locks"): a symbolic link and
// a FIFO in its place. A link points at {victim}, a file outside the
// store that holds something worth keeping; the snapshot of the whole
// root checks that it is unchanged and that the link and the FIFO are
// still there, as they were.

// victim writes the file a link points at and returns its path.
func (f *fx) victim(name string) string {
	p := f.write(filepath.Join(f.root, "elsewhere", name), []byte("keep me\n"))
	f.vars["victim"] = p
	return p
}

// link makes p a symbolic link to target, making p's directory.
func (f *fx) link(target, p string) string {
	f.t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// indexAside builds metadata.db with reindex and moves it out of the
// store to {victim}, a real index that a command writing through a link
// would change.
func (f *fx) indexAside() string {
	f.mustRun(0, "reindex")
	v := filepath.Join(f.root, "elsewhere", "metadata.db")
	if err := os.MkdirAll(filepath.Dir(v), 0o700); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(f.data, "metadata.db"), v); err != nil {
		f.t.Fatal(err)
	}
	f.vars["victim"] = v
	f.vars["db"] = filepath.Join(f.data, "metadata.db")
	return v
}

// plantDuring runs plant(dir) as soon as a migrate report folder with its
// migration.log appears in $TMPDIR, while the command runs; check fails
// the case when the run ended before it could.
func (f *fx) plantDuring(plant func(dir string)) (check func()) {
	var once sync.Once
	done := make(chan struct{})
	planted := false
	stop := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			ms, _ := filepath.Glob(filepath.Join(f.tmp, "convkit-migrate-v4-*", "migration.log"))
			if len(ms) > 0 {
				plant(filepath.Dir(ms[0]))
				planted = true
				return
			}
			time.Sleep(100 * time.Microsecond)
		}
	}()
	return func() {
		once.Do(func() { close(stop) })
		<-done
		if !planted {
			f.t.Fatal("the migration ended before summary.json could be taken")
		}
	}
}

// largeV3 adds the hostile conversation with a v3 session log of about
// 24 MB, so that a migration converting it runs long enough for a case to
// act while it runs.
func (f *fx) largeV3() {
	dir := f.addConv(hostileID, hostileSID)
	tmp := filepath.Join(f.root, "large.v3.jsonl")
	if err := fixtures.LargeLog(tmp, 3, convlog.Plain, fixtures.LongLines, 24<<20, 5); err != nil {
		f.t.Fatal(err)
	}
	b, err := os.ReadFile(tmp)
	if err != nil {
		f.t.Fatal(err)
	}
	os.Remove(tmp)
	// The header names the session its file name does.
	nl := strings.IndexByte(string(b), '\n')
	hdr := string(b[:nl])
	i := strings.Index(hdr, `"id":"large-`)
	j := strings.IndexByte(hdr[i+6:], '"') + i + 6
	hdr = hdr[:i] + `"id":"` + hostileSID + `"` + hdr[j+1:]
	f.vars["log"] = f.write(filepath.Join(dir, "s1.v3.jsonl"), append([]byte(hdr), b[nl:]...))
}

func writeCases() []hcase {
	// What rename and archive write besides metadata.db, and what delete
	// of the basic conversation does.
	edited := []string{lockRecord, "~{basic}/metadata.v4.jsonl"}
	gone := "-data/conversations/" + filepath.Base(base.basic.Dir)
	deleted := []string{gone, gone + "/*", "+data/.delete-*.journal"}
	return []hcase{
		{
			name: "metadata.db is a symbolic link to an index: rename writes nothing through it",
			setup: func(f *fx) []string {
				f.link(f.indexAside(), filepath.Join(f.data, "metadata.db"))
				return []string{"rename", f.vars["basic.id"], "renamed"}
			},
			code:   0,
			stderr: []string{"convkit: warning: metadata.db was not updated ({db}: not a regular file (a symbolic link; links are never followed))"},
			allow:  edited,
		},
		{
			name: "archive named as a FIFO without a writer: import does not hang in open, refuses it",
			setup: func(f *fx) []string {
				f.vars["arch"] = f.mkfifo(filepath.Join(f.root, "pipe.tar.zst"))
				return []string{"import", f.vars["arch"]}
			},
			code:   1,
			stderr: []string{"{arch}"},
		},
		{
			name: "conversation log is a symbolic link: rename appends nothing through it",
			setup: func(f *fx) []string {
				log := filepath.Join(f.vars["basic"], "metadata.v4.jsonl")
				v := filepath.Join(f.root, "elsewhere", "metadata.v4.jsonl")
				copyFile(f.t, log, v)
				os.Remove(log)
				f.vars["log"] = f.link(v, log)
				return []string{"rename", f.vars["basic.id"], "renamed"}
			},
			code:   1,
			stderr: []string{"{log} is a symbolic link: symbolic links are never followed"},
			allow:  []string{lockRecord},
		},
		{
			name: "conversation log is a FIFO: archive does not hang, appends nothing",
			setup: func(f *fx) []string {
				log := filepath.Join(f.vars["basic"], "metadata.v4.jsonl")
				os.Remove(log)
				f.vars["log"] = f.mkfifo(log)
				return []string{"archive", f.vars["basic.id"]}
			},
			code:   1,
			stderr: []string{"{log}: not a regular file (a FIFO)"},
			allow:  []string{lockRecord},
		},
		{
			name: "metadata.db is a FIFO: archive does not hang, writes nothing into it",
			setup: func(f *fx) []string {
				f.vars["db"] = f.mkfifo(filepath.Join(f.data, "metadata.db"))
				return []string{"archive", f.vars["basic.id"]}
			},
			code:   0,
			stderr: []string{"convkit: warning: metadata.db was not updated ({db}: not a regular file (a FIFO))"},
			allow:  edited,
		},
		{
			name: "metadata.db-wal is a symbolic link: delete writes nothing through it",
			setup: func(f *fx) []string {
				f.mustRun(0, "reindex")
				f.vars["wal"] = f.link(f.victim("wal"), filepath.Join(f.data, "metadata.db-wal"))
				return []string{"delete", f.vars["basic.id"]}
			},
			code:   0,
			stdout: []string{"deleted {basic.id}"},
			stderr: []string{"convkit: warning: metadata.db was not updated ({wal}: not a regular file (a symbolic link; links are never followed))"},
			allow:  []string{lockRecord},
			want:   deleted,
		},
		{
			name: "metadata.db-shm is a FIFO: search refuses the index, no hang",
			setup: func(f *fx) []string {
				f.mustRun(0, "reindex")
				f.vars["shm"] = f.mkfifo(filepath.Join(f.data, "metadata.db-shm"))
				return []string{"search", "the"}
			},
			code:   1,
			stderr: []string{"{shm}: not a regular file (a FIFO)"},
		},
		{
			name: "temporary database names taken by a symbolic link and a FIFO: reindex follows neither, leaves both",
			setup: func(f *fx) []string {
				f.link(f.victim("db"), filepath.Join(f.data, ".metadata.db.0123456789abcdef.tmp"))
				f.mkfifo(filepath.Join(f.data, ".metadata.db.00000000000000aa.tmp"))
				return []string{"reindex"}
			},
			code:  0,
			allow: reindexed, want: []string{newIndex},
		},
		{
			name: "temporary file names in a conversation directory taken by a symbolic link and a FIFO: reindex removes neither, reports both",
			setup: func(f *fx) []string {
				f.vars["link"] = f.link(f.victim("log"), filepath.Join(f.vars["basic"], ".metadata.v4.jsonl.0123456789abcdef.tmp"))
				f.vars["fifo"] = f.mkfifo(filepath.Join(f.vars["zstd"], ".metadata.v4.jsonl.zst.00000000000000aa.tmp"))
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{"SKIPPED {link}: symbolic links are not followed", "SKIPPED {fifo}: not a regular file"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "temporary archive names in the backup directory taken by a symbolic link and a FIFO: backup follows neither, leaves both",
			setup: func(f *fx) []string {
				dir := filepath.Join(f.root, "backups")
				f.link(f.victim("archive"), filepath.Join(dir, ".convkit-20260101T000000Z.tar.zst.0123456789abcdef.tmp"))
				f.mkfifo(filepath.Join(dir, ".convkit-20260101T000000Z.tar.zst.00000000000000aa.tmp"))
				return []string{"backup", "--to", dir}
			},
			code:  0,
			allow: []string{lockRecord, "+backups/convkit-*.tar.zst", "+backups/convkit-*.tar.zst.json"},
			want:  []string{"+backups/convkit-*.tar.zst"},
		},
		{
			name: "sidecar of an archive is a FIFO: backup verify does not hang, records nothing into it",
			setup: func(f *fx) []string {
				a := f.backupArchive()
				os.Remove(a + ".json")
				f.vars["sidecar"] = f.mkfifo(a + ".json")
				return []string{"backup", "verify", a}
			},
			code:   0,
			stderr: []string{"{sidecar}: not a regular file"},
		},
		{
			name: "temporary sidecar names taken by a symbolic link and a FIFO: backup verify follows neither, leaves both",
			setup: func(f *fx) []string {
				a := f.backupArchive()
				dir, base := filepath.Split(a)
				f.link(f.victim("sidecar"), filepath.Join(dir, "."+base+".json.0123456789abcdef.tmp"))
				f.mkfifo(filepath.Join(dir, "."+base+".json.00000000000000aa.tmp"))
				return []string{"backup", "verify", a}
			},
			code:  0,
			allow: []string{"~backups/convkit-*.tar.zst.json"},
			want:  []string{"~backups/convkit-*.tar.zst.json"},
		},
		{
			name: "backup directory is a symbolic link: backup refuses it, writes nothing behind it",
			setup: func(f *fx) []string {
				far := filepath.Join(f.root, "elsewhere", "backups")
				f.write(filepath.Join(far, "keep"), []byte("keep me\n"))
				f.vars["dir"] = f.link(far, filepath.Join(f.root, "backups"))
				return []string{"backup", "--to", f.vars["dir"]}
			},
			code:   1,
			stderr: []string{"{dir} is a symbolic link: symbolic links are never followed; name the directory itself"},
			allow:  []string{lockRecord},
		},
		{
			name: "backup directory is a FIFO: backup refuses it, no hang",
			setup: func(f *fx) []string {
				f.vars["dir"] = f.mkfifo(filepath.Join(f.root, "backups"))
				return []string{"backup", "--to", f.vars["dir"]}
			},
			code:   1,
			stderr: []string{"{dir}: exists and is not a directory"},
			allow:  []string{lockRecord},
		},
		{
			name: "export target is a symbolic link: export refuses it, the file behind it unchanged",
			setup: func(f *fx) []string {
				f.vars["out"] = f.link(f.victim("out.tar.zst"), filepath.Join(f.root, "out.tar.zst"))
				return []string{"export", f.vars["basic.id"], "--to", f.vars["out"]}
			},
			code:   1,
			stderr: []string{"{out}: file already exists: export never overwrites a file"},
		},
		{
			name: "export target is a FIFO: export refuses it, no hang",
			setup: func(f *fx) []string {
				f.vars["out"] = f.mkfifo(filepath.Join(f.root, "out.tar.zst"))
				return []string{"export", f.vars["basic.id"], "--to", f.vars["out"]}
			},
			code:   1,
			stderr: []string{"{out}: file already exists: export never overwrites a file"},
		},
		{
			name: "restore target is a symbolic link: restore refuses it, writes nothing behind it",
			setup: func(f *fx) []string {
				a := f.backupArchive()
				far := filepath.Join(f.root, "elsewhere", "restored")
				if err := os.MkdirAll(far, 0o700); err != nil {
					f.t.Fatal(err)
				}
				f.vars["target"] = f.link(far, filepath.Join(f.root, "restored"))
				return []string{"restore", a, "--force", "--to", f.vars["target"]}
			},
			code:   1,
			stderr: []string{"{target} is a symbolic link: restore never follows links"},
		},
		{
			name: "restore target is a FIFO: restore refuses it, no hang",
			setup: func(f *fx) []string {
				a := f.backupArchive()
				f.vars["target"] = f.mkfifo(filepath.Join(f.root, "restored"))
				return []string{"restore", a, "--to", f.vars["target"]}
			},
			code:   1,
			stderr: []string{"{target} exists and is not a directory"},
		},
		{
			name: "delete journal names taken by a symbolic link and a FIFO: delete reads neither, leaves both",
			setup: func(f *fx) []string {
				// A journal naming ghost-1 would make delete report it
				// "already deleted"; read through nothing, it is unknown.
				f.write(filepath.Join(f.root, "elsewhere", "journal"), []byte(`{"ids":["ghost-1"]}`+"\n"))
				f.link(filepath.Join(f.root, "elsewhere", "journal"), filepath.Join(f.data, ".delete-0123456789abcdef.journal"))
				f.mkfifo(filepath.Join(f.data, ".delete-00000000000000aa.journal"))
				return []string{"delete", "ghost-1"}
			},
			code:   1,
			stderr: []string{`conversation "ghost-1": no such conversation`},
			allow:  []string{lockRecord},
			check: func(f *fx, r result) {
				if strings.Contains(r.stdout, "already deleted") {
					f.t.Errorf("the linked journal was read: %s", r.stdout)
				}
			},
		},
		{
			name: "sessions root: session.lock is a FIFO: migrate locks nothing, does not hang, fails the session",
			bare: true, noDataDir: true,
			setup: func(f *fx) []string {
				root := f.sessionsRoot()
				f.write(filepath.Join(root, "--p--", "piped", "session.v3.jsonl"), dshSession("piped", "/p"))
				f.vars["lock"] = f.mkfifo(filepath.Join(root, "--p--", "piped", "session.lock"))
				return []string{"migrate", "--sessions-dir", root}
			},
			code:   1,
			stdout: []string{`ERROR "{sessions}/--p--/piped/session.v3.jsonl": refusing to lock {lock}: not a regular file (a FIFO)`},
			stderr: []string{"1 input(s) failed to migrate"},
			allow:  converted, want: converted[:2],
		},
		{
			name: "summary.json taken by a symbolic link while migrate runs: migrate fails naming it, writes nothing through it",
			setup: func(f *fx) []string {
				f.largeV3()
				v := f.victim("summary.json")
				check := f.plantDuring(func(dir string) {
					f.vars["summary"] = filepath.Join(dir, "summary.json")
					os.Symlink(v, f.vars["summary"])
				})
				f.after = check
				return []string{"migrate"}
			},
			code:   1,
			stdout: []string{"Summary: converted=3, already-V4=9, failed=0, skipped=0"},
			stderr: []string{"the JSON summary was not written: ", "summary.json is a symbolic link"},
			allow:  append([]string{"+{v3}/*.v4.jsonl", "+{conv}/s1.v4.jsonl"}, migrated...),
		},
		{
			name: "summary.json taken by a FIFO while migrate runs: migrate fails naming it, no hang",
			setup: func(f *fx) []string {
				f.largeV3()
				check := f.plantDuring(func(dir string) {
					f.vars["summary"] = filepath.Join(dir, "summary.json")
					if err := syscallMkfifo(f.vars["summary"]); err != nil {
						f.t.Error(err)
					}
				})
				f.after = check
				return []string{"migrate"}
			},
			code:   1,
			stdout: []string{"Summary: converted=3, already-V4=9, failed=0, skipped=0"},
			stderr: []string{"the JSON summary was not written: ", "summary.json: not a regular file (a FIFO)"},
			allow:  append([]string{"+{v3}/*.v4.jsonl", "+{conv}/s1.v4.jsonl"}, migrated...),
		},
	}
}

// conversationsFile builds a good metadata.db from the base store, then
// puts kind ("file", "fifo" or "symlink", to the real directory moved
// aside) in conversations/'s place, {convs}.
func (f *fx) conversationsFile(kind string) {
	f.t.Helper()
	if r := f.run("reindex"); !fileExists(filepath.Join(f.data, store.IndexFileName)) {
		f.t.Fatalf("setup: reindex wrote no metadata.db: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	p := filepath.Join(f.data, "conversations")
	f.vars["convs"] = p
	aside := filepath.Join(f.data, "conversations.real")
	if err := os.Rename(p, aside); err != nil {
		f.t.Fatal(err)
	}
	var err error
	switch kind {
	case "file":
		err = os.WriteFile(p, []byte("not a directory\n"), 0o600)
	case "fifo":
		err = syscallMkfifo(p)
	case "symlink":
		err = os.Symlink("conversations.real", p)
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

func fileExists(p string) bool { _, err := os.Lstat(p); return err == nil }

// conversationsFileCases: conversations/ is not a directory. The store is
// broken, not empty: every command that lists or looks up conversations
// refuses it (exit 1), naming the entry and what was expected, and the
// good metadata.db stays as it is (the snapshot allows no change to it).
func conversationsFileCases() []hcase {
	const refused = "{convs}: %s, expected the directory of the store's conversations (conversations/<conversation>/<log>)"
	type run struct {
		name  string
		kind  string
		args  func(f *fx) []string
		allow []string
		// first: the error is migrate's first failure.
		first bool
	}
	found := map[string]string{"file": "a regular file", "fifo": "a FIFO", "symlink": "a symbolic link (not followed)"}
	what := map[string]string{"file": "a regular file", "fifo": "a FIFO", "symlink": "a symbolic link"}
	runs := []run{
		{name: "reindex refuses it, metadata.db unchanged", kind: "file", args: func(*fx) []string { return []string{"reindex"} }, allow: []string{lockRecord}},
		{name: "reindex refuses it, metadata.db unchanged", kind: "fifo", args: func(*fx) []string { return []string{"reindex"} }, allow: []string{lockRecord}},
		{name: "reindex refuses it, metadata.db unchanged", kind: "symlink", args: func(*fx) []string { return []string{"reindex"} }, allow: []string{lockRecord}},
		{name: "reindex --incremental refuses it, metadata.db unchanged", kind: "file", args: func(*fx) []string { return []string{"reindex", "--incremental"} }, allow: []string{lockRecord}},
		{name: "reindex --check refuses it", kind: "file", args: func(*fx) []string { return []string{"reindex", "--check"} }},
		{name: "list from the logs refuses it", kind: "file", args: func(f *fx) []string {
			// Without an index, list reads the logs.
			if err := os.Rename(filepath.Join(f.data, store.IndexFileName), filepath.Join(f.root, "metadata.db.aside")); err != nil {
				f.t.Fatal(err)
			}
			return []string{"list", "--all"}
		}},
		{name: "list from the logs refuses it", kind: "symlink", args: func(f *fx) []string {
			if err := os.Rename(filepath.Join(f.data, store.IndexFileName), filepath.Join(f.root, "metadata.db.aside")); err != nil {
				f.t.Fatal(err)
			}
			return []string{"list", "--all"}
		}},
		{name: "backup refuses it, writes no archive", kind: "file", args: func(f *fx) []string {
			dir := filepath.Join(f.root, "backups")
			if err := os.Mkdir(dir, 0o700); err != nil {
				f.t.Fatal(err)
			}
			return []string{"backup", "--to", dir}
		}, allow: []string{lockRecord}},
		{name: "export refuses it, writes no archive", kind: "file", args: func(f *fx) []string {
			return []string{"export", f.vars["basic.id"], "--to", f.path("out.tar.zst")}
		}},
		{name: "migrate fails the root, writes nothing there", kind: "file", args: func(*fx) []string { return []string{"migrate"} },
			allow: append([]string{lockRecord}, migrateReport...), first: true},
	}
	var cs []hcase
	for _, r := range runs {
		want := "convkit: error: " + fmt.Sprintf(refused, found[r.kind])
		if r.first {
			// migrate names its input quoted, once.
			want = `1 input(s) failed to migrate; the first: "{convs}": ` + strings.TrimPrefix(fmt.Sprintf(refused, found[r.kind]), "{convs}: ")
		}
		cs = append(cs, hcase{
			name: "conversations is " + what[r.kind] + ": " + r.name,
			setup: func(f *fx) []string {
				f.conversationsFile(r.kind)
				return r.args(f)
			},
			code:   1,
			stderr: []string{want},
			allow:  r.allow,
		})
	}
	return cs
}

func syscallMkfifo(p string) error { return syscall.Mkfifo(p, 0o600) }
