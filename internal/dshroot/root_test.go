package dshroot

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convkit/convkit/convlog"
)

// The project directory of a working directory, worked out by hand from
// the rule: separators ('/', '\', ':') one '-' per run, [A-Za-z0-9._-]
// literal, every other UTF-16 unit "~XXXX", leading '-' stripped, "root"
// when empty, at most 251 units, between "--" and "--".
func TestProjectDir(t *testing.T) {
	long := "/" + strings.Repeat("a", 300)
	for _, c := range []struct{ cwd, want string }{
		{"", "_no-cwd"},
		{"/home/dev/src/app", "--home-dev-src-app--"},
		{"/", "--root--"},
		{"///", "--root--"},
		{"//a//b/", "--a-b---"},
		{`C:\Users\a b`, "--C-Users-a~0020b--"},
		{"/srv/a.b_c-d", "--srv-a.b_c-d--"},
		{"/a-/b", "--a--b--"},    // a literal '-' is no separator: the '/' after it still gives one
		{"/-x", "--x--"},         // leading '-' of the slug are stripped, literal ones too
		{"/x~y", "--x~007Ey--"},  // '~' is escaped
		{"/名", "--~540D--"},      // one BMP unit
		{"/😀", "--~D83D~DE00--"}, // two surrogate units
		{"/tab\there", "--tab~0009here--"},
		{long, "--" + strings.Repeat("a", 251) + "--"},
	} {
		if got := ProjectDir(c.cwd); got != c.want {
			t.Errorf("ProjectDir(%q) = %q, want %q", c.cwd, got, c.want)
		}
	}
	for _, n := range []string{"_no-cwd", "--a--", "--root--"} {
		if !IsProjectDirName(n) {
			t.Errorf("%q is a project directory name", n)
		}
	}
	for _, n := range []string{"----", "a", "--a", "a--", "_no-cwd2", "sessions"} {
		if IsProjectDirName(n) {
			t.Errorf("%q is not a project directory name", n)
		}
	}
}

func TestSessionDirNames(t *testing.T) {
	for _, c := range []struct{ id, want string }{
		{"tool/session~名", "tool~002Fsession~007E~540D"},
		{".", "~002E"},
		{"..", "~002E~002E"},
		{"a.b", "a.b"},
		{"0f3c-9a_x", "0f3c-9a_x"},
	} {
		got, err := SessionDir(c.id)
		if err != nil || got != c.want {
			t.Errorf("SessionDir(%q) = %q, %v; want %q", c.id, got, err, c.want)
		}
		back, err := DecodeSessionDir(got)
		if err != nil || back != c.id {
			t.Errorf("DecodeSessionDir(%q) = %q, %v", got, back, err)
		}
	}
	if _, err := SessionDir(""); err == nil || err.Error() != "cannot encode an empty path segment" {
		t.Errorf("empty id: %v", err)
	}
	// Names the encoding never produces: a lower-case escape, an escaped
	// literal, a raw space, a bare "~", "." itself.
	for _, name := range []string{"a~002f", "~0041", "a b", "a~", "~12", ".", "..", "x~007e"} {
		_, err := DecodeSessionDir(name)
		want := `noncanonical Session directory name "` + name + `"`
		if err == nil || err.Error() != want {
			t.Errorf("DecodeSessionDir(%q): %v, want %s", name, err, want)
		}
	}
}

func TestGenerationNames(t *testing.T) {
	for _, c := range []struct {
		name    string
		version int
		comp    convlog.Compression
		suffix  string
	}{
		{"session.jsonl", 0, convlog.Plain, ""},
		{"session.jsonl.zstd", 0, convlog.Zstd, ".zstd"},
		{"session.v1.jsonl", 1, convlog.Plain, ""},
		{"session.v4.jsonl.zstd", 4, convlog.Zstd, ".zstd"},
		{"session.v12.jsonl.zst", 12, convlog.Zstd, ".zst"},
		{"session.v9007199254740991.jsonl", 9007199254740991, convlog.Plain, ""},
	} {
		n, ok := ParseGeneration(c.name)
		if !ok || n.Version != c.version || n.Compression != c.comp || n.Suffix != c.suffix {
			t.Errorf("ParseGeneration(%q) = %+v, %v", c.name, n, ok)
		}
		if got := GenerationName(c.version, c.comp, c.suffix); got != c.name {
			t.Errorf("GenerationName(%d, %v, %q) = %q, want %q", c.version, c.comp, c.suffix, got, c.name)
		}
	}
	if got := GenerationName(4, convlog.Zstd, ""); got != "session.v4.jsonl.zstd" {
		t.Errorf("the runtime's compressed name: %q", got)
	}
	for _, name := range []string{
		"session.v0.jsonl", "session.v01.jsonl", "session.V1.jsonl", "session.v1.backup.jsonl",
		"session.1.jsonl", "session.v9007199254740992.jsonl", "session.migration.deadbeef.tmp.jsonl",
		"session.lock", "other.v1.jsonl", "session.jsonl.gz", "session.v-1.jsonl", "session.v1.5.jsonl",
	} {
		if n, ok := ParseGeneration(name); ok {
			t.Errorf("%q is not a generation: %+v", name, n)
		}
	}
}

