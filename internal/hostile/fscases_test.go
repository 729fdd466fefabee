package hostile

import (
	"os"
	"path/filepath"

	"github.com/convkit/convkit/store"
)

// fullDisk makes dir's file system full for the command: a small tmpfs
// mounted at dir and filled to its last byte (populate runs first, to put
// the store on it), or, when mount(2) is not permitted, the command runs
// with RLIMIT_FSIZE limit. {nospace} is the error either gives. It says
// which ran with t.Logf.
func (f *fx) fullDisk(dir string, size, limit int64, populate func()) {
	f.t.Helper()
	if err := mountTmpfs(f.t, dir, size); err != nil {
		f.t.Logf("full disk: %v; convkit runs in a child process under RLIMIT_FSIZE=%d instead", err, limit)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			f.t.Fatal(err)
		}
		populate()
		f.limit = limit
		// EFBIG; SQLite reports it as an I/O error.
		f.vars["nospace"], f.vars["dbfull"] = "file too large", "disk I/O error"
		return
	}
	populate()
	fill(f.t, dir)
	f.t.Logf("full disk: a %d-byte tmpfs at %s, filled to the last byte", size, dir)
	f.vars["nospace"], f.vars["dbfull"] = "no space left on device", "database or disk is full"
}

func fsCases() []hcase {
	v3logs := func(f *fx) {
		for _, p := range logsOf(f.t, f.vars["v3"]) {
			if filepath.Ext(p) == ".jsonl" && filepath.Ext(p[:len(p)-6]) == ".v3" {
				f.vars["v3log"] = p // the last by name: migrate names the first failure by path
				if f.vars["v3first"] == "" {
					f.vars["v3first"] = p
				}
			}
		}
	}
	return []hcase{
		{
			name: "read-only data directory: reindex fails at runtime.lock, writes nothing",
			setup: func(f *fx) []string {
				f.readOnly(f.data)
				f.vars["lock"] = store.LockPath(f.data)
				return []string{"reindex"}
			},
			code:   1,
			stderr: []string{"convkit: error: lock {lock}: open {lock}: {rofs}"},
		},
		{
			name: "read-only data directory: list still lists",
			setup: func(f *fx) []string {
				f.readOnly(f.data)
				return []string{"list", "--all"}
			},
			code:   0,
			stderr: []string{"convkit: listing from the logs: metadata.db does not exist"},
			stdout: []string{"{basic.id}", "{v3.id}", "{zstd.id}"},
		},
		{
			name: "read-only conversations directory: migrate fails each conversion, names the file",
			setup: func(f *fx) []string {
				v3logs(f)
				f.readOnly(store.ConversationsDir(f.data))
				return []string{"migrate"}
			},
			code:   1,
			stdout: []string{"Summary: converted=0, already-V4=8, failed=2, skipped=0"},
			stderr: []string{`2 log(s) failed to migrate; the first: "{v3first}": open {v3}/.`, ".v4.jsonl.", ".tmp: {rofs}"},
			allow:  migrateReport, want: []string{lockRecord},
		},
		{
			name: "read-only conversations directory: reindex writes only metadata.db",
			setup: func(f *fx) []string {
				f.readOnly(store.ConversationsDir(f.data))
				return []string{"reindex"}
			},
			code:   0,
			stdout: []string{"Summary: indexed=3, skipped=0, deletions-finished=0"},
			allow:  reindexed, want: []string{newIndex},
		},
		{
			name: "full disk: migrate fails each conversion, leaves no temporary file",
			bare: true,
			setup: func(f *fx) []string {
				f.fullDisk(f.data, 2<<20, 4<<10, func() { f.withBase() })
				v3logs(f)
				return []string{"migrate"}
			},
			code:   1,
			stdout: []string{"Summary: converted=0, already-V4=8, failed=2, skipped=0"},
			stderr: []string{`2 log(s) failed to migrate; the first: "{v3first}": write {v3}/.`, ".v4.jsonl.", ".tmp: {nospace}"},
			allow:  migrateReport, want: []string{lockRecord},
		},
		{
			name: "full disk: reindex fails, leaves no temporary database",
			bare: true,
			setup: func(f *fx) []string {
				f.fullDisk(f.data, 2<<20, 4<<10, func() { f.withBase() })
				return []string{"reindex"}
			},
			code:   1,
			stderr: []string{"convkit: error: {data}/.metadata.db.", ".tmp: creating the schema: {dbfull}"},
			want:   []string{lockRecord},
		},
		{
			name: "full disk: backup fails, leaves no temporary archive",
			setup: func(f *fx) []string {
				dir := filepath.Join(f.root, "backups")
				f.vars["backups"] = dir
				f.fullDisk(dir, 1<<20, 4<<10, func() {})
				return []string{"backup", "--to", dir}
			},
			code:   1,
			stderr: []string{"convkit: error: write {backups}/.convkit-", ".tar.zst.", ".tmp: {nospace}"},
			want:   []string{lockRecord},
		},
	}
}
