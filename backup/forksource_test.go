package backup

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/store"
)

// TestForkSourceMissing: a store holding a fork made after a compaction
// without the conversation it reads older history from backs up with the
// fork expected indexed (reindex indexes it and says it will not open);
// verify and restore agree. An archive of an older build, whose strict
// manifest expects that fork skipped, still verifies; a manifest that
// expects anything else does not. The archives of that older rule are
// made here with the tar and zstd tools from a new one.
func TestForkSourceMissing(t *testing.T) {
	for _, tool := range []string{"tar", "zstd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (.ci/run installs it)", tool)
		}
	}
	dir, rep := generate(t, 5, 20, false)
	fork := rep.Find(fixtures.CaseForkAfterCompaction)
	var src *fixtures.Conversation
	for i := range rep.Conversations {
		if rep.Conversations[i].ID == fork.DependsOn[0] {
			src = &rep.Conversations[i]
		}
	}
	if err := os.RemoveAll(src.Dir); err != nil {
		t.Fatal(err)
	}
	p, _ := backupFile(t, dir, Options{Strict: true})
	archived := extractedManifest(t, p)
	var mc *Conversation
	for i := range archived.Conversations {
		if archived.Conversations[i].ID == fork.ID {
			mc = &archived.Conversations[i]
		}
	}
	if mc == nil || mc.Expect != store.ItemIndexed {
		t.Fatalf("the fork in the manifest: %+v, want it expected indexed", mc)
	}
	if vr := verifyFile(t, p); !vr.OK {
		t.Fatalf("verify: %+v", vr.Mismatches)
	}
	target := filepath.Join(t.TempDir(), "restored")
	rr, err := restoreFile(t, p, RestoreOptions{Target: target})
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string][]string{}
	for _, w := range rr.Reindex.WillNotOpen {
		reasons[w.ID] = w.Reasons
	}
	if !slices.Contains(reasons[fork.ID], `fork source "`+src.ID+`" is missing: this conversation reads older history from it`) {
		t.Fatalf("the restored index: %q will not open for %q, want its missing source named", fork.ID, reasons[fork.ID])
	}

	// The older rule: the fork skipped, the counts without it.
	work := t.TempDir()
	tree := filepath.Join(work, "x")
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command("sh", "-c", name, "sh")
		cmd.Args = append(cmd.Args, args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %q: %v\n%s", name, args, err, out)
		}
	}
	if err := os.Mkdir(tree, 0o700); err != nil {
		t.Fatal(err)
	}
	run(`zstd -dc "$1" | tar -C "$2" -xf -`, p, tree)
	b, err := os.ReadFile(filepath.Join(tree, "MANIFEST.json"))
	if err != nil {
		t.Fatal(err)
	}
	repack := func(edit func(m map[string]any)) string {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		edit(m)
		nb, _ := json.Marshal(m)
		if err := os.WriteFile(filepath.Join(tree, "MANIFEST.json"), nb, 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := os.CreateTemp(work, "legacy-*.tar.zst")
		if err != nil {
			t.Fatal(err)
		}
		out.Close()
		os.Remove(out.Name())
		run(`cd "$1" && { find conversations -type f | sort; echo MANIFEST.json; } | tar --format=ustar -cf - -T - | zstd -q -o "$2"`, tree, out.Name())
		return out.Name()
	}
	var forkSessions, forkEvents float64
	for _, f := range archived.Files {
		if f.Log != nil && f.Log.Current && f.Log.Session != "" && strings.HasPrefix(f.Name, "conversations/"+mc.Dir+"/") {
			forkSessions++
			forkEvents += float64(f.Log.Events)
		}
	}
	expectAs := func(id string, expect store.ItemKind) func(m map[string]any) {
		return func(m map[string]any) {
			for _, c := range m["conversations"].([]any) {
				c := c.(map[string]any)
				if c["id"] == id {
					c["expect"] = expect
					c["reason"] = "fork source " + src.ID + " is missing: this conversation reads older history from it"
				}
			}
			n := m["counts"].(map[string]any)
			n["indexed"] = n["indexed"].(float64) - 1
			n["skipped"] = n["skipped"].(float64) + 1
			n["indexedSessions"] = n["indexedSessions"].(float64) - forkSessions
			n["events"] = n["events"].(float64) - forkEvents
		}
	}
	legacy := repack(expectAs(fork.ID, store.ItemSkipped))
	if vr := verifyFile(t, legacy); !vr.OK {
		t.Fatalf("an archive of the older rule: %+v", vr.Mismatches)
	}
	// The same edit on a conversation whose fork source is there is a
	// manifest that disagrees with its archive.
	other := rep.Find(fixtures.CaseBasic)
	if vr := verifyFile(t, repack(expectAs(other.ID, store.ItemSkipped))); vr.OK {
		t.Fatal("a manifest expecting an ordinary conversation skipped verified")
	}
}
