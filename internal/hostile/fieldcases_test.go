package hostile

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/store"
)

// millionEntries is an archive of 1,000,001 empty entries, one over the
// entry limit: 512 MB of tar headers in 3 MB. Made once.
var millionEntries = sync.OnceValue(func() []byte { return emptyEntries(1_000_001) })

// millionNoManifest is an archive of 1,000,000 empty entries, at the
// entry limit, and no manifest. Made once.
var millionNoManifest = sync.OnceValue(func() []byte { return emptyEntries(1_000_000) })

func emptyEntries(n int) []byte {
	var out bytes.Buffer
	zw, err := zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		panic(err)
	}
	tw := tar.NewWriter(zw)
	for i := range n {
		if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("conversations/c/s%07d.v4.jsonl", i), Mode: 0o600, Typeflag: tar.TypeReg}); err != nil {
			panic(err)
		}
	}
	if err := tw.Close(); err != nil {
		panic(err)
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return out.Bytes()
}

// pipedArchive is an archive on stdin that cannot seek (a pipe) and notes
// whether an entry of it was extracted into an import's staging tree in
// dir at any read.
type pipedArchive struct {
	r         io.Reader
	dir       string
	extracted bool
}

func (p *pipedArchive) Read(b []byte) (int, error) {
	if m, _ := filepath.Glob(filepath.Join(p.dir, ".conversations.import-*", "tree", "conversations")); len(m) > 0 {
		p.extracted = true
	}
	return p.r.Read(b)
}

// watchedArchive is an archive file on stdin (it seeks) that notes
// whether an import's staging directory was in dir at any read.
type watchedArchive struct {
	*bytes.Reader
	dir    string
	staged bool
}

func (w *watchedArchive) Read(p []byte) (int, error) {
	ents, _ := os.ReadDir(w.dir)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".conversations.import-") {
			w.staged = true
		}
	}
	return w.Reader.Read(p)
}

// hugeTitle gives the hostile conversation a title of 5 MB, as an
// imported archive or an older convkit may have recorded it (rename
// refuses one now), and returns the title.
func (f *fx) hugeTitle() string {
	f.t.Helper()
	f.hostileMessages("", "hello there")
	title := "Huge " + strings.Repeat("title ", 5<<20/6)
	p := filepath.Join(f.vars["conv"], "metadata.v4.jsonl")
	lines := readLines(f.t, p)
	data, err := json.Marshal(map[string]string{"title": title})
	if err != nil {
		f.t.Fatal(err)
	}
	lines = append(lines, fmt.Sprintf(`{"type":"conversation/renamed","seq":%d,"time":1788280431764,"data":%s}`, len(lines)-1, data))
	if err := os.WriteFile(p, joinLines(lines...), 0o600); err != nil {
		f.t.Fatal(err)
	}
	return title
}

// zeroDevice reads as /dev/zero does, endlessly, counting what was taken.
type zeroDevice struct{ n int64 }

func (z *zeroDevice) Read(p []byte) (int, error) {
	clear(p)
	z.n += int64(len(p))
	return len(p), nil
}

// runningTurn gives the store the hostile conversation with a turn a
// crash left running in session s1, through the runtime's API, and
// records its session log as {log}.
func (f *fx) runningTurn() string {
	f.t.Helper()
	s, err := store.Open(context.Background(), f.data, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "hostile setup"}})
	if err != nil {
		f.t.Fatal(err)
	}
	defer s.Close()
	se, err := s.NewConversation(store.NewConversation{ID: hostileID, Cwd: "/home/dev/src/hostile", SessionID: hostileSID, Agent: "coder", Model: "deepseek-pro"})
	if err != nil {
		f.t.Fatal(err)
	}
	m, err := convlog.NewStoredMessage("u1", "user", convlog.Source{Kind: "user"}, []byte(`[{"type":"text","text":"run it"}]`))
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := se.BeginTurn(m); err != nil {
		f.t.Fatal(err)
	}
	dir, err := s.ConversationPath(hostileID)
	if err != nil {
		f.t.Fatal(err)
	}
	f.vars["conv"] = dir
	f.vars["log"] = filepath.Join(dir, "s1.v4.jsonl")
	return f.vars["log"]
}

