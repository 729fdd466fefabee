package hostile

import (
	"os"
	"path/filepath"
)

// under lists the patterns of a tree that appears or vanishes whole at p
// (op '+' or '-'), down to depth levels below it.
func under(op, p string, depth int) []string {
	out := []string{op + p}
	for glob := p; depth > 0; depth-- {
		glob += "/*"
		out = append(out, op+glob)
	}
	return out
}

func stagingCases() []hcase {
	return []hcase{
		{
			name: "temporary file of a killed export, and one that is a symbolic link: export removes the first, follows nothing",
			setup: func(f *fx) []string {
				out := f.path("out.tar.zst")
				f.vars["stale"] = f.write(filepath.Join(f.root, ".out.tar.zst.0123456789abcdef.tmp"), []byte("half an archive"))
				f.vars["link"] = filepath.Join(f.root, ".out.tar.zst.00000000000000aa.tmp")
				if err := os.Symlink(f.outside(), f.vars["link"]); err != nil {
					f.t.Fatal(err)
				}
				return []string{"export", f.vars["basic.id"], "--to", out}
			},
			code:   0,
			stderr: []string{"REMOVED {stale}: left by an interrupted export"},
			stdout: []string{"EXPORTED {basic.id}", "Summary: conversations=1"},
			allow:  []string{"+out.tar.zst"},
			want:   []string{"-{stale}"},
		},
		{
			name: "staging directory of a killed import, and one whose lock is a symbolic link: import removes the first, follows nothing",
			setup: func(f *fx) []string {
				p := f.exportBasic()
				stale := filepath.Join(f.data, ".conversations.import-0123456789ab.tmp")
				f.write(filepath.Join(stale, ".lock"), nil)
				f.write(filepath.Join(stale, "tree", "MANIFEST.json"), []byte("{}"))
				linked := filepath.Join(f.data, ".conversations.import-00000000aaaa.tmp")
				if err := os.MkdirAll(filepath.Join(linked, "tree"), 0o700); err != nil {
					f.t.Fatal(err)
				}
				if err := os.Symlink(f.outside(), filepath.Join(linked, ".lock")); err != nil {
					f.t.Fatal(err)
				}
				f.vars["stale"] = stale
				return []string{"import", p}
			},
			code:   3,
			stderr: []string{"convkit: removed {stale}, left by an interrupted import"},
			allow:  []string{lockRecord},
			// The store had no metadata.db: the import builds it.
			want: append(under("-", "{stale}", 2), "+data/metadata.db"),
		},
		{
			name: "staging directory beside the target whose lock is a FIFO: restore does not hang, leaves it",
			setup: func(f *fx) []string {
				a := f.backupArchive()
				stage := filepath.Join(f.root, ".restored.restore-0123456789ab.tmp")
				if err := os.MkdirAll(filepath.Join(stage, "tree"), 0o700); err != nil {
					f.t.Fatal(err)
				}
				f.mkfifo(filepath.Join(stage, ".lock"))
				return []string{"restore", a, "--to", f.path("restored")}
			},
			code:   0,
			stdout: []string{" into {root}/restored (3 conversations)"},
			allow:  under("+", "restored", 3),
			want:   []string{"+restored"},
		},
	}
}