// walkOf walks root and indexes what it found by path under the root.
func walkOf(t *testing.T, root string) (*Tree, map[string]*Session, map[string]string) {
	t.Helper()
	r, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := r.Walk()
	if err != nil {
		t.Fatal(err)
	}
	sessions := map[string]*Session{}
	problems := map[string]string{}
	for _, e := range tr.Entries {
		if e.Session != nil {
			rel, _ := filepath.Rel(root, e.Session.Dir)
			sessions[rel] = e.Session
		} else {
			rel, _ := filepath.Rel(root, e.Problem.Path)
			problems[rel] = e.Problem.Reason
		}
	}
	return tr, sessions, problems
}

func TestWalk(t *testing.T) {
	root := t.TempDir()
	// Generations: the numerically highest is current, v10 over v9, even
	// when the highest is unreadable (garbage) or from the future.
	session(t, root, 3, "a", "/w", "")
	put(t, root, "--w--/a/session.v4.jsonl", "not json at all")
	session(t, root, 9, "b", "/w", "")
	put(t, root, "--w--/b/session.v10.jsonl", hdr(4, "b", "/w", ""))
	put(t, root, "--w--/b/session.jsonl", hdr(0, "b", "/w", ""))
	// Not generations: the lock, the runtime's temporary files, other
	// names. A convkit stage is recognised as one.
	session(t, root, 2, "c", "", "")
	put(t, root, "_no-cwd/c/session.lock")
	put(t, root, "_no-cwd/c/session.v4.jsonl.0123456789ab.tmp")
	put(t, root, "_no-cwd/c/session.migration.0123456789abcdef.jsonl.tmp")
	put(t, root, "_no-cwd/c/.session.v4.jsonl.0123456789abcdef.tmp")
	put(t, root, "_no-cwd/c/session.v01.jsonl", "x")
	put(t, root, "_no-cwd/c/notes.txt", "x")
	// A session directory with no generation at all.
	put(t, root, "--w--/empty/session.lock")
	// A future-only session.
	put(t, root, "--w--/f/session.v5.jsonl", hdr(4, "f", "/w", ""))
	// A symbolic link named as the highest generation is still current.
	session(t, root, 3, "l", "/w", "")
	os.Symlink("session.v3.jsonl", filepath.Join(root, "--w--/l/session.v4.jsonl"))
	// Other files at the root and in project directories are left alone.
	put(t, root, "README.md", "x")
	put(t, root, "--w--/notes.txt", "x")

	tr, ss, probs := walkOf(t, root)
	if len(probs) != 0 {
		t.Fatalf("problems: %v", probs)
	}
	current := func(rel string) string {
		s := ss[rel]
		if s == nil {
			t.Fatalf("no session %s in %v", rel, ss)
		}
		g, ok := s.Current()
		if !ok {
			return ""
		}
		return g.File
	}
	for rel, want := range map[string]string{
		"--w--/a": "session.v4.jsonl", "--w--/b": "session.v10.jsonl", "_no-cwd/c": "session.v2.jsonl",
		"--w--/empty": "", "--w--/f": "session.v5.jsonl", "--w--/l": "session.v4.jsonl",
	} {
		if got := current(rel); got != want {
			t.Errorf("%s: current %q, want %q", rel, got, want)
		}
	}
	if g, _ := ss["--w--/l"].Current(); g.Regular || !g.Symlink {
		t.Errorf("the link is taken for a regular file: %+v", g)
	}
	if c := ss["_no-cwd/c"]; len(c.Temps) != 1 || filepath.Base(c.Temps[0]) != ".session.v4.jsonl.0123456789abcdef.tmp" {
		t.Errorf("temps: %v", c.Temps)
	}
	if ss["--w--/b"].ID != "b" || ss["--w--/b"].Project != "--w--" || ss["--w--/b"].Err != nil {
		t.Errorf("%+v", ss["--w--/b"])
	}
	if tr.Mixed != nil || tr.Compression != convlog.Plain {
		t.Errorf("compression %v, mixed %v", tr.Compression, tr.Mixed)
	}
	// Discovery order: the root's entries by name, then each project's.
	var order []string
	for _, e := range tr.Entries {
		rel, _ := filepath.Rel(root, e.Session.Dir)
		order = append(order, rel)
	}
	if got := strings.Join(order, " "); got != "--w--/a --w--/b --w--/empty --w--/f --w--/l _no-cwd/c" {
		t.Errorf("order: %s", got)
	}
}

