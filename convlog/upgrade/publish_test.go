package upgrade

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
)

func noTemps(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Fatalf("temporary file left: %s", e.Name())
		}
	}
}

// readV4 reads a published log strictly and returns its lines.
func readV4(t *testing.T, path string) (string, []string, convlog.Stats) {
	t.Helper()
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var lines []string
	h := &convlog.History{}
	for ev, err := range r.Events() {
		if err != nil {
			t.Fatal(err)
		}
		if err := h.Apply(ev); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(ev.AppendJSON(nil)))
	}
	return string(r.Header().Raw), lines, r.Stats()
}

func TestPublish(t *testing.T) {
	for _, zst := range []bool{false, true} {
		name := "plain"
		if zst {
			name = "zstd"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			var src string
			if zst {
				src = writeZstdLog(t, dir, "s0.jsonl.zst", v0Log...)
			} else {
				src = writeLog(t, dir, "s0.jsonl", v0Log...)
			}
			before, _ := os.ReadFile(src)
			old := time.Now().Add(-time.Hour).Truncate(time.Second)
			os.Chtimes(src, old, old)
			dst, err := Publish(src, PublishOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := filepath.Join(dir, "s0.v4.jsonl")
			if zst {
				want += ".zst"
			}
			if dst != want {
				t.Fatalf("dst %s", dst)
			}
			sameFile(t, before, src)
			if fi, _ := os.Stat(src); !fi.ModTime().Equal(old) {
				t.Fatal("source mtime changed")
			}
			if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o600 {
				t.Fatalf("mode %v", fi.Mode())
			}
			hdr, lines, st := readV4(t, dst)
			wantHdr, wantLines := v0Expected()
			if hdr != wantHdr || strings.Join(lines, "\n") != strings.Join(wantLines, "\n") {
				t.Fatalf("published\n%s\n%s", hdr, strings.Join(lines, "\n"))
			}
			if zst && st.Frames != 2 {
				t.Fatalf("%d frames", st.Frames)
			}
			noTemps(t, dir)
			if zst {
				if _, err := exec.LookPath("zstd"); err == nil {
					out, err := exec.Command("zstd", "-dc", dst).Output()
					if err != nil {
						t.Fatalf("zstd -dc: %v", err)
					}
					if string(out) != hdr+"\n"+strings.Join(lines, "\n")+"\n" {
						t.Fatalf("zstd -dc printed\n%s", out)
					}
				}
			}

			// Publishing again finds the identical successor and accepts it.
			if d2, err := Publish(src, PublishOptions{}); err != nil || d2 != dst {
				t.Fatalf("republish: %v", err)
			}
			noTemps(t, dir)

			// Nor one of the same size with one byte changed.
			published, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			changed := bytes.Clone(published)
			changed[len(changed)-2] ^= 1
			if err := os.Remove(dst); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(dst, changed, 0o600)
			_, err = Publish(src, PublishOptions{})
			expectErr(t, err, `current session generation already exists at "`+dst+`": its content differs from the staged successor`, nil)
			sameFile(t, changed, dst)
			noTemps(t, dir)
			// The published successor with a tail appended is accepted.
			os.Remove(dst)
			os.WriteFile(dst, append(bytes.Clone(published), published[len(published)/2:]...), 0o600)
			if d2, err := Publish(src, PublishOptions{}); err != nil || d2 != dst {
				t.Fatalf("republish beside a longer successor: %v", err)
			}

			// A successor with other content is never overwritten.
			if err := os.Remove(dst); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(dst, []byte("something else\n"), 0o600)
			_, err = Publish(src, PublishOptions{})
			expectErr(t, err, `current session generation already exists at "`+dst+`"`, nil)
			sameFile(t, []byte("something else\n"), dst)
			noTemps(t, dir)
			// Nor is a link there followed or replaced.
			os.Remove(dst)
			if err := os.Symlink(src, dst); err != nil {
				t.Fatal(err)
			}
			_, err = Publish(src, PublishOptions{})
			expectErr(t, err, `current session generation already exists at "`+dst+`": it is not a regular file`, nil)
			if fi, err := os.Lstat(dst); err != nil || fi.Mode()&os.ModeSymlink == 0 {
				t.Fatalf("the link at the successor's name was replaced: %v", err)
			}
			noTemps(t, dir)
			sameFile(t, before, src)
		})
	}
}

