package hostile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/internal/cli"
	"github.com/convkit/convkit/store"
)

// base is the generated store every case starts from, made once: a few
// conversations of the fixtures generator, all of them readable.
var base struct {
	data  string
	basic *fixtures.Conversation // format v4, plain, with subagents
	v3    *fixtures.Conversation // format v3 session logs, plain: migrate converts it
	zstd  *fixtures.Conversation // format v4, compressed (compacted, no dependency)
}

func TestMain(m *testing.M) {
	if os.Getenv(limitedEnv) != "" {
		os.Exit(limitedMain())
	}
	if dir := os.Getenv(holderEnv); dir != "" {
		os.Exit(holderMain(dir))
	}
	dir, err := os.MkdirTemp("", "convkit-hostile-base-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		base.data = filepath.Join(dir, "data")
		rep, err := fixtures.Generate(base.data, fixtures.Options{Seed: 7, Conversations: fixtures.SpecialCases})
		if err != nil {
			fmt.Fprintln(os.Stderr, "generate the base store:", err)
			return 1
		}
		base.basic = rep.Find(fixtures.CaseBasic)
		base.zstd = rep.Find(fixtures.CaseCompaction)
		for i := range rep.Conversations {
			c := &rep.Conversations[i]
			if c.Version == 3 && len(c.Logs) > 1 && !c.Logs[1].Compressed && base.v3 == nil {
				base.v3 = c
			}
		}
		if base.basic == nil || base.zstd == nil || base.v3 == nil {
			fmt.Fprintln(os.Stderr, "the generated store lacks a case the catalogue needs")
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// fx is one case's world: a temporary root holding the data directory
// (data/), the directory $TMPDIR points at (tmp/) and whatever else the case
// makes (archives, backups). The whole root is snapshotted.
type fx struct {
	t    *testing.T
	root string
	data string
	tmp  string
	// vars are substituted for {name} in the expected substrings.
	vars map[string]string
	// unblock, when set, is called if the command does not return in time
	// (it opens the other end of a FIFO, say), so that a hang fails the case
	// instead of the whole run.
	unblock func()
	// env is the injected environment (besides TMPDIR, which is the
	// process's: the report folders are made with os.TempDir).
	env map[string]string
	// limit, when set, runs the command in a child process that cannot
	// write a file past limit bytes (the full-disk fallback).
	limit int64
	// stdin is the command's standard input; stdinFrom, when set, is
	// read instead (an endless stream, say).
	stdin     string
	stdinFrom io.Reader
	// after, when set, runs once the command has returned, before the
	// checks (a case that acts while the command runs waits for itself).
	after func()
	// timeout, when set, replaces cmdTimeout (a case that reads a million
	// entries on a loaded machine).
	timeout time.Duration
}

// newFx makes an empty world. The data directory does not exist yet.
func newFx(t *testing.T) *fx {
	t.Helper()
	root := t.TempDir()
	f := &fx{t: t, root: root, data: filepath.Join(root, "data"), tmp: filepath.Join(root, "tmp"),
		vars: map[string]string{}, env: map[string]string{}}
	if err := os.Mkdir(f.tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", f.tmp)
	f.vars["data"] = f.data
	f.vars["root"] = f.root
	f.vars["tmp"] = f.tmp
	return f
}

// withBase copies the base store into the data directory: the basic, v3 and
// compressed conversations and runtime.lock (with its last holder's record,
// so a writing command changes only its content). It records each
// conversation's directory as {basic}, {v3}, {zstd}.
func (f *fx) withBase() *fx {
	f.t.Helper()
	for name, c := range map[string]*fixtures.Conversation{"basic": base.basic, "v3": base.v3, "zstd": base.zstd} {
		dst := filepath.Join(store.ConversationsDir(f.data), filepath.Base(c.Dir))
		copyTree(f.t, c.Dir, dst)
		f.vars[name] = dst
		f.vars[name+".id"] = c.ID
	}
	copyFile(f.t, filepath.Join(base.data, store.LockFileName), filepath.Join(f.data, store.LockFileName))
	return f
}

// path joins rel (slash-separated, {vars} expanded) to the root.
func (f *fx) path(rel string) string { return filepath.Join(f.root, filepath.FromSlash(f.expand(rel))) }

func (f *fx) expand(s string) string {
	for k, v := range f.vars {
		s = strings.ReplaceAll(s, "{"+k+"}", v)
	}
	return s
}

// write writes a file (0600), making its directories (0700).
func (f *fx) write(p string, data []byte) string {
	f.t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// addConv writes a conversation log with one root session, sid,
// registered but without a log (the case writes it), and returns the
// conversation's directory. It is recorded as {conv}; its session log
// path, once the case names it, usually as {log}.
func (f *fx) addConv(id, sid string) string {
	f.t.Helper()
	s, err := store.Open(context.Background(), f.data, store.OpenOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	defer s.Close()
	dir, err := s.ConversationPath(id)
	if err != nil {
		f.t.Fatal(err)
	}
	q := func(v string) []byte {
		b, _ := json.Marshal(v)
		return b
	}
	f.write(filepath.Join(dir, "metadata.v4.jsonl"), fmt.Appendf(nil, `{"type":"conversation","version":4,"id":%s,"createdAt":1788269998900}
{"type":"conversation/created","seq":0,"time":1788269998900,"data":{"cwd":"/home/dev/src/hostile","agents":["coder"],"models":["deepseek-pro"]}}
{"type":"session/started","seq":1,"time":1788269998901,"data":{"sessionId":%s,"agent":"coder","model":"deepseek-pro"}}
`, q(id), q(sid)))
	f.vars["conv"] = dir
	return dir
}

// result is what one run of the command line gave.
type result struct {
	code           int
	stdout, stderr string
}

// cmdTimeout bounds one command: a hang (a FIFO opened for reading, a
// decompression bomb expanded) fails the case.
const cmdTimeout = 30 * time.Second

// run runs convkit --data-dir DATA args... in-process.
func (f *fx) run(args ...string) result {
	f.t.Helper()
	return f.runFull(append([]string{"--data-dir", f.data}, args...)...)
}

// runFull runs convkit args... in-process, the data directory coming from
// the arguments or from f.env.
func (f *fx) runFull(args ...string) result {
	f.t.Helper()
	full := append([]string{"convkit"}, args...)
	var out, errOut bytes.Buffer
	getenv := func(k string) string { return f.env[k] }
	done := make(chan int, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				fmt.Fprintf(&errOut, "PANIC: %v", p)
				done <- -1
			}
		}()
		var stdin io.Reader = strings.NewReader(f.stdin)
		if f.stdinFrom != nil {
			stdin = f.stdinFrom
		}
		done <- cli.Main(context.Background(), full, stdin, &out, &errOut, getenv)
	}()
	limit := cmdTimeout
	if f.timeout > 0 {
		limit = f.timeout
	}
	select {
	case code := <-done:
		return result{code: code, stdout: out.String(), stderr: errOut.String()}
	case <-time.After(limit):
		if f.unblock != nil {
			f.unblock()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
			}
		}
		f.t.Fatalf("convkit %s did not return within %v: it hangs", strings.Join(args, " "), limit)
		return result{}
	}
}

// entry is one file system entry in a snapshot.
type entry struct {
	kind string // dir, file, symlink, fifo, socket, device
	mode fs.FileMode
	size int64
	hash string // files: SHA-256; symlinks: the target; devices: the device number
	// owner is uid:gid. mtime is the modification time of everything but
	// directories (whose mtime a temporary entry, created and removed,
	// changes: what is left is what counts), so that a file rewritten with
	// the same bytes counts as changed.
	owner string
	mtime int64
}

func (e entry) String() string {
	return fmt.Sprintf("%s %v %s %d %s mtime=%d", e.kind, e.mode, e.owner, e.size, e.hash, e.mtime)
}

// snapshot describes every entry under root by its own type (links are not
// followed, FIFOs and devices are never opened), keyed by slash path.
func snapshot(t testing.TB, root string) map[string]entry {
	t.Helper()
	snap := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		e := entry{mode: fi.Mode()}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			e.owner = fmt.Sprintf("%d:%d", st.Uid, st.Gid)
		}
		if !fi.IsDir() {
			e.mtime = fi.ModTime().UnixNano()
		}
		switch m := fi.Mode(); {
		case m.IsDir():
			e.kind = "dir"
		case m.IsRegular():
			e.kind, e.size = "file", fi.Size()
			e.hash = hashFile(t, p)
		case m&fs.ModeSymlink != 0:
			e.kind = "symlink"
			e.hash, _ = os.Readlink(p)
		case m&fs.ModeNamedPipe != 0:
			e.kind = "fifo"
		case m&fs.ModeSocket != 0:
			e.kind = "socket"
		case m&fs.ModeDevice != 0:
			e.kind = "device"
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				e.hash = fmt.Sprint(st.Rdev)
			}
		default:
			e.kind = "other"
		}
		snap[filepath.ToSlash(rel)] = e
		return nil
	})
	if err != nil {
		t.Fatalf("snapshot %s: %v", root, err)
	}
	return snap
}