func TestWalkLayoutProblems(t *testing.T) {
	root := t.TempDir()
	session(t, root, 3, "ok", "/p", "")
	// Flat files: at the root and directly in a project directory, plain
	// and compressed, canonical names or not.
	put(t, root, "session.jsonl", hdr(0, "x", "", ""))
	put(t, root, "--p--/session.v3.jsonl.zstd", "x")
	put(t, root, "--p--/old.jsonl", "x")
	put(t, root, "--p--/old.jsonl.zst", "x")
	// Symbolic links: a project and a session directory.
	elsewhere := t.TempDir()
	session(t, elsewhere, 3, "far", "/far", "")
	os.Symlink(filepath.Join(elsewhere, "--far--"), filepath.Join(root, "--far--"))
	os.Symlink(filepath.Join(elsewhere, "--far--", "far"), filepath.Join(root, "--p--", "far"))
	// A session directory whose name is not canonical.
	put(t, root, "--p--/a b/session.v3.jsonl", hdr(3, "a b", "/p", ""))
	// One id in two project directories.
	session(t, root, 3, "twice", "/p", "")
	session(t, root, 4, "twice", "/q", "")

	_, ss, probs := walkOf(t, root)
	want := map[string]string{
		"session.jsonl":               ReasonFlatFile,
		"--p--/session.v3.jsonl.zstd": ReasonFlatFile,
		"--p--/old.jsonl":             ReasonFlatFile,
		"--p--/old.jsonl.zst":         ReasonFlatFile,
		"--far--":                     "project symbolic links are not traversed",
		"--p--/far":                   "Session symbolic links are not traversed",
	}
	for rel, reason := range want {
		if probs[rel] != reason {
			t.Errorf("%s: %q, want %q", rel, probs[rel], reason)
		}
	}
	if len(probs) != len(want) {
		t.Errorf("problems %v", probs)
	}
	if ReasonFlatFile != "unsupported flat-file layout; expected project/session/generation" {
		t.Error(ReasonFlatFile)
	}
	if s := ss["--p--/a b"]; s == nil || s.Err == nil || s.Err.Error() != `noncanonical Session directory name "a b"` || s.ID != "" {
		t.Errorf("noncanonical: %+v", s)
	}
	for _, rel := range []string{"--p--/twice", "--q--/twice"} {
		s := ss[rel]
		if s == nil || s.Err == nil || s.Err.Error() != `duplicate JSONL session id "twice" appears in multiple project directories` {
			t.Errorf("%s: %+v", rel, s)
		}
	}
	if s := ss["--p--/ok"]; s == nil || s.Err != nil {
		t.Errorf("ok: %+v", s)
	}
	// Nothing was followed: the linked sessions were not listed.
	if _, ok := ss["--far--/far"]; ok {
		t.Error("a linked project was traversed")
	}
}

func TestWalkMixedCompression(t *testing.T) {
	root := t.TempDir()
	first := session(t, root, 3, "a", "/p", "")
	put(t, root, "--p--/b/session.v3.jsonl.zstd", "x")
	tr, _, _ := walkOf(t, root)
	if tr.Mixed == nil || tr.Compression != convlog.Plain {
		t.Fatalf("mixed %v, compression %v", tr.Mixed, tr.Compression)
	}
	msg := tr.Mixed.Error()
	if !strings.HasPrefix(msg, `session artifact "`+filepath.Join(root, "--p--/b/session.v3.jsonl.zstd")+`" uses .jsonl.zstd, but this root's compression is "none" (as "`+first+`")`) {
		t.Errorf("%s", msg)
	}
	// Within one session directory too, and a lower generation counts.
	root = t.TempDir()
	put(t, root, "--p--/a/session.jsonl.zstd", "x")
	session(t, root, 3, "a", "/p", "")
	tr, _, _ = walkOf(t, root)
	if tr.Mixed == nil || !strings.Contains(tr.Mixed.Error(), "uses .jsonl.zstd, but this root's compression is \"none\"") {
		t.Fatalf("%v", tr.Mixed)
	}
	// .zst and .zstd are one compression.
	root = t.TempDir()
	put(t, root, "--p--/a/session.v3.jsonl.zst", "x")
	put(t, root, "--p--/b/session.v3.jsonl.zstd", "x")
	tr, _, _ = walkOf(t, root)
	if tr.Mixed != nil || tr.Compression != convlog.Zstd {
		t.Fatalf("%v %v", tr.Mixed, tr.Compression)
	}
}