func TestPublishCompressionAndFrames(t *testing.T) {
	dir := t.TempDir()
	b := newLog(v3Header).start(1, 1)
	big := strings.Repeat("x", 4000)
	for i := 0; i < 700; i++ {
		b.add("user/message", userMsg("u"+itoa(int64(i)), big), app)
	}
	src := writeLog(t, dir, "s.v3.jsonl", b.lines...)
	z := convlog.Zstd
	dst, err := Publish(src, PublishOptions{Compression: &z})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(dst) != "s.v4.jsonl.zst" {
		t.Fatal(dst)
	}
	_, lines, st := readV4(t, dst)
	if len(lines) != 702 || st.Frames < 4 || st.FramesWithoutChecksum != 0 {
		t.Fatalf("%d events, %d frames, %d without checksum", len(lines), st.Frames, st.FramesWithoutChecksum)
	}
}

// TestPublishLastFrame: a compressed successor whose last chunk of lines
// is longer than tailFrameMin ends in a frame that holds its last line
// alone, which is what a copy's check of the committed prefix decodes; a
// shorter chunk is one frame. The zstd tool decodes the successor to the
// same text as the strict reader, the framing canonical.
func TestPublishLastFrame(t *testing.T) {
	for _, tc := range []struct {
		name      string
		messages  int
		textBytes int
		frames    int  // 0: more than 3
		alone     bool // the last line in a frame of its own
	}{
		{"a short chunk", 10, 2000, 2, false},
		{"a long chunk", 100, 2000, 3, true},
		{"frames of a megabyte before", 700, 4000, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			b := newLog(v3Header).start(1, 1)
			for i := range tc.messages {
				b.add("user/message", userMsg("u"+itoa(int64(i)), strings.Repeat(string(rune('a'+i%26)), tc.textBytes)), app)
			}
			z := convlog.Zstd
			dst, err := Publish(writeLog(t, dir, "s.v3.jsonl", b.lines...), PublishOptions{Compression: &z})
			if err != nil {
				t.Fatal(err)
			}
			_, lines, st := readV4(t, dst)
			if len(lines) != tc.messages+2 || !st.Framing.Canonical() || st.FramesWithoutChecksum != 0 {
				t.Fatalf("%d events, framing %+v, %d frames without checksum", len(lines), st.Framing, st.FramesWithoutChecksum)
			}
			file, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			var frames []convlog.Frame
			for f, err := range convlog.NewFrameScanner(convlog.Bytes(file), int64(len(file))).Frames() {
				if err != nil {
					t.Fatal(err)
				}
				frames = append(frames, f)
			}
			if tc.frames > 0 && len(frames) != tc.frames || tc.frames == 0 && len(frames) <= 3 {
				t.Fatalf("%d frames, want %d (0: more than 3)", len(frames), tc.frames)
			}
			unzstd := func(b []byte) string {
				cmd := exec.Command("zstd", "-dc")
				cmd.Stdin = bytes.NewReader(b)
				out, err := cmd.Output()
				if err != nil {
					t.Fatalf("zstd -dc: %v", err)
				}
				return string(out)
			}
			text := strings.Split(strings.TrimSuffix(unzstd(file), "\n"), "\n")
			if len(text) != len(lines)+1 {
				t.Fatalf("zstd -dc: %d lines, the reader %d events and a header", len(text), len(lines))
			}
			for i, l := range lines {
				if text[i+1] != l {
					t.Fatalf("line %d: zstd -dc gives %.80q, the reader %.80q", i+2, text[i+1], l)
				}
			}
			last := frames[len(frames)-1]
			lastText := unzstd(file[last.Offset : last.Offset+last.Size])
			if alone := lastText == text[len(text)-1]+"\n"; alone != tc.alone {
				t.Fatalf("the last frame holds the last line alone: %v, want %v (%d bytes of text)", alone, tc.alone, len(lastText))
			}
		})
	}
}