func hashFile(t testing.TB, p string) string {
	fh, err := os.Open(p)
	if err != nil {
		// Unreadable (a mode 000 file as a non-root user): its mode and size
		// still count.
		return "unreadable"
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		t.Fatalf("hash %s: %v", p, err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// change is one difference between two snapshots: '+' appeared, '-'
// vanished, '~' changed.
type change struct {
	op   byte
	path string
	what string
}

func diff(before, after map[string]entry) []change {
	var out []change
	for p, a := range after {
		b, ok := before[p]
		switch {
		case !ok:
			out = append(out, change{'+', p, a.String()})
		case a != b:
			out = append(out, change{'~', p, b.String() + " -> " + a.String()})
		}
	}
	for p, b := range before {
		if _, ok := after[p]; !ok {
			out = append(out, change{'-', p, b.String()})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// allowed reports whether a change matches one of the patterns: "+GLOB",
// "-GLOB" or "~GLOB" (path.Match against the path under the root, {vars}
// expanded relative to the root).
func (f *fx) allowed(c change, patterns []string) (string, bool) {
	for _, p := range patterns {
		if p[0] != c.op {
			continue
		}
		glob := f.relPattern(p[1:])
		if ok, _ := path.Match(glob, c.path); ok {
			return p, true
		}
	}
	return "", false
}

// relPattern expands {vars} in a pattern and makes it relative to the root.
func (f *fx) relPattern(p string) string {
	p = f.expand(p)
	if rel, ok := strings.CutPrefix(p, f.root+string(filepath.Separator)); ok {
		p = rel
	}
	return filepath.ToSlash(p)
}

// errorText are the marks of error output; stdout must carry none of them.
var errorText = []string{"convkit: error", "convkit: hint", "convkit: warning", "exit_error", "panic:", "PANIC", "goroutine "}

func copyTree(t testing.TB, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o700)
		}
		return copyFileErr(p, out)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	if err := copyFileErr(src, dst); err != nil {
		t.Fatal(err)
	}
}

func copyFileErr(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o600)
}

// logsOf lists the regular log files of a conversation directory, sorted.
func logsOf(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() && strings.Contains(e.Name(), ".jsonl") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	slices.Sort(out)
	return out
}
