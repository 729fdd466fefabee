package hostile

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

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

// indexedReadOnly builds metadata.db with reindex, then makes the data
// directory read-only for the command.
func (f *fx) indexedReadOnly() {
	f.t.Helper()
	f.mustRun(0, "reindex")
	f.readOnly(f.data)
}

// walPending leaves metadata.db as a snapshot of a running store's disk
// holds it: a committed transaction (a title changed in the index only,
// which shows where a listing came from) still in the write-ahead log,
// and no WAL index (-shm). The sqlite3 tool makes the transaction and
// copies the files while it holds the database open.
func (f *fx) walPending(title string) {
	f.t.Helper()
	if _, err := exec.LookPath("sqlite3"); err != nil {
		f.t.Skip("sqlite3 is not installed (.ci/run installs it)")
	}
	f.mustRun(0, "reindex")
	scratch := f.t.TempDir()
	db := filepath.Join(scratch, "metadata.db")
	copyFile(f.t, filepath.Join(f.data, store.IndexFileName), db)
	idx := filepath.Join(f.data, store.IndexFileName)
	cmd := exec.Command("sqlite3", "-bail", db)
	cmd.Stdin = strings.NewReader(fmt.Sprintf("PRAGMA wal_autocheckpoint=0;\nUPDATE conversations SET title = '%s' WHERE id = '%s';\n.shell cp %s %s && cp %s-wal %s-wal\n",
		title, f.vars["basic.id"], db, idx, db, idx))
	if out, err := cmd.CombinedOutput(); err != nil {
		f.t.Fatalf("sqlite3: %v\n%s", err, out)
	}
	if fi, err := os.Stat(idx + "-wal"); err != nil || fi.Size() == 0 {
		f.t.Fatalf("no pending write-ahead log: %v", err)
	}
}

// archiveHas fails the case unless the archive at p holds an entry named name.
func archiveHas(f *fx, p, name string) {
	var names []string
	for _, e := range readTarZst(f.t, p) {
		names = append(names, e.hdr.Name)
	}
	if !slices.Contains(names, name) {
		f.t.Errorf("the archive holds %v, not %s", names, name)
	}
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
				f.vars["lock"] = filepath.Join(f.data, store.LockFileName)
				return []string{"reindex"}
			},
			code:   1,
			stderr: []string{"convkit: error: lock {lock}: open: {rofs}"},
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
			name: "read-only data directory with an index: list lists from the index",
			setup: func(f *fx) []string {
				f.indexedReadOnly()
				return []string{"list", "--all"}
			},
			code:   0,
			stdout: []string{"{basic.id}", "{v3.id}", "{zstd.id}"},
			check: func(f *fx, r result) {
				if r.stderr != "" {
					f.t.Errorf("stderr %q: want the index, silently", r.stderr)
				}
			},
		},
		{
			name: "read-only data directory with an index: search searches it",
			setup: func(f *fx) []string {
				f.indexedReadOnly()
				return []string{"--json", "search", "the"}
			},
			code:   0,
			stdout: []string{`"hits":[{"conversationId":"`},
		},
		{
			name: "read-only data directory with an index: reindex --check compares it with the logs",
			setup: func(f *fx) []string {
				f.indexedReadOnly()
				return []string{"reindex", "--check"}
			},
			code:   0,
			stdout: []string{"Check: conversations=3, differences=0, skipped=0"},
		},
		{
			name: "read-only data directory with an index: backup archives metadata.db",
			setup: func(f *fx) []string {
				f.indexedReadOnly()
				f.vars["backups"] = filepath.Join(f.root, "backups")
				return []string{"--json", "backup", "--to", f.vars["backups"]}
			},
			code:   0,
			stdout: []string{`"online":true`, `"index":"snapshot"`, `"problems":[]`},
			stderr: []string{"WARNING runtime.lock could not be taken", "{rofs}): backing up online"},
			allow:  []string{"+backups", "+backups/convkit-*.tar.zst", "+backups/convkit-*.tar.zst.json"},
			check: func(f *fx, r result) {
				ms, _ := filepath.Glob(filepath.Join(f.vars["backups"], "convkit-*.tar.zst"))
				if len(ms) != 1 {
					f.t.Fatalf("%d archives", len(ms))
				}
				archiveHas(f, ms[0], "metadata.db")
				if r := f.run("backup", "verify", ms[0]); r.code != 0 || !strings.Contains(r.stdout, "Verify: ") {
					f.t.Errorf("backup verify of the archive: exit %d\n%s%s", r.code, r.stdout, r.stderr)
				}
			},
		},
		{
			name: "read-only data directory: export exports",
			setup: func(f *fx) []string {
				f.indexedReadOnly()
				return []string{"export", f.vars["basic.id"], "--to", f.path("out.tar.zst")}
			},
			code:   0,
			stdout: []string{"EXPORTED {basic.id}", "Summary: conversations=1"},
			allow:  []string{"+out.tar.zst"},
		},
		{
			name: "read-only data directory: inspect reads a log by id",
			setup: func(f *fx) []string {
				f.indexedReadOnly()
				return []string{"inspect", "--validate", f.vars["basic.id"]}
			},
			code:   0,
			stdout: []string{": valid, format v4, "},
		},
		{
			name: "read-only data directory, a write-ahead log pending and no WAL index: list reads the index from a private copy",
			setup: func(f *fx) []string {
				f.walPending("Title from the write-ahead log")
				f.readOnly(f.data)
				return []string{"list", "--all"}
			},
			code:   0,
			stdout: []string{"{basic.id}  Title from the write-ahead log  ", "{v3.id}", "{zstd.id}"},
			check: func(f *fx, r result) {
				if r.stderr != "" {
					f.t.Errorf("stderr %q: want the index, silently", r.stderr)
				}
			},
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
			stderr: []string{`2 input(s) failed to migrate; the first: "{v3first}": open {v3}/.`, ".v4.jsonl.", ".tmp: {rofs}"},
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
			stderr: []string{`2 input(s) failed to migrate; the first: "{v3first}": write {v3}/.`, ".v4.jsonl.", ".tmp: write: {nospace}"},
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
			stderr: []string{"convkit: error: write {backups}/.convkit-", ".tar.zst.", ".tmp: write: {nospace}"},
			want:   []string{lockRecord},
		},
	}
}