func TestWalkRoot(t *testing.T) {
	r, _ := Open(filepath.Join(t.TempDir(), "missing"))
	if _, err := r.Walk(); err == nil || !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing root: %v", err)
	}
	f := put(t, t.TempDir(), "file", "x")
	r, _ = Open(f)
	if _, err := r.Walk(); err == nil || !strings.Contains(err.Error(), "is not a directory") {
		t.Errorf("a file: %v", err)
	}
	// An empty root is empty, and Open and Walk create nothing.
	dir := t.TempDir()
	r, _ = Open(dir)
	tr, err := r.Walk()
	if err != nil || len(tr.Entries) != 0 || tr.Compression != convlog.Zstd {
		t.Fatalf("%+v %v", tr, err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("created %v", entries)
	}
	// The root may be a link: it is the directory the user named.
	real := t.TempDir()
	session(t, real, 3, "a", "/p", "")
	link := filepath.Join(t.TempDir(), "link")
	os.Symlink(real, link)
	_, ss, _ := walkOf(t, link)
	if len(ss) != 1 {
		t.Errorf("through a root that is a link: %v", ss)
	}
}

func TestCheckIdentity(t *testing.T) {
	root := t.TempDir()
	r, _ := Open(root)
	h := func(id, cwd string, v int) *convlog.Header {
		return &convlog.Header{Type: convlog.SessionLog, Version: v, ID: id, Cwd: cwd}
	}
	ok := filepath.Join(root, "--home-dev--", "tool~002Fs", "session.v3.jsonl.zstd")
	if err := r.CheckIdentity(ok, h("tool/s", "/home/dev", 3)); err != nil {
		t.Errorf("its own place: %v", err)
	}
	if err := r.CheckIdentity(filepath.Join(root, "_no-cwd", "s", "session.jsonl"), h("s", "", 0)); err != nil {
		t.Errorf("_no-cwd: %v", err)
	}
	for _, c := range []struct {
		path string
		h    *convlog.Header
		want string
	}{
		// Another id than the directory's.
		{filepath.Join(root, "--w--", "a", "session.v3.jsonl"), h("b", "/w", 3), filepath.Join(root, "--w--", "b", "session.v3.jsonl")},
		// A cwd of another project directory.
		{filepath.Join(root, "--w--", "a", "session.v3.jsonl"), h("a", "/x", 3), filepath.Join(root, "--x--", "a", "session.v3.jsonl")},
		// No cwd, but not in _no-cwd.
		{filepath.Join(root, "--w--", "a", "session.v4.jsonl.zstd"), h("a", "", 4), filepath.Join(root, "_no-cwd", "a", "session.v4.jsonl.zstd")},
	} {
		err := r.CheckIdentity(c.path, c.h)
		var ie *IdentityError
		if !errors.As(err, &ie) || !errors.Is(err, convlog.ErrCorrupt) {
			t.Fatalf("%s: %v", c.path, err)
		}
		want := `corrupt session log "` + c.path + `": header id "` + c.h.ID + `" and cwd identify "` + c.want + `"`
		if err.Error() != want {
			t.Errorf("%s\nwant %s", err, want)
		}
	}
}

// CheckLog opens the log through convlog's opener told the session its
// directory names, then checks the cwd: both refusals are IdentityErrors.
func TestCheckLog(t *testing.T) {
	root := t.TempDir()
	r, _ := Open(root)
	good := session(t, root, 3, "s", "/p", "")
	if err := r.CheckLog(good); err != nil {
		t.Fatal(err)
	}
	copied := put(t, root, "--p--/t/session.v3.jsonl", append([]string{hdr(3, "s", "/p", "")}, turn()...)...)
	err := r.CheckLog(copied)
	var ie *IdentityError
	if !errors.As(err, &ie) || !errors.Is(err, convlog.ErrIdentity) || !errors.Is(err, convlog.ErrCorrupt) ||
		err.Error() != `corrupt session log "`+copied+`": header id "s" is not the session "t" its session directory names` {
		t.Fatalf("another id: %v", err)
	}
	moved := put(t, root, "--q--/u/session.v3.jsonl", append([]string{hdr(3, "u", "/p", "")}, turn()...)...)
	if err := r.CheckLog(moved); !errors.As(err, &ie) || !errors.Is(err, convlog.ErrIdentity) ||
		err.Error() != `corrupt session log "`+moved+`": header id "u" and cwd identify "`+filepath.Join(root, "--p--", "u", "session.v3.jsonl")+`"` {
		t.Fatalf("another cwd: %v", err)
	}
	// What the opener refuses for another reason is its own error.
	bad := put(t, root, "--p--/v/session.v3.jsonl", "not json")
	if err := r.CheckLog(bad); err == nil || errors.As(err, &ie) {
		t.Fatalf("garbage: %v", err)
	}
	link := filepath.Join(root, "--p--", "w", "session.v3.jsonl")
	os.MkdirAll(filepath.Dir(link), 0o700)
	os.Symlink(good, link)
	if err := r.CheckLog(link); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a link: %v", err)
	}
}