func TestPublishSourceChanged(t *testing.T) {
	what := map[string]string{
		"source appended": ": its size went from ",
		"source touched":  ": its modification time changed (same size)",
		"child added":     `: child session "kid" was added: `,
	}
	cases := map[string]func(dir, src string){
		"source appended": func(dir, src string) {
			f, _ := os.OpenFile(src, os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString(`{"type":"step/end","seq":9,"time":1,"data":{"turn":1,"step":1}}` + "\n")
			f.Close()
		},
		"source touched": func(dir, src string) {
			now := time.Now().Add(time.Minute)
			os.Chtimes(src, now, now)
		},
		"child added": func(dir, src string) {
			writeLog(t, dir, "kid.v3.jsonl", `{"type":"session","version":3,"id":"kid","createdAt":5,"parentSession":"s","isSeeded":false,"origin":"subagent","delegationDepth":1}`)
		},
	}
	for name, change := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			src := writeLog(t, dir, "s.v3.jsonl", v3Log().start(1, 1).add("user/message", userMsg("u", "x"), app).lines...)
			_, err := Publish(src, PublishOptions{BeforePublish: func() { change(dir, src) }})
			if !errors.Is(err, ErrSourceChanged) {
				t.Fatalf("err %v", err)
			}
			// The message names the source and what changed in it.
			if want := `historical session generation changed during migration: "` + src + `"` + what[name]; !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("%v\nwant it to begin %s", err, want)
			}
			noTemps(t, dir)
			if _, err := os.Stat(filepath.Join(dir, "s.v4.jsonl")); !os.IsNotExist(err) {
				t.Fatal("published anyway")
			}
		})
	}
}

