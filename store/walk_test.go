package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/durable"
)

// mkfiles creates the named files (relative to root, "/"-separated), with
// parent directories.
func mkfiles(t *testing.T, root string, names ...string) {
	t.Helper()
	for _, n := range names {
		p := filepath.Join(root, filepath.FromSlash(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// summarize renders a tree compactly, paths relative to root.
func summarize(t *testing.T, root string, tree *Tree) (convs, problems []string) {
	t.Helper()
	rel := func(p string) string {
		r, err := filepath.Rel(root, p)
		if err != nil {
			t.Fatal(err)
		}
		return filepath.ToSlash(r)
	}
	for _, c := range tree.Conversations {
		if c.Path != filepath.Join(root, "conversations", c.Name) {
			t.Errorf("conversation %q has path %q", c.Name, c.Path)
		}
		s := c.ID + " @" + c.Name + ":"
		for _, l := range c.Logs {
			var gens []string
			for _, g := range l.Generations {
				gens = append(gens, g.String())
			}
			if l.Current != l.Generations[0] || l.Path != filepath.Join(c.Path, l.Current.String()) {
				t.Errorf("log %q: Current %v, Path %q", l.Base, l.Current, l.Path)
			}
			if l.Conversation != c.ID {
				t.Errorf("log %q: Conversation %q, in %q", l.Base, l.Conversation, c.ID)
			}
			kind := "s=" + l.ID
			if l.IsConversationLog {
				kind = "conv"
				if l.ID != "" || l.Base != ConversationLogBase {
					t.Errorf("conversation log %+v", l)
				}
			}
			s += " [" + kind + " " + strings.Join(gens, ",") + "]"
		}
		convs = append(convs, s)
	}
	for _, p := range tree.Problems {
		s := rel(p.Path) + ": " + p.Reason
		if p.Kind == ItemWarning {
			s += " (listed)"
		}
		problems = append(problems, s)
	}
	return convs, problems
}

func TestWalk(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	cdir := filepath.Join(data, "conversations")
	outside := filepath.Join(root, "outside")
	mkfiles(t, data,
		"conversations/c1/metadata.jsonl",
		"conversations/c1/metadata.v4.jsonl.zst",
		"conversations/c1/s1.v3.jsonl.zstd",
		"conversations/c1/s1.v4.jsonl",
		"conversations/c1/~006Detadata.v2.jsonl", // session "metadata"
		"conversations/c1/s~002E1.jsonl",         // session "s.1"
		"conversations/c1/dup.v4.jsonl.zst",
		"conversations/c1/dup.v4.jsonl",
		"conversations/c1/dup.v2.jsonl",
		"conversations/c1/z.v4.jsonl.zst",
		"conversations/c1/z.v4.jsonl.zstd",
		"conversations/c1/session.lock",
		"conversations/c1/notes.txt",
		"conversations/c1/.s1.v5.jsonl.0123456789abcdef.tmp",
		"conversations/c1/a.v0.jsonl",
		"conversations/c1/a.v01.jsonl.zst",
		"conversations/c1/a.b.jsonl",
		"conversations/c1/a~002e.jsonl",
		"conversations/c1/attachments/x.jsonl", // subdirectories are not walked
		"conversations/tool~002Fsession~007E~540D/metadata.v4.jsonl",
		"conversations/bad~002f/metadata.v4.jsonl",
		"conversations/flat.jsonl",
		"conversations/flat2.v4.jsonl.zst",
		"conversations/README",
	)
	mkfiles(t, outside, "metadata.v4.jsonl", "hidden.v9.jsonl", "target.v7.jsonl")
	if err := os.Mkdir(filepath.Join(cdir, "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		filepath.Join(cdir, "linked"):                  outside,
		filepath.Join(cdir, "c1", "s2.v4.jsonl"):       filepath.Join(outside, "target.v7.jsonl"),
		filepath.Join(cdir, "c1", "dangling.v1.jsonl"): filepath.Join(outside, "nothing"),
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{filepath.Join(cdir, "pipe"), filepath.Join(cdir, "c1", "p.v4.jsonl"), filepath.Join(cdir, "c1", "fifo")} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	tree, err := at(data).Walk()
	if err != nil {
		t.Fatal(err)
	}
	convs, problems := summarize(t, data, tree)
	wantConvs := []string{
		"c1 @c1: [conv metadata.v4.jsonl.zst,metadata.jsonl]" +
			" [s=dup dup.v4.jsonl,dup.v4.jsonl.zst,dup.v2.jsonl]" +
			" [s=s1 s1.v4.jsonl,s1.v3.jsonl.zstd]" +
			" [s=s.1 s~002E1.jsonl]" +
			" [s=z z.v4.jsonl.zst,z.v4.jsonl.zstd]" +
			" [s=metadata ~006Detadata.v2.jsonl]",
		"empty @empty:",
		"tool/session~名 @tool~002Fsession~007E~540D: [conv metadata.v4.jsonl]",
	}
	wantProblems := []string{
		"conversations/README: unexpected file",
		`conversations/bad~002f: noncanonical directory name "bad~002f"`,
		"conversations/c1/a.b.jsonl: noncanonical log file name",
		"conversations/c1/a.v0.jsonl: noncanonical log file name",
		"conversations/c1/a.v01.jsonl.zst: noncanonical log file name",
		`conversations/c1/a~002e.jsonl: noncanonical log file base "a~002e"`,
		"conversations/c1/dangling.v1.jsonl: symbolic links are not followed",
		"conversations/c1/fifo: not a regular file",
		"conversations/c1/p.v4.jsonl: not a regular file",
		"conversations/c1/s2.v4.jsonl: symbolic links are not followed",
		"conversations/c1/dup.v4.jsonl.zst: both compressed and plain generations of dup v4 (listed)",
		"conversations/c1/z.v4.jsonl.zstd: both .zst and .zstd generations of z v4 (listed)",
		"conversations/flat.jsonl: log file outside a conversation directory; expected conversations/<conversation>/<log>",
		"conversations/flat2.v4.jsonl.zst: log file outside a conversation directory; expected conversations/<conversation>/<log>",
		"conversations/linked: symbolic links are not followed",
		"conversations/pipe: not a regular file",
	}
	if !reflect.DeepEqual(convs, wantConvs) {
		t.Errorf("conversations:\n%s\nwant:\n%s", strings.Join(convs, "\n"), strings.Join(wantConvs, "\n"))
	}
	if !reflect.DeepEqual(problems, wantProblems) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(wantProblems, "\n"))
	}
	for _, c := range tree.Conversations {
		for _, l := range c.Logs {
			if strings.HasPrefix(l.Path, outside) || l.Base == "hidden" || l.Base == "target" {
				t.Errorf("Walk followed a symbolic link to %s", l.Path)
			}
		}
	}
	c1 := tree.Conversations[0]
	if cur := c1.Logs[0].Current; cur != (convlog.Name{Base: "metadata", Version: 4, Compression: convlog.Zstd, Suffix: ".zst"}) {
		t.Errorf("conversation log Current = %+v", cur)
	}
	// Listing the directories in parallel gives the same tree, in the
	// same order.
	for _, jobs := range []int{2, 3, 16} {
		if par, err := at(data).WalkJobs(jobs); err != nil || !reflect.DeepEqual(par, tree) {
			t.Errorf("WalkJobs(%d) = %+v, %v\nwant %+v", jobs, par, err, tree)
		}
	}
}

func TestWalkRoot(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, data string)
		// wantFound, when set, is the refusal's Found: the store is
		// broken, not empty.
		wantFound string
	}{
		{"missing data dir", func(*testing.T, string) {}, ""},
		{"missing conversations dir", func(t *testing.T, data string) {
			mkfiles(t, data, "runtime.lock")
		}, ""},
		{"empty conversations dir", func(t *testing.T, data string) {
			if err := os.MkdirAll(filepath.Join(data, "conversations"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, ""},
		{"conversations is a symbolic link", func(t *testing.T, data string) {
			mkfiles(t, data, "elsewhere/c/metadata.v4.jsonl")
			if err := os.Symlink("elsewhere", filepath.Join(data, "conversations")); err != nil {
				t.Fatal(err)
			}
		}, "a symbolic link (not followed)"},
		{"conversations is a file", func(t *testing.T, data string) {
			mkfiles(t, data, "conversations")
		}, "a regular file"},
		{"conversations is a FIFO", func(t *testing.T, data string) {
			if err := os.MkdirAll(data, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(filepath.Join(data, "conversations"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, "a FIFO"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			tt.setup(t, data)
			s := at(data)
			tree, err := s.Walk()
			_, lerr := s.FindLog("c", "")
			if tt.wantFound == "" {
				if err != nil {
					t.Fatal(err)
				}
				convs, problems := summarize(t, data, tree)
				if len(convs) != 0 || len(problems) != 0 {
					t.Fatalf("conversations %q, problems %q; want none", convs, problems)
				}
				return
			}
			want := filepath.Join(data, "conversations") + ": " + tt.wantFound + ", expected the directory of the store's conversations"
			for _, e := range []error{err, lerr} {
				if !errors.Is(e, ErrConversationsDir) || !strings.HasPrefix(e.Error(), want) {
					t.Errorf("Walk, FindLog: %v; want an error wrapping ErrConversationsDir, starting %s", e, want)
				}
			}
			if tree != nil {
				t.Errorf("a broken store was listed: tree %+v", tree)
			}
		})
	}
}

func TestWalkUnreadableDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		// Permissions do not restrict root (CI runs as root): the test
		// runs again in a child process under an unprivileged uid.
		runAsNobody(t, "TestWalkUnreadableDirectory")
		return
	}
	data := t.TempDir()
	mkfiles(t, data, "conversations/locked/metadata.v4.jsonl", "conversations/ok/metadata.v4.jsonl")
	locked := filepath.Join(data, "conversations", "locked")
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(locked, 0o700)
	tree, err := at(data).Walk()
	if err != nil {
		t.Fatal(err)
	}
	convs, problems := summarize(t, data, tree)
	if want := []string{"ok @ok: [conv metadata.v4.jsonl]"}; !reflect.DeepEqual(convs, want) {
		t.Errorf("conversations %q, want %q", convs, want)
	}
	if len(problems) != 1 || !strings.HasPrefix(problems[0], "conversations/locked: ") || !strings.Contains(problems[0], "permission denied") {
		t.Errorf("problems %q, want one for conversations/locked", problems)
	}
}

// TestSymlinkedConversationIsNeverFollowed: reading, finding and deleting a
// conversation whose directory entry is a link refuse, and the link target
// is left untouched.
func TestSymlinkedConversationIsNeverFollowed(t *testing.T) {
	dataDir := t.TempDir()
	outside := t.TempDir()
	target := filepath.Join(outside, "victim")
	os.MkdirAll(target, 0o700)
	os.WriteFile(filepath.Join(target, "metadata.v4.jsonl"), []byte(`{"type":"conversation","version":4,"id":"evil","createdAt":1}`+"\n"), 0o600)
	os.MkdirAll(ConversationsDir(dataDir), 0o700)
	if err := os.Symlink(target, filepath.Join(ConversationsDir(dataDir), "evil")); err != nil {
		t.Fatal(err)
	}
	if _, err := at(dataDir).ReadConversation("evil"); !errors.Is(err, durable.ErrSymlink) {
		t.Errorf("ReadConversation: err = %v, want ErrSymlink", err)
	}
	if _, err := at(dataDir).FindLog("evil", ""); !errors.Is(err, durable.ErrSymlink) {
		t.Errorf("FindLog: err = %v, want ErrSymlink", err)
	}
	s, err := Open(context.Background(), dataDir, OpenOptions{Lock: LockOptions{Mode: LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.del("evil"); !errors.Is(err, durable.ErrSymlink) {
		t.Errorf("Delete: err = %v, want ErrSymlink", err)
	}
	if _, err := os.Stat(filepath.Join(target, "metadata.v4.jsonl")); err != nil {
		t.Fatalf("the link target was touched: %v", err)
	}
}

func TestWalkJobsManyConversations(t *testing.T) {
	data := t.TempDir()
	var names []string
	for i := range 200 {
		names = append(names, fmt.Sprintf("conversations/c%03d/metadata.v4.jsonl", i), fmt.Sprintf("conversations/c%03d/s.v4.jsonl", i))
		if i%7 == 0 {
			names = append(names, fmt.Sprintf("conversations/c%03d/bad.v01.jsonl", i), fmt.Sprintf("conversations/c%03d/.s.v5.jsonl.0123456789abcdef.tmp", i))
		}
		if i%11 == 0 {
			names = append(names, fmt.Sprintf("conversations/stray%03d.jsonl", i))
		}
	}
	mkfiles(t, data, names...)
	want, err := at(data).Walk()
	if err != nil {
		t.Fatal(err)
	}
	if len(want.Conversations) != 200 || len(want.Problems) == 0 || len(want.Temps) == 0 {
		t.Fatalf("tree: %d conversations, %d problems, %d temps", len(want.Conversations), len(want.Problems), len(want.Temps))
	}
	got, err := at(data).WalkJobs(4)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("WalkJobs differs from Walk (%v)", err)
	}
}

// TestReachableBy: a directory of mode 0700 that uid 65534 does not own
// shuts it out, and so does every directory below it.
func TestReachableBy(t *testing.T) {
	closed := t.TempDir()
	open := filepath.Join(closed, "open")
	if err := os.Mkdir(open, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{closed, open} {
		if err := reachableBy(d, nobody); err == nil || !strings.Contains(err.Error(), closed+" (mode -rwx------") {
			t.Errorf("%s: %v, want %s named", d, err, closed)
		}
	}
	if err := os.Chmod(closed, 0o711); err != nil {
		t.Fatal(err)
	}
	if err := reachableBy(open, nobody); err != nil && strings.Contains(err.Error(), closed+" ") {
		t.Errorf("0711 shuts it out: %v", err)
	}
}

// nobody is the uid (and gid) runAsNobody runs a test as.
const nobody = 65534

// runAsNobody runs the test name again in a child process under uid and
// gid 65534, from a copy of the test binary in a directory that uid can
// reach, with a $TMPDIR of its own there: $TMPDIR may be a directory of
// root's that no other uid can enter (mktemp -d makes them 0700). It
// skips, saying why, where no such directory can be made or the uid
// cannot be taken.
func runAsNobody(t *testing.T, name string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	var base string
	var why []string
	for _, b := range []string{os.TempDir(), "/tmp", "/var/tmp", "/dev/shm"} {
		if err := reachableBy(b, nobody); err != nil {
			why = append(why, err.Error())
			continue
		}
		base = b
		break
	}
	if base == "" {
		t.Skipf("no directory uid %d can reach to run %s from: %s", nobody, name, strings.Join(why, "; "))
	}
	dir, err := os.MkdirTemp(base, "convkit-asnobody-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	copyPath := filepath.Join(dir, "store.test")
	if err := os.WriteFile(copyPath, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(tmp, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	if err := os.Chmod(copyPath, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(copyPath, "-test.run=^"+name+"$", "-test.v", "-test.count=1")
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "TMPDIR=" + tmp}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	out, err := cmd.CombinedOutput()
	if errors.Is(err, syscall.EPERM) {
		t.Skipf("cannot start a process under another uid here: %v", err)
	}
	if err != nil {
		t.Fatalf("%s as uid %d: %v\n%s", name, nobody, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("%s as uid %d did not pass:\n%s", name, nobody, out)
	}
}

// reachableBy says why uid (whose group is gid uid, and no other) cannot
// enter dir, nil when it can: every directory from / down to dir must let
// it search.
func reachableBy(dir string, uid uint32) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no owner to check", p)
		}
		perm := fi.Mode().Perm()
		switch {
		case st.Uid == uid && perm&0o100 != 0, st.Uid != uid && st.Gid == uid && perm&0o010 != 0, st.Uid != uid && st.Gid != uid && perm&0o001 != 0:
		default:
			return fmt.Errorf("%s (mode %v, owner %d:%d) does not let uid %d in", p, perm, st.Uid, st.Gid, uid)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// TestNewest: ordered by Newest (stably), conversations come oldest first
// by their newest log generation, an older generation counting too; ties
// keep the walk's order (by name).
func TestNewest(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	mkfiles(t, data,
		"conversations/a/metadata.v4.jsonl",
		"conversations/b/metadata.v4.jsonl",
		"conversations/b/metadata.v3.jsonl",
		"conversations/c/metadata.v4.jsonl",
		"conversations/d/metadata.v4.jsonl",
	)
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for name, h := range map[string]int{"a/metadata.v4.jsonl": 3, "b/metadata.v4.jsonl": 1, "b/metadata.v3.jsonl": 5,
		"c/metadata.v4.jsonl": 2, "d/metadata.v4.jsonl": 2} {
		at := base.Add(time.Duration(h) * time.Hour)
		if err := os.Chtimes(filepath.Join(data, "conversations", name), at, at); err != nil {
			t.Fatal(err)
		}
	}
	tree, err := at(data).Walk()
	if err != nil {
		t.Fatal(err)
	}
	slices.SortStableFunc(tree.Conversations, func(a, b ConversationDir) int { return cmp.Compare(a.Newest(), b.Newest()) })
	var got []string
	for _, c := range tree.Conversations {
		got = append(got, c.ID)
	}
	if want := []string{"c", "d", "a", "b"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("by age: %v, want %v", got, want)
	}
}
