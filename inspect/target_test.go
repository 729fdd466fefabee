package inspect

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// put writes a file under root, creating its directories.
func put(t *testing.T, root, rel string, lines ...string) string {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// v3 is a hand-written v3 session log: a turn with one user message.
func v3(id, cwd, parent string, extra ...string) []string {
	h := fmt.Sprintf(`{"type":"session","version":3,"id":%q,"createdAt":7`, id)
	if cwd != "" {
		h += fmt.Sprintf(`,"cwd":%q`, cwd)
	}
	if parent != "" {
		h += fmt.Sprintf(`,"parentSession":%q,"isSeeded":false,"origin":"subagent","delegationDepth":1}`, parent)
	} else {
		h += `,"isSeeded":false,"delegationDepth":0}`
	}
	lines := []string{h,
		`{"type":"turn/start","seq":0,"time":10,"data":{"turn":1}}`,
		`{"type":"step/start","seq":1,"time":11,"data":{"turn":1,"step":1}}`,
		`{"type":"user/message","seq":2,"time":12,"data":{"role":"user","id":"m1","content":[{"type":"text","text":"hello there"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"step/end","seq":3,"time":13,"data":{"turn":1,"step":1}}`,
		`{"type":"turn/end","seq":4,"time":14,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	}
	return append(lines, extra...)
}

func TestResolve(t *testing.T) {
	root := t.TempDir()
	// A session directory of the runtime's layout: its highest generation.
	put(t, root, "--p--/s/session.v3.jsonl", v3("s", "/p", "")...)
	put(t, root, "--p--/s/session.v10.jsonl", "x")
	put(t, root, "--p--/s/session.lock")
	tg, err := Resolve(filepath.Join(root, "--p--", "s"))
	if err != nil || filepath.Base(tg.Path) != "session.v10.jsonl" || tg.root == nil || tg.root.Dir() != root {
		t.Fatalf("%+v %v", tg, err)
	}
	// A generation file of that layout.
	tg, err = Resolve(filepath.Join(root, "--p--", "s", "session.v3.jsonl"))
	if err != nil || tg.root == nil || tg.children == nil {
		t.Fatalf("%+v %v", tg, err)
	}
	// A convkit conversation directory: its conversation log.
	conv := t.TempDir()
	put(t, conv, "metadata.v4.jsonl", `{"type":"conversation","version":4,"id":"c","createdAt":1}`)
	put(t, conv, "abc.v3.jsonl", v3("abc", "", "")...)
	tg, err = Resolve(conv)
	if err != nil || filepath.Base(tg.Path) != "metadata.v4.jsonl" || !tg.convkit {
		t.Fatalf("%+v %v", tg, err)
	}
	if tg, _ := Resolve(filepath.Join(conv, "abc.v3.jsonl")); !tg.convkit {
		t.Fatalf("a session log of a conversation: %+v", tg)
	}
	// Never a lower generation: a highest one that is a link is refused.
	put(t, root, "--p--/l/session.v3.jsonl", v3("l", "/p", "")...)
	os.Symlink("session.v3.jsonl", filepath.Join(root, "--p--", "l", "session.v4.jsonl"))
	if _, err := Resolve(filepath.Join(root, "--p--", "l")); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a linked highest generation: %v", err)
	}
	// Directories holding no log, or several sessions' logs.
	if _, err := Resolve(t.TempDir()); err == nil || !strings.Contains(err.Error(), "holds no log") {
		t.Fatalf("empty: %v", err)
	}
	many := t.TempDir()
	put(t, many, "a.v3.jsonl", "x")
	put(t, many, "b.v3.jsonl", "x")
	if _, err := Resolve(many); err == nil || !strings.Contains(err.Error(), "holds the logs of 2 sessions") {
		t.Fatalf("many: %v", err)
	}
}

// --upgrade shows an older log as its successor would hold it: the v4
// header and events, the parent's catalog completed from children found
// anywhere under the root; nothing is written.
// TestResolveGenerationClash: a directory holding one version in two
// compressions (or two zstd suffixes) is read as the store's walk reads
// it, the first by name, and the other named in a warning with the walk's
// words; a lower version beside the current one is no clash.
func TestResolveGenerationClash(t *testing.T) {
	root := t.TempDir()
	for _, c := range []struct {
		dir   string
		files []string
		read  string
		warns []string
	}{
		{"--p--/s", []string{"session.v2.jsonl", "session.v2.jsonl.zstd", "session.v1.jsonl"}, "session.v2.jsonl",
			[]string{"session.v2.jsonl.zstd: both compressed and plain generations of session v2; session.v2.jsonl is read"}},
		{"conv", []string{"metadata.v4.jsonl.zst", "metadata.v4.jsonl.zstd", "s1.v4.jsonl"}, "metadata.v4.jsonl.zst",
			[]string{"metadata.v4.jsonl.zstd: both .zst and .zstd generations of metadata v4; metadata.v4.jsonl.zst is read"}},
		{"conv2", []string{"metadata.v4.jsonl", "metadata.v3.jsonl.zst"}, "metadata.v4.jsonl", nil},
	} {
		for _, f := range c.files {
			put(t, root, filepath.Join(c.dir, f), "x")
		}
		tg, err := Resolve(filepath.Join(root, c.dir))
		if err != nil || filepath.Base(tg.Path) != c.read {
			t.Fatalf("%s: %+v %v", c.dir, tg, err)
		}
		var want []string
		for _, w := range c.warns {
			want = append(want, filepath.Join(root, c.dir, w))
		}
		if fmt.Sprint(tg.Warnings) != fmt.Sprint(want) {
			t.Errorf("%s: warnings %q, want %q", c.dir, tg.Warnings, want)
		}
	}
}

func TestUpgraded(t *testing.T) {
	root := t.TempDir()
	parent := put(t, root, "--p--/parent/session.v3.jsonl", v3("parent", "/p", "")...)
	put(t, root, "--q--/kid/session.v3.jsonl", v3("kid", "/q", "parent",
		`{"type":"subagent/descriptor","seq":5,"time":15,"data":{"version":2,"provider":"x","mode":"one-shot"}}`)...)
	before, _ := os.ReadFile(parent)
	tg, err := Resolve(filepath.Dir(parent))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Show(context.Background(), tg, &out, ShowOptions{Upgrade: true}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`session log "parent", format v4,`, "upgraded in memory from format v3, nothing written; 1 subagent children found", "subagent/catalog", "user: hello there"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("rendering lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if err := Show(context.Background(), tg, &out, ShowOptions{Upgrade: true, JSON: true, Filter: Filter{"subagent/*"}}); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"subagent/catalog","seq":5,"time":14,"data":{"version":0,"childId":"kid","childCreatedAt":7,"mode":"one-shot"}}` + "\n"
	if out.String() != want {
		t.Fatalf("--upgrade --json:\n%s\nwant\n%s", out.String(), want)
	}
	if after, _ := os.ReadFile(parent); !bytes.Equal(before, after) {
		t.Fatal("the source changed")
	}
	if entries, _ := os.ReadDir(filepath.Dir(parent)); len(entries) != 1 {
		t.Fatalf("something was written beside the source: %v", entries)
	}
	// A log with no place: children not looked for, and said so.
	out.Reset()
	Show(context.Background(), &Target{Path: parent}, &out, ShowOptions{Upgrade: true})
	if !strings.Contains(out.String(), "its subagent children were not looked for") || strings.Contains(out.String(), "subagent/catalog") {
		t.Fatalf("no place:\n%s", out.String())
	}
	// The history of the v3 log, through the upgrade.
	h, err := History(context.Background(), &Target{Path: parent})
	if err != nil || len(h) != 1 || h[0].ID != "m1" {
		t.Fatalf("%+v %v", h, err)
	}
}

func TestCheckPlace(t *testing.T) {
	root := t.TempDir()
	good := put(t, root, "--p--/s/session.v3.jsonl", v3("s", "/p", "")...)
	bad := put(t, root, "--p--/t/session.v3.jsonl", v3("s", "/p", "")...)
	if tg, _ := Resolve(good); tg.CheckPlace() != nil {
		t.Error(tg.CheckPlace())
	}
	tg, _ := Resolve(bad)
	if err := tg.CheckPlace(); err == nil || !strings.Contains(err.Error(), `header id "s" is not the session "t" its session directory names`) {
		t.Fatalf("%v", err)
	}
	// Another cwd than its project directory's.
	cwd := put(t, root, "--p--/u/session.v3.jsonl", v3("u", "/q", "")...)
	tg, _ = Resolve(cwd)
	if err := tg.CheckPlace(); err == nil || !strings.Contains(err.Error(), `header id "u" and cwd identify "`+filepath.Join(root, "--q--", "u", "session.v3.jsonl")+`"`) {
		t.Fatalf("%v", err)
	}
}