// lockIndex builds metadata.db with reindex and starts the sqlite3 tool
// holding it in an exclusive transaction (exclusive locking mode, so that
// readers are shut out too) until the case ends: another process's lock.
func (f *fx) lockIndex() {
	f.t.Helper()
	if _, err := exec.LookPath("sqlite3"); err != nil {
		f.t.Skip("sqlite3 is not installed (.ci/run installs it)")
	}
	f.mustRun(0, "reindex")
	f.vars["db"] = filepath.Join(f.data, store.IndexFileName)
	cmd := exec.Command("sqlite3", "-bail", f.vars["db"])
	in, err := cmd.StdinPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		f.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	io.WriteString(in, "PRAGMA locking_mode=EXCLUSIVE;\nBEGIN EXCLUSIVE;\nSELECT 'held', count(*) FROM conversations;\n")
	held := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "held|") {
				held <- true
				io.Copy(io.Discard, out)
				return
			}
		}
		held <- false
	}()
	select {
	case ok := <-held:
		if !ok {
			f.t.Fatal("sqlite3 did not take the lock")
		}
	case <-time.After(30 * time.Second):
		f.t.Fatal("sqlite3 did not take the lock in 30 s")
	}
}

// noRebuildAdvice: nothing says a locked index is to be rebuilt, or is
// not an index.
func noRebuildAdvice(f *fx, r result) {
	for _, s := range []string{"run convkit reindex\n", "convkit reindex rebuilds", "reindex to build", "not a convkit index"} {
		if strings.Contains(r.stderr+"\n", s) {
			f.t.Errorf("stderr says %q", s)
		}
	}
}

// cutTitle checks that stdout shows the huge title cut to 80 columns
// with an ellipsis, and is small.
func cutTitle(f *fx, r result) {
	if want := "Huge " + strings.Repeat("title ", 12) + "ti…"; !strings.Contains(r.stdout, want) {
		f.t.Errorf("stdout does not show the title cut to %q", want)
	}
	if len(r.stdout) > 4096 {
		f.t.Errorf("stdout is %d bytes", len(r.stdout))
	}
}

