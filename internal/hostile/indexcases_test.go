package hostile

import (
	"bytes"
	"path/filepath"

	"github.com/convkit/convkit/store"
)

// garbageIndex writes a metadata.db of garbage: with sqlite, the SQLite
// magic followed by junk, which gets past a check of the first bytes.
func (f *fx) garbageIndex(sqlite bool) string {
	junk := bytes.Repeat([]byte("this is not a database\x00\xff"), 400)
	if sqlite {
		junk = append([]byte("SQLite format 3\x00"), junk...)
	}
	p := f.write(store.IndexPath(f.data), junk)
	f.vars["db"] = p
	return p
}

func indexCases() []hcase {
	return []hcase{
		{
			name: "metadata.db of garbage: list falls back to the logs and says why",
			setup: func(f *fx) []string {
				f.garbageIndex(false)
				return []string{"list", "--all"}
			},
			code:   0,
			stderr: []string{"convkit: listing from the logs: metadata.db is not usable: {db}: not a convkit index of this schema version: file is not a database"},
			stdout: []string{"{basic.id}", "{v3.id}", "{zstd.id}"},
		},
		{
			name: "metadata.db of garbage behind a SQLite header: search refuses it with a hint",
			setup: func(f *fx) []string {
				f.garbageIndex(true)
				return []string{"search", "files"}
			},
			code:   1,
			stderr: []string{"convkit: error: {db}: not a convkit index of this schema version: file is not a database", "convkit: hint: run convkit reindex to build metadata.db"},
		},
		{
			name: "metadata.db of garbage: reindex --check reports it and writes nothing",
			setup: func(f *fx) []string {
				f.garbageIndex(true)
				return []string{"reindex", "--check"}
			},
			code:   1,
			stdout: []string{"INDEX {db}: not a convkit index of this schema version", "Check: conversations=3, differences=3, skipped=0"},
			stderr: []string{"the index disagrees with the logs (3 difference(s)); the first: INDEX {db}: not a convkit index of this schema version: file is not a database"},
		},
		{
			name: "metadata.db of garbage: reindex rebuilds it",
			setup: func(f *fx) []string {
				f.garbageIndex(true)
				return []string{"reindex"}
			},
			code:   0,
			stdout: []string{"Summary: indexed=3, skipped=0, deletions-finished=0"},
			allow:  []string{lockRecord},
			want:   []string{"~data/metadata.db"},
			check: func(f *fx, r result) {
				// The rebuilt index is current: list answers from it.
				if r2 := f.run("list", "--all"); r2.code != 0 || r2.stderr != "" {
					f.t.Errorf("list after the rebuild: exit %d, stderr %q (want the index, silently)", r2.code, r2.stderr)
				}
			},
		},
		{
			name: "metadata.db of garbage: delete deletes from the logs, leaves the file",
			setup: func(f *fx) []string {
				f.garbageIndex(false)
				return []string{"delete", f.vars["basic.id"]}
			},
			code:   0,
			stdout: []string{"deleted {basic.id}"},
			allow:  []string{lockRecord},
			want:   []string{"-data/conversations/" + filepath.Base(base.basic.Dir), "-data/conversations/" + filepath.Base(base.basic.Dir) + "/*"},
		},
	}
}
