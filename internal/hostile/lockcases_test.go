package hostile

import (
	"os"
	"path/filepath"
)

// lockLink replaces runtime.lock with a symbolic link to a file outside the
// store that holds something worth keeping ({victim}); a command that
// opened the link would empty it and write its holder record into it.
func (f *fx) lockLink(target string) {
	f.t.Helper()
	if target == "" {
		target = f.write(filepath.Join(f.root, "elsewhere", "passwd"), []byte("root:x:0:0:root:/root:/bin/sh\n"))
	}
	f.vars["victim"] = target
	if err := os.Remove(lockFile(f)); err != nil && !os.IsNotExist(err) {
		f.t.Fatal(err)
	}
	if err := os.Symlink(target, lockFile(f)); err != nil {
		f.t.Fatal(err)
	}
}

func lockFile(f *fx) string { return filepath.Join(f.data, "runtime.lock") }

func lockCases() []hcase {
	refused := []string{"refusing to lock {data}/runtime.lock: it is a symbolic link, and convkit never follows links when writing or locking"}
	linked := func(cmd ...string) func(f *fx) []string {
		return func(f *fx) []string {
			f.lockLink("")
			return cmd
		}
	}
	return []hcase{
		{name: "runtime.lock is a symbolic link: reindex refuses it, the file behind it unchanged",
			setup: linked("reindex"), code: 1, stderr: refused},
		{name: "runtime.lock is a symbolic link: migrate refuses it, the file behind it unchanged",
			setup: linked("migrate"), code: 1, stderr: refused},
		{name: "runtime.lock is a symbolic link: delete refuses it, the file behind it unchanged",
			setup: func(f *fx) []string {
				f.lockLink("")
				return []string{"delete", f.vars["basic.id"]}
			}, code: 1, stderr: refused},
		{name: "runtime.lock is a symbolic link: backup refuses it, the file behind it unchanged",
			setup: func(f *fx) []string { f.lockLink(""); return []string{"backup", "--to", f.path("backups")} }, code: 1, stderr: refused,
			// The backup directory is made before the store is opened.
			allow: []string{"+backups"}},
		{name: "runtime.lock is a symbolic link: import refuses it, the file behind it unchanged",
			setup: func(f *fx) []string {
				other := filepath.Join(f.root, "other")
				copyTree(f.t, f.data, other)
				p := filepath.Join(f.root, "export.tar.zst")
				if r := f.run("--data-dir", other, "export", f.vars["basic.id"], "--to", p); r.code != 0 {
					f.t.Fatalf("setup export: %d %s", r.code, r.stderr)
				}
				f.lockLink("")
				return []string{"import", "--on-conflict", "replace", p}
			}, code: 1, stderr: refused},
		{name: "runtime.lock is a dangling symbolic link: reindex creates nothing through it",
			setup: func(f *fx) []string {
				f.lockLink(filepath.Join(f.root, "elsewhere", "created-by-convkit"))
				if err := os.MkdirAll(filepath.Join(f.root, "elsewhere"), 0o700); err != nil {
					f.t.Fatal(err)
				}
				return []string{"reindex"}
			}, code: 1, stderr: refused},
		{name: "runtime.lock is a FIFO: lock status refuses it, no hang",
			setup: func(f *fx) []string {
				os.Remove(lockFile(f))
				f.mkfifo(lockFile(f))
				return []string{"lock", "status"}
			}, code: 1, stderr: []string{"lock status: {data}/runtime.lock: not a regular file (a FIFO)"}},
		{name: "runtime.lock is a FIFO: export refuses it, no hang",
			setup: func(f *fx) []string {
				os.Remove(lockFile(f))
				f.mkfifo(lockFile(f))
				return []string{"export", f.vars["basic.id"], "--to", f.path("out.tar.zst")}
			}, code: 1, stderr: []string{"{data}/runtime.lock: not a regular file (a FIFO)"}},
		{name: "runtime.lock is a FIFO: reindex refuses it, no hang",
			setup: func(f *fx) []string {
				os.Remove(lockFile(f))
				f.mkfifo(lockFile(f))
				return []string{"reindex"}
			}, code: 1, stderr: []string{"refusing to lock {data}/runtime.lock: not a regular file (a FIFO)"}},
	}
}