// TestPublishChildChanged: the second look at the children reads again a
// candidate whose file changed, so a child appended to, and a log that
// became a child under the name of one that was not, are both seen.
func TestPublishChildChanged(t *testing.T) {
	kid := `{"type":"session","version":3,"id":"kid","createdAt":5,"parentSession":"s","isSeeded":false,"origin":"subagent","delegationDepth":1}`
	other := `{"type":"session","version":3,"id":"kid","createdAt":5,"isSeeded":false,"delegationDepth":0}`
	cases := map[string]struct {
		before string
		change func(dir string)
		what   string
	}{
		"child appended": {kid, func(dir string) {
			f, _ := os.OpenFile(filepath.Join(dir, "kid.v3.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString(`{"type":"turn/start","seq":1,"time":6,"data":{"turn":1}}` + "\n")
			f.Close()
		}, `: child session "kid" changed: `},
		"log replaced by a child": {other, func(dir string) {
			tmp := filepath.Join(t.TempDir(), "kid.v3.jsonl")
			os.WriteFile(tmp, []byte(kid+"\n"), 0o600)
			if err := os.Rename(tmp, filepath.Join(dir, "kid.v3.jsonl")); err != nil {
				t.Fatal(err)
			}
		}, `: child session "kid" was added: `},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			src := writeLog(t, dir, "s.v3.jsonl", v3Log().start(1, 1).add("user/message", userMsg("u", "x"), app).lines...)
			writeLog(t, dir, "kid.v3.jsonl", tc.before)
			_, err := Publish(src, PublishOptions{BeforePublish: func() { tc.change(dir) }})
			if !errors.Is(err, ErrSourceChanged) || !strings.Contains(err.Error(), tc.what+filepath.Join(dir, "kid.v3.jsonl")) {
				t.Fatalf("err %v, want the source reported changed, with %s", err, tc.what)
			}
			if _, err := os.Stat(filepath.Join(dir, "s.v4.jsonl")); !os.IsNotExist(err) {
				t.Fatal("published anyway")
			}
			// Unchanged, the same children publish.
			if _, err := Publish(src, PublishOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestPublishFailures(t *testing.T) {
	dir := t.TempDir()
	v4 := writeLog(t, dir, "a.v4.jsonl", `{"type":"session","version":4,"id":"a","createdAt":1,"isSeeded":false,"delegationDepth":0}`)
	if _, err := Publish(v4, PublishOptions{}); err == nil || err.Error() != v4+": log is already at the current format version (v4)" {
		t.Fatal(err)
	}
	bad := writeLog(t, dir, "b.v3.jsonl", v3Log().start(1, 1).add("request/header", `{"header":{"tools":[{"deferLoading":true}]},"reason":"initial"}`).lines...)
	before, _ := os.ReadFile(bad)
	_, err := Publish(bad, PublishOptions{})
	expectErr(t, err, "deferLoading", convlog.ErrUnsupported)
	sameFile(t, before, bad)
	if _, err := os.Stat(filepath.Join(dir, "b.v4.jsonl")); !os.IsNotExist(err) {
		t.Fatal("published a refused log")
	}
	noTemps(t, dir)
}

func TestCollectChildren(t *testing.T) {
	dir := t.TempDir()
	child := func(id, parent string, v int, seeded bool) string {
		h := `{"type":"session","version":` + itoa(int64(v)) + `,"id":"` + id + `","createdAt":` + itoa(int64(len(id))*10) + `,"parentSession":"` + parent + `"`
		if v >= 2 {
			h += `,"isSeeded":` + map[bool]string{true: "true", false: "false"}[seeded]
		}
		return h + `,"origin":"subagent","delegationDepth":1}`
	}
	desc := `{"mode":"one-shot","version":2,"provider":"p"}`
	parent := v3Log().start(1, 1).add("user/message", userMsg("u", "x"), app)
	writeLog(t, dir, "s.v3.jsonl", parent.lines...)
	writeLog(t, dir, "ka.v3.jsonl", newLog(child("ka", "s", 3, false)).add("subagent/descriptor", desc).lines...)
	writeLog(t, dir, "ka.jsonl", `{"type":"session","version":0,"id":"ka","createdAt":1,"delegationDepth":0}`) // older generation
	writeLog(t, dir, "kbb.v2.jsonl", newLog(child("kbb", "s", 2, false)).add("acme/x", `{}`).lines...)         // unreadable body
	writeLog(t, dir, "kccc.v3.jsonl", newLog(child("kccc", "s", 3, true)).
		add("subagent/descriptor", desc).add("session/end-seed", `{"inherited":true}`).
		add("subagent/descriptor", `{"mode":"continuable","version":3,"provider":"p","label":"L"}`).lines...)
	writeLog(t, dir, "other.v3.jsonl", newLog(child("other", "nobody", 3, false)).lines...)
	writeLog(t, dir, "metadata.v4.jsonl", `{"type":"conversation","version":4,"id":"c","createdAt":1}`)
	os.WriteFile(filepath.Join(dir, "junk.v3.jsonl"), []byte("not json\n"), 0o600)

	facts, err := CollectChildrenFrom(DirChildren(dir), "s")
	if err != nil {
		t.Fatal(err)
	}
	if len(facts) != 3 {
		t.Fatalf("%+v", facts)
	}
	byID := map[string]ChildFact{}
	for _, f := range facts {
		byID[f.ChildID] = f
	}
	if f := byID["ka"]; f.DescriptorCount != 1 || string(f.Descriptor) != desc || f.ChildCreatedAt != 20 || f.Warning != "" {
		t.Fatalf("ka %+v", f)
	}
	if f := byID["kbb"]; f.DescriptorCount != 0 || f.Warning == "" || len(Warnings(facts)) != 1 {
		t.Fatalf("kbb %+v", f)
	}
	if f := byID["kccc"]; f.DescriptorCount != 1 || !strings.Contains(string(f.Descriptor), `"L"`) {
		t.Fatalf("kccc %+v", f)
	}

	// Publishing the parent collects the same facts and completes its catalog.
	var warned []string
	dst, err := Publish(filepath.Join(dir, "s.v3.jsonl"), PublishOptions{Warn: func(s string) { warned = append(warned, s) }})
	if err != nil {
		t.Fatal(err)
	}
	_, lines, _ := readV4(t, dst)
	cat := strings.Join(lines[3:], "\n")
	want := `{"type":"subagent/catalog","seq":3,"time":102,"data":{"version":0,"childId":"ka","childCreatedAt":20,"mode":"one-shot"}}` + "\n" +
		`{"type":"subagent/catalog","seq":4,"time":102,"data":{"version":1,"childId":"kbb","childCreatedAt":30,"mode":"unknown"}}` + "\n" +
		`{"type":"subagent/catalog","seq":5,"time":102,"data":{"version":0,"childId":"kccc","childCreatedAt":40,"mode":"continuable","label":"L"}}`
	if cat != want || len(warned) != 1 {
		t.Fatalf("catalog\n%s\nwarnings %v", cat, warned)
	}
}

func TestPublishTornTail(t *testing.T) {
	dir := t.TempDir()
	b := v3Log().start(1, 1).add("user/message", userMsg("u", "x"), app)
	src := filepath.Join(dir, "s.v3.jsonl")
	os.WriteFile(src, []byte(strings.Join(b.lines, "\n")+"\n"+`{"type":"step/end","seq":3,"ti`), 0o600)
	before, _ := os.ReadFile(src)
	dst, err := Publish(src, PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameFile(t, before, src)
	_, lines, st := readV4(t, dst)
	if len(lines) != 3 || st.TornTail {
		t.Fatalf("%d lines, torn %v", len(lines), st.TornTail)
	}

	// A compressed source with a torn last frame contributes its complete
	// lines; the successor of a .zstd source keeps .zstd.
	dir = t.TempDir()
	src = writeZstdLog(t, dir, "s.v3.jsonl.zstd", b.lines...)
	raw, _ := os.ReadFile(src)
	os.WriteFile(src, raw[:len(raw)-2], 0o600) // cut into the checksum
	dst, err = Publish(src, PublishOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(dst) != "s.v4.jsonl.zstd" {
		t.Fatal(dst)
	}
	if _, lines, _ := readV4(t, dst); len(lines) != 3 {
		t.Fatalf("%d lines", len(lines))
	}
}

// TestSuccessorPath: a successor keeps its source's compression suffix; a
// compressed successor of a plain source is .zst, a plain one .jsonl.
func TestSuccessorPath(t *testing.T) {
	for _, c := range []struct {
		src  string
		comp convlog.Compression
		want string
	}{
		{"d/s.v3.jsonl.zstd", convlog.Zstd, "d/s.v4.jsonl.zstd"},
		{"d/session.jsonl.zstd", convlog.Zstd, "d/session.v4.jsonl.zstd"},
		{"d/s.v2.jsonl.zst", convlog.Zstd, "d/s.v4.jsonl.zst"},
		{"d/s.jsonl", convlog.Plain, "d/s.v4.jsonl"},
		{"d/s.v1.jsonl", convlog.Zstd, "d/s.v4.jsonl.zst"},
		{"d/s.v3.jsonl.zstd", convlog.Plain, "d/s.v4.jsonl"},
	} {
		got, err := SuccessorPath(c.src, c.comp)
		if err != nil || got != c.want {
			t.Errorf("SuccessorPath(%q, %v) = %q, %v; want %q", c.src, c.comp, got, err, c.want)
		}
	}
	if _, err := SuccessorPath("d/s.v01.jsonl", convlog.Plain); err == nil {
		t.Error("a noncanonical name has a successor")
	}
}

// TestPublishChildBeingLinked: a parent checks its children again while a
// child's successor, published by the same caller, has just been linked
// into place and is not yet recorded. That is the caller's own work, not a
// change: the parent is published. A successor changed in that window
// still defers the parent, whether the parent looks in the window or only
// after the record (which keeps the identity the successor was linked
// with).
func TestPublishChildBeingLinked(t *testing.T) {
	for _, tc := range []struct {
		name string
		// tamper changes the successor in the window: a line appended,
		// or (touch) its modification time alone; afterRecord holds the
		// parent's second look until the child's Publish returns.
		tamper, touch, afterRecord bool
	}{
		{"own successor", false, false, false},
		{"successor changed", true, false, false},
		{"successor touched, looked at after its record", true, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			parent := writeLog(t, dir, "s.v3.jsonl", v3Log().start(1, 1).add("user/message", userMsg("u", "x"), app).lines...)
			child := writeLog(t, dir, "kid.v3.jsonl",
				`{"type":"session","version":3,"id":"kid","createdAt":5,"parentSession":"s","isSeeded":false,"origin":"subagent","delegationDepth":1}`)
			kid := filepath.Join(dir, "kid.v4.jsonl")
			pubs := &Publications{}
			parentReady, release := make(chan struct{}), make(chan struct{})
			parentDone := make(chan error, 1)
			go func() {
				// Held after its first look at the children until
				// released, then it looks again.
				_, err := Publish(parent, PublishOptions{Publications: pubs, BeforePublish: func() { close(parentReady); <-release }})
				parentDone <- err
			}()
			<-parentReady
			var parentErr error
			dst, err := Publish(child, PublishOptions{Publications: pubs, afterLink: func() {
				if tc.touch {
					later := time.Now().Add(time.Hour)
					if err := os.Chtimes(kid, later, later); err != nil {
						t.Error(err)
					}
				} else if tc.tamper {
					f, err := os.OpenFile(kid, os.O_APPEND|os.O_WRONLY, 0)
					if err != nil {
						t.Error(err)
					} else {
						f.WriteString(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}` + "\n")
						f.Close()
					}
				}
				if !tc.afterRecord {
					close(release)
					parentErr = <-parentDone
				}
			}})
			if tc.afterRecord {
				close(release)
				parentErr = <-parentDone
			}
			if err != nil || dst != kid {
				t.Fatalf("child: %q, %v", dst, err)
			}
			_, statErr := os.Stat(filepath.Join(dir, "s.v4.jsonl"))
			switch {
			case !tc.tamper && (parentErr != nil || statErr != nil):
				t.Fatalf("the parent was not published for a successor of its child this caller was linking: %v (%v)", parentErr, statErr)
			case tc.tamper && !errors.Is(parentErr, ErrSourceChanged):
				t.Fatalf("a child's successor changed after its link, and the parent was published: %v", parentErr)
			}
			noTemps(t, dir)
		})
	}
}

// TestPublishPathRules: a successor that a reader's rules beyond one line
// would refuse (inspect --validate, reindex) is not published; the rules
// run in order across frames, so a turn may span many of them; a turn left
// running (a crash) is legal.
func TestPublishPathRules(t *testing.T) {
	big := strings.Repeat("x", 4000)
	// long fills about 2.8 MB of one step with user messages: several
	// frames of about 1 MiB.
	long := func(b *logb) *logb {
		for i := 0; i < 700; i++ {
			b.add("user/message", userMsg("u"+itoa(int64(i)), big), app)
		}
		return b
	}
	end := func(b *logb, turn int) *logb {
		return b.add("step/end", fmt.Sprintf(`{"turn":%d,"step":1}`, turn)).add("turn/end", fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, turn))
	}
	tests := []struct {
		name string
		log  func() *logb
		// want is the rule broken, "" for a successor published.
		want string
	}{
		{"a turn spanning frames", func() *logb { return end(long(v3Log().start(1, 1)), 1) }, ""},
		{"a turn left running", func() *logb { return long(v3Log().start(1, 1)) }, ""},
		{"a step outside a turn", func() *logb {
			return v3Log().add("step/start", `{"turn":1,"step":1}`).add("user/message", userMsg("u1", "hi"), app)
		}, "step/start at seq 0: step/start outside a turn"},
		{"a second turn frames after the first, which never ended", func() *logb {
			return long(long(v3Log().start(1, 1)).start(2, 1))
		}, "turn/start at seq 702: turn 2 starts while turn 1 is still open"},
	}
	for _, tt := range tests {
		for _, zst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/zstd=%v", tt.name, zst), func(t *testing.T) {
				dir := t.TempDir()
				var src string
				if zst {
					src = writeZstdLog(t, dir, "s.v3.jsonl.zst", tt.log().lines...)
				} else {
					src = writeLog(t, dir, "s.v3.jsonl", tt.log().lines...)
				}
				before, _ := os.ReadFile(src)
				dst, err := Publish(src, PublishOptions{})
				sameFile(t, before, src)
				noTemps(t, dir)
				if tt.want == "" {
					if err != nil {
						t.Fatal(err)
					}
					_, lines, st := readV4(t, dst)
					if len(lines) < 700 || (zst && st.Frames < 4) {
						t.Fatalf("%d events in %d frames", len(lines), st.Frames)
					}
					return
				}
				if !errors.Is(err, convlog.ErrTurnPath) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), src+": not converted") {
					t.Fatalf("err = %v; want %q (convlog.ErrTurnPath) naming %s", err, tt.want, src)
				}
				ents, _ := os.ReadDir(dir)
				if len(ents) != 1 {
					t.Fatalf("the directory holds %d entries, want the source alone", len(ents))
				}
			})
		}
	}
}

// TestStageThenPublish: a staged successor exists only as a temporary
// file until its Publish; Discard removes it; a change to the source
// between Stage and Publish (the time a batch migration's stage waits
// for a publisher) is seen; a stage is published once.
func TestStageThenPublish(t *testing.T) {
	lines := v3Log().start(1, 1).add("user/message", userMsg("u", "x"), app).lines
	t.Run("discard", func(t *testing.T) {
		dir := t.TempDir()
		src := writeLog(t, dir, "s.v3.jsonl", lines...)
		s, err := Stage(src, PublishOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 2 || !strings.HasSuffix(ents[0].Name(), ".tmp") && !strings.HasSuffix(ents[1].Name(), ".tmp") {
			t.Fatalf("want the source and one temporary file, have %v", ents)
		}
		s.Discard()
		s.Discard()
		noTemps(t, dir)
		if _, err := s.Publish(); err == nil {
			t.Fatal("a discarded stage was published")
		}
		if _, err := os.Stat(filepath.Join(dir, "s.v4.jsonl")); !os.IsNotExist(err) {
			t.Fatal("published anyway")
		}
	})
	t.Run("source changed while staged", func(t *testing.T) {
		dir := t.TempDir()
		src := writeLog(t, dir, "s.v3.jsonl", lines...)
		s, err := Stage(src, PublishOptions{})
		if err != nil {
			t.Fatal(err)
		}
		f, _ := os.OpenFile(src, os.O_APPEND|os.O_WRONLY, 0)
		f.WriteString(`{"type":"step/end","seq":9,"time":1,"data":{"turn":1,"step":1}}` + "\n")
		f.Close()
		if _, err := s.Publish(); !errors.Is(err, ErrSourceChanged) {
			t.Fatalf("err %v", err)
		}
		noTemps(t, dir)
		if _, err := os.Stat(filepath.Join(dir, "s.v4.jsonl")); !os.IsNotExist(err) {
			t.Fatal("published anyway")
		}
	})
	t.Run("published once", func(t *testing.T) {
		dir := t.TempDir()
		src := writeLog(t, dir, "s.v3.jsonl", lines...)
		s, err := Stage(src, PublishOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dst, err := s.Publish()
		if err != nil {
			t.Fatal(err)
		}
		want, err := Publish(writeLog(t, t.TempDir(), "s.v3.jsonl", lines...), PublishOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(dst)
		wantb, _ := os.ReadFile(want)
		if !bytes.Equal(got, wantb) {
			t.Fatal("a staged and published successor differs from Publish's")
		}
		if _, err := s.Publish(); err == nil {
			t.Fatal("published twice")
		}
		s.Discard() // after Publish: nothing to remove
		if _, err := os.Stat(dst); err != nil {
			t.Fatal(err)
		}
		noTemps(t, dir)
	})
}
