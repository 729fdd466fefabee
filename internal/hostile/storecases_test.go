package hostile

import (
	"os"
	"path/filepath"
	"syscall"
)

// mkfifo makes a FIFO at p, and makes f.unblock open its writing end, so
// that a command that opened it for reading (and hangs there) gets EOF.
func (f *fx) mkfifo(p string) string {
	f.t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		f.t.Fatal(err)
	}
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		f.t.Skipf("mkfifo is not permitted here: %v", err)
	}
	f.unblock = func() {
		if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
	}
	return p
}

// mkdev makes a character device node at p: major 1, minor 5 is
// /dev/zero, which a reader would read forever. Without CAP_MKNOD (not
// root, or a user namespace) the case is skipped.
func (f *fx) mkdev(p string, major, minor int) string {
	f.t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		f.t.Fatal(err)
	}
	dev := major<<8 | minor // Linux's encoding for small numbers
	if err := syscall.Mknod(p, syscall.S_IFCHR|0o600, dev); err != nil {
		f.t.Skipf("mknod is not permitted here (needs CAP_MKNOD): %v", err)
	}
	return p
}

// outside writes a file outside the data directory that a link points at:
// it must not be read through the link, nor changed.
func (f *fx) outside() string {
	p := f.write(filepath.Join(f.root, "elsewhere", "s9.v4.jsonl"), plainSession("s9"))
	f.vars["target"] = p
	return p
}

func storeCases() []hcase {
	// goodConv adds the hostile conversation with a good session log.
	goodConv := func(f *fx) string {
		dir := f.addConv(hostileID, hostileSID)
		f.write(filepath.Join(dir, "s1.v4.jsonl"), plainSession(hostileSID))
		return dir
	}
	return []hcase{
		{
			name: "symbolic link where a session log should be: reindex reports it, reads nothing through it",
			setup: func(f *fx) []string {
				dir := goodConv(f)
				f.vars["link"] = filepath.Join(dir, "s2.v4.jsonl")
				if err := os.Symlink(f.outside(), f.vars["link"]); err != nil {
					f.t.Fatal(err)
				}
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{"SKIPPED {link}: symbolic links are not followed", "indexed=4, skipped=1"},
			stderr: []string{"the first: {link}: symbolic links are not followed"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "symbolic link as the session log: inspect by id refuses it",
			setup: func(f *fx) []string {
				dir := f.addConv(hostileID, hostileSID)
				f.vars["link"] = filepath.Join(dir, "s1.v4.jsonl")
				if err := os.Symlink(f.outside(), f.vars["link"]); err != nil {
					f.t.Fatal(err)
				}
				return []string{"inspect", hostileID, hostileSID}
			},
			code:   1,
			stderr: []string{`conversation "hostile-0001" ({conv}) has no log for session "s1"; {link}: symbolic links are not followed`},
		},
		{
			name: "symlinked conversation directory: migrate fails it, converts the rest",
			setup: func(f *fx) []string {
				f.vars["link"] = filepath.Join(f.data, "conversations", hostileID)
				target := filepath.Join(f.root, "elsewhere", hostileID)
				f.write(filepath.Join(target, "s1.v3.jsonl"), joinLines(append([]string{sessionHeader(hostileSID, 3)}, sessionEvents()...)...))
				if err := os.Symlink(target, f.vars["link"]); err != nil {
					f.t.Fatal(err)
				}
				return []string{"migrate"}
			},
			code:   1,
			stdout: []string{"Summary: converted=2, already-V4=8, failed=1, skipped=0", `ERROR "{link}": symbolic links are not traversed`},
			stderr: []string{`1 input(s) failed to migrate; the first: "{link}": symbolic links are not traversed`},
			allow:  migrated,
		},
		{
			name: "symlinked conversation directory: delete refuses it, touches nothing behind it",
			setup: func(f *fx) []string {
				f.vars["link"] = filepath.Join(f.data, "conversations", hostileID)
				target := filepath.Join(f.root, "elsewhere", hostileID)
				copyTree(f.t, f.vars["basic"], target)
				if err := os.Symlink(target, f.vars["link"]); err != nil {
					f.t.Fatal(err)
				}
				return []string{"delete", hostileID}
			},
			code:   1,
			stderr: []string{`conversation "hostile-0001": {link} is a symbolic link: symbolic links are never followed`},
			allow:  []string{lockRecord},
		},
		{
			name: "conversations directory is a symbolic link to a directory: list refuses it, follows nothing",
			setup: func(f *fx) []string {
				real := filepath.Join(f.root, "elsewhere", "conversations")
				if err := os.MkdirAll(filepath.Dir(real), 0o700); err != nil {
					f.t.Fatal(err)
				}
				if err := os.Rename(filepath.Join(f.data, "conversations"), real); err != nil {
					f.t.Fatal(err)
				}
				f.vars["link"] = filepath.Join(f.data, "conversations")
				if err := os.Symlink(real, f.vars["link"]); err != nil {
					f.t.Fatal(err)
				}
				return []string{"list", "--all"}
			},
			code:   1,
			stderr: []string{"convkit: error: {link}: a symbolic link (not followed), expected the directory of the store's conversations"},
		},
		{
			name: "FIFO named like a session log: reindex reports it without opening it",
			setup: func(f *fx) []string {
				dir := goodConv(f)
				f.vars["fifo"] = f.mkfifo(filepath.Join(dir, "s2.v4.jsonl"))
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{"SKIPPED {fifo}: not a regular file", "indexed=4, skipped=1"},
			stderr: []string{"the first: {fifo}: not a regular file"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "FIFO given to inspect as PATH: refused, no hang",
			setup: func(f *fx) []string {
				p := f.mkfifo(filepath.Join(f.root, "pipe.v4.jsonl"))
				f.vars["fifo"] = p
				return []string{"inspect", p}
			},
			code:   1,
			stderr: []string{"{fifo}: byte 0: not a regular file"},
		},
		{
			name: "FIFO named like a log: backup leaves it out, no hang",
			setup: func(f *fx) []string {
				dir := goodConv(f)
				f.vars["fifo"] = f.mkfifo(filepath.Join(dir, "s2.v4.jsonl"))
				return []string{"backup", "--to", f.path("backups")}
			},
			code:   3,
			stderr: []string{"UNREADABLE {fifo}: not a regular file", "the backup left out 1 file(s) it could not read (UNREADABLE lines)"},
			want:   []string{"+backups", "+backups/convkit-*.tar.zst", "+backups/convkit-*.tar.zst.json"},
			allow:  []string{lockRecord},
		},
		{
			name: "character device (1,5 = zero) named like a log: reindex reports it without reading it",
			setup: func(f *fx) []string {
				dir := goodConv(f)
				f.vars["dev"] = f.mkdev(filepath.Join(dir, "s2.v4.jsonl"), 1, 5)
				return []string{"reindex"}
			},
			code:   3,
			stdout: []string{"SKIPPED {dev}: not a regular file", "indexed=4, skipped=1"},
			stderr: []string{"the first: {dev}: not a regular file"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "character device (1,5 = zero) given to inspect as PATH: refused without reading it",
			setup: func(f *fx) []string {
				f.vars["dev"] = f.mkdev(filepath.Join(f.root, "zero.v4.jsonl"), 1, 5)
				return []string{"inspect", f.vars["dev"]}
			},
			code:   1,
			stderr: []string{"{dev}: byte 0: not a regular file"},
		},
	}
}