// fieldCases are inputs found by trying convkit as an operator and an
// attacker would: huge titles, endless stdin, a million-entry archive,
// session logs gone from under a running turn, a locked index, one
// version in two compressions, a configuration nested without end.
func fieldCases() []hcase {
	return []hcase{
		{
			name: "title of 5 MB: list cuts it to 80 columns",
			setup: func(f *fx) []string {
				f.hugeTitle()
				return []string{"list", "--all"}
			},
			code:  0,
			check: cutTitle,
		},
		{
			name: "title of 5 MB: search cuts it to 80 columns",
			setup: func(f *fx) []string {
				f.hugeTitle()
				if r := f.run("reindex"); r.code != 0 {
					f.t.Fatalf("reindex: exit %d: %s", r.code, r.stderr)
				}
				return []string{"search", "hello"}
			},
			code:  0,
			check: cutTitle,
		},
		{
			name: "title of 5 MB: list --json keeps it whole",
			setup: func(f *fx) []string {
				f.vars["title"] = f.hugeTitle()
				return []string{"--json", "list", "--all"}
			},
			code:   0,
			stdout: []string{`"title":"{title}"`},
		},
		{
			name: "title of 257 characters: rename refuses it, appends nothing",
			setup: func(f *fx) []string {
				return []string{"rename", f.vars["basic.id"], strings.Repeat("é", 257)}
			},
			code:   2,
			stderr: []string{"convkit: error: a title is at most 256 characters (this one is longer at byte 512)"},
		},
		{
			name: "the zero device as stdin: inspect - refuses it at its first byte, copies nothing",
			setup: func(f *fx) []string {
				z := &zeroDevice{}
				f.stdinFrom = z
				f.after = func() {
					if z.n > 64<<10 {
						f.t.Errorf("inspect - read %d bytes of stdin", z.n)
					}
				}
				return []string{"inspect", "-"}
			},
			code:   1,
			stderr: []string{"convkit: error: <stdin>: line 1 column 1, byte 0: header line is not valid JSON: not a JSON object (neither a zstd frame nor a log's header line)"},
		},
		{
			name: "archive of a million empty entries: import --dry-run refuses it at the limit, stages nothing",
			setup: func(f *fx) []string {
				w := &watchedArchive{Reader: bytes.NewReader(millionEntries()), dir: f.data}
				f.stdinFrom = w
				f.timeout = 3 * time.Minute // 10 s on an idle machine
				f.after = func() {
					if w.staged {
						f.t.Error("the dry run made a staging directory")
					}
				}
				return []string{"import", "--dry-run", "-"}
			},
			code:   1,
			stderr: []string{`convkit: error: -: entry 1000001 "conversations/c/s1000000.v4.jsonl" (tar byte 512000000): more than 1000000 entries; nothing was imported`},
		},
		{
			name: "archive of a million empty entries from a pipe: import --dry-run refuses it at the limit, extracts nothing",
			setup: func(f *fx) []string {
				p := &pipedArchive{r: bytes.NewReader(millionEntries()), dir: f.data}
				f.stdinFrom = p
				f.timeout = 3 * time.Minute
				f.after = func() {
					if p.extracted {
						f.t.Error("the dry run extracted entries")
					}
				}
				return []string{"import", "--dry-run", "-"}
			},
			code:   1,
			stderr: []string{`convkit: error: -: entry 1000001 "conversations/c/s1000000.v4.jsonl" (tar byte 512000000): more than 1000000 entries; nothing was imported`},
		},
		{
			name: "archive of a million empty entries and no manifest: import refuses it, stages nothing",
			setup: func(f *fx) []string {
				w := &watchedArchive{Reader: bytes.NewReader(millionNoManifest()), dir: f.data}
				f.stdinFrom = w
				f.timeout = 3 * time.Minute
				f.after = func() {
					if w.staged {
						f.t.Error("the import made a staging directory")
					}
				}
				return []string{"import", "-"}
			},
			code:   1,
			stderr: []string{"convkit: error: -: no MANIFEST.json as the last entry: an incomplete archive, or not a convkit export; nothing was imported"},
		},
		{
			name: "the first bytes of a zstd frame after the last: archive cuts them and appends its event once",
			setup: func(f *fx) []string {
				p := filepath.Join(f.vars["zstd"], "metadata.v4.jsonl.zst")
				f.vars["log"] = p
				before, _ := zstdEvents(f, p)
				f.vars["events"] = fmt.Sprint(before)
				lf, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					f.t.Fatal(err)
				}
				lf.Write([]byte{0x28, 0xb5, 0x2f, 0xfd}) // a frame that never finished
				lf.Close()
				return []string{"archive", f.vars["zstd.id"]}
			},
			code:   0,
			stdout: []string{"archived {zstd.id}"},
			allow:  []string{lockRecord, "~{zstd}/metadata.v4.jsonl.zst", "~data/metadata.db"},
			check: func(f *fx, r result) {
				before, _ := strconv.Atoi(f.vars["events"])
				if n, torn := zstdEvents(f, f.vars["log"]); n != before+1 || torn {
					f.t.Errorf("the log reads %d events (torn tail %v) after the archive, want %d", n, torn, before+1)
				}
			},
		},
		{
			name: "session log of a running turn is missing: repair leaves the turn open",
			setup: func(f *fx) []string {
				if err := os.Remove(f.runningTurn()); err != nil {
					f.t.Fatal(err)
				}
				return []string{"repair"}
			},
			code:   3,
			stdout: []string{`SKIPPED {conv}: session "s1" has a running turn (turn 1) and no session log (s1[.vN].jsonl[.zst]): the turn is left open`},
			stderr: []string{"convkit: error: repair skipped 1 item(s)"},
			allow:  []string{lockRecord},
		},
		{
			name: "session log of a running turn is a symbolic link: repair leaves the turn open",
			setup: func(f *fx) []string {
				log := f.runningTurn()
				if err := os.Rename(log, f.path("s1.v4.jsonl")); err != nil {
					f.t.Fatal(err)
				}
				if err := os.Symlink(f.path("s1.v4.jsonl"), log); err != nil {
					f.t.Fatal(err)
				}
				return []string{"repair"}
			},
			code:   3,
			stdout: []string{`SKIPPED {log}: session "s1" has a running turn (turn 1) and its log cannot be read (symbolic links are not followed): the turn is left open`},
			stderr: []string{"convkit: error: repair skipped 1 item(s)"},
			allow:  []string{lockRecord},
		},
		{
			name: "session log of a running turn is a FIFO: repair leaves the turn open, no hang",
			setup: func(f *fx) []string {
				log := f.runningTurn()
				if err := os.Remove(log); err != nil {
					f.t.Fatal(err)
				}
				if err := syscall.Mkfifo(log, 0o600); err != nil {
					f.t.Fatal(err)
				}
				return []string{"repair"}
			},
			code:   3,
			stdout: []string{`SKIPPED {log}: session "s1" has a running turn (turn 1) and its log cannot be read (not a regular file): the turn is left open`},
			stderr: []string{"convkit: error: repair skipped 1 item(s)"},
			allow:  []string{lockRecord},
		},
		{
			name: "metadata.db locked by another process (sqlite3): list says so and lists from the logs",
			setup: func(f *fx) []string {
				f.lockIndex()
				return []string{"list", "--all"}
			},
			code:   0,
			stderr: []string{"convkit: listing from the logs: metadata.db is not usable: {db}: locked by another process (database is locked (5) (SQLITE_BUSY))"},
			stdout: []string{"{basic.id}", "{zstd.id}"},
			check:  noRebuildAdvice,
		},
		{
			name: "metadata.db locked by another process (sqlite3): search refuses it naming the lock",
			setup: func(f *fx) []string {
				f.lockIndex()
				return []string{"search", "files"}
			},
			code:   1,
			stderr: []string{"convkit: error: {db}: locked by another process (database is locked (5) (SQLITE_BUSY))", "convkit: hint: search again once the other process is done"},
			check:  noRebuildAdvice,
		},
		{
			name: "metadata.db locked by another process (sqlite3): rename renames, the index not updated",
			setup: func(f *fx) []string {
				f.lockIndex()
				return []string{"rename", f.vars["basic.id"], "Renamed while locked"}
			},
			code:   0,
			stdout: []string{`renamed {basic.id}: "Renamed while locked"`},
			stderr: []string{"convkit: warning: metadata.db was not updated ({db}: locked by another process (database is locked (5) (SQLITE_BUSY))): list reads the logs until it is brought up to date (convkit reindex --incremental once the other process is done)"},
			allow:  []string{lockRecord, "~{basic}/metadata.v4.jsonl"},
			check:  noRebuildAdvice,
		},
		{
			name: "session directory holding one version plain and compressed: inspect warns as the walk does, reads the plain one",
			bare: true, noDataDir: true,
			setup: func(f *fx) []string {
				root := f.sessionsRoot()
				dir := filepath.Join(root, "--p--", "good")
				f.vars["dir"] = dir
				enc, err := zstd.NewWriter(nil)
				if err != nil {
					f.t.Fatal(err)
				}
				defer enc.Close()
				f.write(filepath.Join(dir, "session.v3.jsonl.zstd"), enc.EncodeAll(dshSession("good", "/p"), nil))
				return []string{"inspect", "--validate", dir}
			},
			code:   0,
			stdout: []string{"{dir}/session.v3.jsonl: valid, format v3"},
			stderr: []string{"convkit: warning: {dir}/session.v3.jsonl.zstd: both compressed and plain generations of session v3; session.v3.jsonl is read"},
		},
		{
			name: "session log held plain and compressed in a store: inspect by id warns as the walk does, reads the plain one",
			setup: func(f *fx) []string {
				f.session("s1.v4.jsonl", plainSession(hostileSID))
				f.vars["dir"] = filepath.Dir(f.vars["log"])
				f.write(filepath.Join(f.vars["dir"], "s1.v4.jsonl.zst"), zjoin(zlog(f.t, hostileSID, zbatches()...)))
				return []string{"inspect", "--validate", hostileID, hostileSID}
			},
			code:   0,
			stdout: []string{"{dir}/s1.v4.jsonl: valid, format v4"},
			stderr: []string{"convkit: warning: {dir}/s1.v4.jsonl.zst: both compressed and plain generations of s1 v4; s1.v4.jsonl is read"},
		},
		{
			name: "config.toml of 20000 dotted key parts: list warns naming its line, lists",
			setup: func(f *fx) []string {
				f.vars["config"] = f.write(filepath.Join(f.data, "config.toml"), []byte("# runtime\n"+strings.Repeat("a.", 19999)+"a = 1\n"))
				return []string{"list", "--all"}
			},
			code:   0,
			stderr: []string{"convkit: warning: runtime configuration: {config}: line 2: nested deeper than 32 levels"},
			stdout: []string{"{basic.id}", "{zstd.id}"},
		},
		{
			name: "config.toml of 20000 nested inline tables: reindex refuses it naming its line",
			setup: func(f *fx) []string {
				f.vars["config"] = f.write(filepath.Join(f.data, "config.toml"), []byte("a = "+strings.Repeat("{b = ", 20000)+"1"+strings.Repeat("}", 20000)+"\n"))
				return []string{"reindex"}
			},
			code:   1,
			stderr: []string{"convkit: error: runtime configuration: {config}: line 1: nested deeper than 32 levels"},
			allow:  []string{lockRecord},
		},
	}
}

// zstdEvents reads the zstd log at p strictly: its events, and whether
// it ends in a torn tail. A problem fails the case.
func zstdEvents(f *fx, p string) (int, bool) {
	f.t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		f.t.Fatal(err)
	}
	z := convlog.Zstd
	lr, err := convlog.NewReader(bytes.NewReader(data), int64(len(data)), p, convlog.ReaderOptions{Compression: &z, Version: 4})
	if err != nil {
		f.t.Fatal(err)
	}
	defer lr.Close()
	n := 0
	for _, err := range lr.Events() {
		if err != nil {
			f.t.Fatalf("%s: %v", p, err)
		}
		n++
	}
	return n, lr.Stats().TornTail
}
