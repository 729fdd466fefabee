package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// exportable are the generated conversations an export can take: all but
// the corrupt one and the interrupted deletion.
func exportable(rep *fixtures.Report) []fixtures.Conversation {
	var out []fixtures.Conversation
	for _, c := range rep.Conversations {
		if c.Has(fixtures.CaseCorrupt) || c.Deleting {
			continue
		}
		out = append(out, c)
	}
	return out
}

func listing(t *testing.T, dataDir string, only map[string]bool) []index.Summary {
	t.Helper()
	l, err := reindex.List(context.Background(), reader(t, dataDir), reindex.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []index.Summary
	for _, s := range l.Conversations {
		if only == nil || only[s.ID] {
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// TestRoundTrip exports every readable conversation of store A but the
// fork source of the fork made after a compaction (export must add it),
// imports into an empty store B, and compares: the listing, every log's
// bytes, the ancestor. A second import changes nothing.
func TestRoundTrip(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	fork := rep.Find(fixtures.CaseForkAfterCompaction)
	if fork == nil || len(fork.DependsOn) != 1 {
		t.Fatalf("fixtures: no fork after compaction with one dependency: %+v", fork)
	}
	source := fork.DependsOn[0]
	var ids []string
	want := map[string]bool{}
	for _, c := range exportable(rep) {
		want[c.ID] = true
		if c.ID != source {
			ids = append(ids, c.ID)
		}
	}
	arch, res := exportTo(t, a, ids...)
	if res.Partial() {
		t.Fatalf("export problems: %+v", res.Manifest.Problems)
	}
	if !reflect.DeepEqual(res.Added, []string{source}) {
		t.Fatalf("added %q, want the fork source %q", res.Added, source)
	}
	m := res.Manifest
	if m.Format != manifestFormat.Name || m.FormatVersion != 1 || m.Online || len(m.Conversations) != len(want) {
		t.Fatalf("manifest: %+v", m)
	}
	pos := map[string]int{}
	for i, c := range m.Conversations {
		pos[c.ID] = i
		if c.ID == source && (c.Requested || !reflect.DeepEqual(c.AncestorOf, []string{fork.ID})) {
			t.Fatalf("source entry %+v", c)
		}
		if c.ID == fork.ID && !reflect.DeepEqual(c.DependsOn, []string{source}) {
			t.Fatalf("fork entry %+v", c)
		}
	}
	if pos[source] > pos[fork.ID] {
		t.Fatalf("the ancestor comes after its fork in the archive")
	}

	b := filepath.Join(t.TempDir(), "B")
	cfg := writeConfig(t, allAgents, allModels)
	ir, err := importFile(t, arch, b, ImportOptions{ConfigPath: cfg, ConfigRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	if ir.Counts.Imported != len(want) || ir.Counts.Conversations != len(want) {
		t.Fatalf("counts %+v", ir.Counts)
	}
	// The working directories (/home/dev/src/...) do not exist here:
	// every conversation is reported, and only for that.
	for _, p := range ir.Conversations {
		if len(p.Problems) != 1 || !strings.Contains(p.Problems[0], "working directory") {
			t.Fatalf("%s: problems %q", p.ID, p.Problems)
		}
	}
	// B had no metadata.db: the import built it, and list reads it.
	if !ir.Warned() || ir.Index != "built" {
		t.Fatalf("warned %v index %q", ir.Warned(), ir.Index)
	}
	if l, err := reindex.List(context.Background(), reader(t, b), reindex.ListOptions{All: true}); err != nil || l.Source != "index" {
		t.Fatalf("list after the import: source %q (%s), %v", l.Source, l.FallbackReason, err)
	}

	// list shows the same conversations.
	la, lb := listing(t, a, want), listing(t, b, nil)
	if !reflect.DeepEqual(la, lb) {
		t.Fatalf("listings differ:\nA %+v\nB %+v", la, lb)
	}
	// Every log: B holds exactly A's committed prefix (so inspect shows the
	// same events).
	for _, f := range m.Files {
		got, err := os.ReadFile(filepath.Join(b, filepath.FromSlash(f.Name)))
		if err != nil {
			t.Fatal(err)
		}
		src, err := os.ReadFile(filepath.Join(a, filepath.FromSlash(f.Name)))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(got)) != f.Committed || !bytes.Equal(got, src[:len(got)]) {
			t.Fatalf("%s: %d bytes imported, not A's committed prefix (%d of %d)", f.Name, len(got), f.Committed, len(src))
		}
		if f.LeftOut != int64(len(src))-f.Committed {
			t.Fatalf("%s: leftOut %d", f.Name, f.LeftOut)
		}
		fi, _ := os.Stat(filepath.Join(b, filepath.FromSlash(f.Name)))
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: mode %v", f.Name, fi.Mode())
		}
	}
	// Torn tails were left out.
	torn := rep.Find(fixtures.CaseTornZstd)
	var left int64
	for _, f := range m.Files {
		if f.Conversation == torn.ID {
			left += f.LeftOut
		}
	}
	if left == 0 {
		t.Fatalf("the torn tail of %s was not left out", torn.ID)
	}
	// The ancestor is there and the fork's dependency closure resolves.
	if _, err := reader(t, b).DependencyClosure(fork.ID); err != nil {
		t.Fatal(err)
	}
	// reindex indexes every imported conversation.
	s, err := store.Open(context.Background(), b, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	rr, err := reindex.Run(context.Background(), s, reindex.Options{})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if rr.Indexed != len(want) || len(rr.Skipped) != 0 {
		t.Fatalf("reindex of B: %+v", rr)
	}

	// A second import changes nothing.
	before := treeHash(t, b)
	ir2, err := importFile(t, arch, b, ImportOptions{ConfigPath: cfg, ConfigRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	if ir2.Counts.Unchanged != len(want) || changed(ir2) || ir2.Index != "unchanged" {
		t.Fatalf("second import: %+v", ir2.Counts)
	}
	if after := treeHash(t, b); after != before {
		t.Fatalf("the second import changed the store:\n%s", listTree(b))
	}
}

// TestDryRun writes nothing, creates nothing and takes no lock.
func TestDryRun(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	arch, _ := exportTo(t, a, rep.Find(fixtures.CaseBasic).ID)
	b := filepath.Join(t.TempDir(), "B")
	ir, err := importFile(t, arch, b, ImportOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if !ir.DryRun || ir.Counts.Imported != 1 || ir.Index != "" {
		t.Fatalf("%+v", ir)
	}
	if _, err := os.Lstat(b); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a dry run into a new directory left %s:\n%s", b, listTree(b))
	}
	// Into an existing store, while its runtime.lock is held.
	lock, err := store.Open(context.Background(), a, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	before := treeHash(t, a)
	ir, err = importFile(t, arch, a, ImportOptions{DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if ir.Counts.Unchanged != 1 {
		t.Fatalf("%+v", ir.Counts)
	}
	if treeHash(t, a) != before {
		t.Fatal("a dry run changed the store")
	}
}

// TestIndexUpdated: with a metadata.db, import updates the imported rows
// so that the index stays current, without a full reindex.
func TestIndexUpdated(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	fork := rep.Find(fixtures.CaseForkAfterCompaction)
	arch, _ := exportTo(t, a, fork.ID)
	b, _ := fixtureStore(t, 11)
	s, err := store.Open(context.Background(), b, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reindex.Run(context.Background(), s, reindex.Options{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	ir, err := importFile(t, arch, b, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ir.Index != "updated" || ir.Counts.Imported != 2 {
		t.Fatalf("index %q counts %+v", ir.Index, ir.Counts)
	}
	l, err := reindex.List(context.Background(), reader(t, b), reindex.ListOptions{All: true})
	if err != nil {
		t.Fatal(err)
	}
	if l.Source != "index" {
		t.Fatalf("list falls back to the logs: %s", l.FallbackReason)
	}
	found := 0
	for _, c := range l.Conversations {
		if c.ID == fork.ID || c.ID == fork.DependsOn[0] {
			found++
		}
	}
	if found != 2 {
		t.Fatalf("the imported conversations are not listed from the index")
	}
	cr, err := reindex.Check(context.Background(), reader(t, b), reindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cr.Drift() {
		t.Fatalf("index drift after import: %+v", cr.Differences)
	}
}

// TestRerunUpdatesIndexAfterKill: an import killed after placing its
// conversations and before updating metadata.db leaves their rows stale;
// the rerun finds every conversation unchanged and must update them still.
func TestRerunUpdatesIndexAfterKill(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	arch, _ := exportTo(t, a, rep.Find(fixtures.CaseForkAfterCompaction).ID)
	b, _ := fixtureStore(t, 11)
	s, err := store.Open(context.Background(), b, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reindex.Run(context.Background(), s, reindex.Options{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	db := filepath.Join(b, store.IndexFileName)
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := importFile(t, arch, b, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	// The kill: the conversations are in place, the index is as before.
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(db + suffix)
	}
	if err := os.WriteFile(db, before, 0o600); err != nil {
		t.Fatal(err)
	}
	ir, err := importFile(t, arch, b, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ir.Counts.Unchanged != 2 || ir.Index != "updated" {
		t.Fatalf("rerun: index %q counts %+v", ir.Index, ir.Counts)
	}
	cr, err := reindex.Check(context.Background(), reader(t, b), reindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cr.Drift() {
		t.Fatalf("index drift after the rerun: %+v", cr.Differences)
	}
	// Once current, a rerun leaves metadata.db alone.
	if ir, err = importFile(t, arch, b, ImportOptions{}); err != nil || ir.Index != "unchanged" {
		t.Fatalf("third import: index %q, %v", ir.Index, err)
	}
}

// TestConflicts: a conversation changed on both machines is refused with
// nothing written, unless --on-conflict; one changed only at the source
// is updated; one changed only here is kept.
func TestConflicts(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	basic := rep.Find(fixtures.CaseBasic).ID
	renamed := rep.Find(fixtures.CaseRenamed).ID
	archived := rep.Find(fixtures.CaseArchived).ID
	arch, _ := exportTo(t, a, basic, renamed, archived)
	b := filepath.Join(t.TempDir(), "B")
	if _, err := importFile(t, arch, b, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	rename(t, a, basic, "Changed at the source")
	rename(t, b, basic, "Changed here") // diverged
	rename(t, a, renamed, "Only at the source")
	rename(t, b, archived, "Only here")
	arch2, _ := exportTo(t, a, basic, renamed, archived)

	before := treeHash(t, b)
	basicDir, _ := reader(t, b).ConversationPath(basic)
	oldLog, err := os.ReadFile(filepath.Join(basicDir, "metadata.v4.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	ir, err := importFile(t, arch2, b, ImportOptions{})
	if !errors.Is(err, ErrConflict) || ir == nil {
		t.Fatalf("want ErrConflict with the plan, got %v", err)
	}
	if p := planOf(t, ir, basic); p.Action != ActionConflict || !strings.Contains(p.Detail, "differs at byte") {
		t.Fatalf("%+v", p)
	}
	if p := planOf(t, ir, renamed); p.Action != ActionUpdate {
		t.Fatalf("%+v", p)
	}
	if p := planOf(t, ir, archived); p.Action != ActionKeep {
		t.Fatalf("%+v", p)
	}
	if treeHash(t, b) != before {
		t.Fatalf("a refused import changed the store:\n%s", listTree(b))
	}

	// skip: the diverged one stays, the rest goes ahead.
	ir, err = importFile(t, arch2, b, ImportOptions{OnConflict: ConflictSkip})
	if err != nil {
		t.Fatal(err)
	}
	if ir.Counts.Skipped != 1 || ir.Counts.Updated != 1 || ir.Counts.Kept != 1 || !ir.Warned() {
		t.Fatalf("%+v", ir.Counts)
	}
	if info, _ := reader(t, b).ReadConversation(basic); info.Title != "Changed here" {
		t.Fatalf("skipped conversation changed: %q", info.Title)
	}
	if info, _ := reader(t, b).ReadConversation(renamed); info.Title != "Only at the source" {
		t.Fatalf("not updated: %q", info.Title)
	}
	if info, _ := reader(t, b).ReadConversation(archived); info.Title != "Only here" {
		t.Fatalf("the newer copy here was replaced: %q", info.Title)
	}
	if _, err := os.Lstat(filepath.Join(b, store.ReplacedDirName)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("an update left replaced/:\n%s", listTree(b))
	}

	// replace: the store's copy is moved aside, byte for byte, and kept.
	ir, err = importFile(t, arch2, b, ImportOptions{OnConflict: ConflictReplace})
	if err != nil {
		t.Fatal(err)
	}
	p := planOf(t, ir, basic)
	if p.Action != ActionReplace || p.MovedAside == "" {
		t.Fatalf("%+v", p)
	}
	if !strings.HasPrefix(p.MovedAside, filepath.Join(b, store.ReplacedDirName)+string(filepath.Separator)) {
		t.Fatalf("moved aside to %s", p.MovedAside)
	}
	kept, err := os.ReadFile(filepath.Join(p.MovedAside, "metadata.v4.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(kept, oldLog) {
		t.Fatal("the replaced copy is not the store's")
	}
	if info, _ := reader(t, b).ReadConversation(basic); info.Title != "Changed at the source" {
		t.Fatalf("not replaced: %q", info.Title)
	}
	// Now identical: nothing more to do.
	ir, err = importFile(t, arch2, b, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if changed(ir) || ir.Counts.Conflicts != 0 {
		t.Fatalf("%+v", ir.Counts)
	}
}

// TestChecks: a missing working directory, a missing model, a missing
// fork source are reported; --map-cwd records a new directory as an
// event without touching history.
func TestChecks(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	basic := rep.Find(fixtures.CaseBasic)
	fork := rep.Find(fixtures.CaseForkAfterCompaction)
	arch, _ := exportTo(t, a, basic.ID, fork.ID)
	b := filepath.Join(t.TempDir(), "B")
	src := t.TempDir()
	for _, p := range []string{"app", "convkit", "web-frontend", "data-pipeline", "infra"} {
		if err := os.Mkdir(filepath.Join(src, p), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg := writeConfig(t, allAgents, []string{"deepseek-pro"}) // no deepseek-flash
	ir, err := importFile(t, arch, b, ImportOptions{ConfigPath: cfg, ConfigRequired: true,
		MapCwd: []CwdMapping{{From: "/home/dev/src", To: src}}})
	if err != nil {
		t.Fatal(err)
	}
	if ir.Counts.CwdMapped != 3 {
		t.Fatalf("%+v", ir.Counts)
	}
	usesFlash := 0
	for _, p := range ir.Conversations {
		info, err := reader(t, b).ReadConversation(p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(info.Cwd, src+"/") || info.Cwd != p.CwdMappedTo {
			t.Fatalf("%s: cwd %q, plan %+v", p.ID, info.Cwd, p)
		}
		for _, pr := range p.Problems {
			if strings.Contains(pr, "working directory") {
				t.Fatalf("%s: %s", p.ID, pr)
			}
		}
		if slices.Contains(info.Models, "deepseek-flash") {
			usesFlash++
			if !slices.ContainsFunc(p.Problems, func(s string) bool { return strings.Contains(s, `model "deepseek-flash" is not configured`) }) {
				t.Fatalf("%s: missing model not reported: %q", p.ID, p.Problems)
			}
		}
		// History untouched: the archived bytes are a prefix, and the
		// mapping is one conversation/cwd-mapped event at the end.
		name, _ := store.EncodeSegment(p.ID)
		var archived []byte
		for _, f := range mustManifest(t, arch).Files {
			if f.Conversation == p.ID && f.Session == "" {
				archived = readEntry(t, a, f)
			}
		}
		convLog, err := reader(t, b).FindLog(p.ID, "")
		if err != nil {
			t.Fatal(err)
		}
		now, _ := os.ReadFile(convLog.Path)
		if !bytes.HasPrefix(now, archived) {
			t.Fatalf("%s (%s): the conversation log was rewritten", p.ID, name)
		}
		last := lastEvent(t, convLog.Path)
		if last.Type != store.EventConversationCwdMapped {
			t.Fatalf("%s: last event %s", p.ID, last.Type)
		}
	}
	if usesFlash == 0 {
		t.Skip("no exported conversation uses deepseek-flash with this seed")
	}
	// A second import with the same mapping changes nothing.
	before := treeHash(t, b)
	ir, err = importFile(t, arch, b, ImportOptions{ConfigPath: cfg, MapCwd: []CwdMapping{{From: "/home/dev/src", To: src}}})
	if err != nil {
		t.Fatal(err)
	}
	if changed(ir) || treeHash(t, b) != before {
		t.Fatalf("second import with --map-cwd changed the store: %+v", ir.Counts)
	}

	// The fork's source continues at the source machine: the store's copy
	// (with the local mapping) is behind, not diverged, and the mapping
	// survives the update.
	source := fork.DependsOn[0]
	rename(t, a, source, "Continued at the source")
	arch2, _ := exportTo(t, a, fork.ID)
	ir, err = importFile(t, arch2, b, ImportOptions{ConfigPath: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if p := planOf(t, ir, source); p.Action != ActionUpdate {
		t.Fatalf("%+v", p)
	}
	info, _ := reader(t, b).ReadConversation(source)
	if info.Title != "Continued at the source" || !strings.HasPrefix(info.Cwd, src+"/") {
		t.Fatalf("after update: title %q cwd %q", info.Title, info.Cwd)
	}
}

func mustManifest(t *testing.T, arch string) *Manifest {
	t.Helper()
	f, err := os.Open(arch)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ar, err := archive.NewReader(f, archive.ReaderOptions{CheckName: checkExportName, Archive: arch})
	if err != nil {
		t.Fatal(err)
	}
	defer ar.Close()
	for {
		h, err := ar.Next()
		if err != nil {
			t.Fatalf("no manifest: %v", err)
		}
		if h.Name == archive.ManifestName {
			m, err := decodeManifest(ar, h.Name)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
	}
}

func readEntry(t *testing.T, dataDir string, f File) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dataDir, filepath.FromSlash(f.Name)))
	if err != nil {
		t.Fatal(err)
	}
	return data[:f.Size]
}

func lastEvent(t *testing.T, p string) convlog.Event {
	t.Helper()
	r, err := convlog.Open(p, convlog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var last convlog.Event
	for e, err := range r.Events() {
		if err != nil {
			t.Fatal(err)
		}
		last = e.Clone()
	}
	return last
}

// TestMissingForkSource: a fork whose source is gone from the source store
// exports with a problem, and imports with its source reported missing.
func TestMissingForkSource(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	fork := rep.Find(fixtures.CaseForkAfterCompaction)
	dir, _ := reader(t, a).ConversationPath(fork.DependsOn[0])
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	arch, res := exportTo(t, a, fork.ID)
	if !res.Partial() || len(res.Manifest.Conversations) != 1 || len(res.Added) != 0 {
		t.Fatalf("%+v", res.Manifest)
	}
	if !strings.Contains(res.Manifest.Problems[0].Reason, "fork ancestor") {
		t.Fatalf("%+v", res.Manifest.Problems)
	}
	ir, err := importFile(t, arch, filepath.Join(t.TempDir(), "B"), ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := planOf(t, ir, fork.ID)
	if !slices.ContainsFunc(p.Problems, func(s string) bool { return strings.Contains(s, "fork source") }) {
		t.Fatalf("%q", p.Problems)
	}
}

// TestExportRefusals: a requested conversation that does not exist fails
// before anything is written; an existing file is never overwritten; an
// unreadable conversation is left out and reported.
func TestExportRefusals(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	out := filepath.Join(t.TempDir(), "x.tar.zst")
	_, err := ExportToFile(context.Background(), reader(t, a), out, ExportOptions{IDs: []string{rep.Find(fixtures.CaseBasic).ID, "no-such"}})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("got %v", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
		t.Fatalf("left %v", ents)
	}
	var buf bytes.Buffer
	if _, err := Export(context.Background(), reader(t, a), &buf, ExportOptions{IDs: []string{rep.Find(fixtures.CaseInterruptedDelete).ID}}); !errors.Is(err, ErrNotFound) || buf.Len() != 0 {
		t.Fatalf("a conversation being deleted: %v, %d bytes", err, buf.Len())
	}
	if err := os.WriteFile(out, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ExportToFile(context.Background(), reader(t, a), out, ExportOptions{IDs: []string{rep.Find(fixtures.CaseBasic).ID}}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("got %v", err)
	}
	if data, _ := os.ReadFile(out); string(data) != "keep" {
		t.Fatal("overwritten")
	}
	corrupt := rep.Find(fixtures.CaseCorrupt).ID
	basic := rep.Find(fixtures.CaseBasic).ID
	arch, res := exportTo(t, a, corrupt, basic)
	if !res.Partial() || len(res.Manifest.Conversations) != 1 || res.Manifest.Problems[0].ID != corrupt {
		t.Fatalf("%+v", res.Manifest)
	}
	ir, err := importFile(t, arch, filepath.Join(t.TempDir(), "B"), ImportOptions{})
	if err != nil || ir.Counts.Imported != 1 {
		t.Fatalf("%v %+v", err, ir)
	}
}

// TestExportInterruptedWhilePlanning: an interrupt (ctx cancelled) stops
// the plan's reading of the conversations: export returns ctx's error, not
// what reading them all would have found (here a missing id), and
// publishes nothing.
func TestExportInterruptedWhilePlanning(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	opts := ExportOptions{IDs: []string{rep.Find(fixtures.CaseBasic).ID, "no-such"}, Now: fixedNow}
	out := filepath.Join(t.TempDir(), "x.tar.zst")
	if _, err := ExportToFile(ctx, reader(t, a), out, opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("export to a file: got %v, want %v", err, context.Canceled)
	}
	if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
		t.Fatalf("left %v", ents)
	}
	var buf bytes.Buffer
	if _, err := Export(ctx, reader(t, a), &buf, opts); !errors.Is(err, context.Canceled) || buf.Len() != 0 {
		t.Fatalf("export: got %v and %d bytes", err, buf.Len())
	}
	if _, err := PlanExport(ctx, reader(t, a), opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("plan: got %v", err)
	}
}

// TestExportOnline exports a conversation while a runtime appends to it:
// the manifest says online, and the archive imports (committed prefixes
// only, no torn tail).
func TestExportOnline(t *testing.T) {
	a, _ := fixtureStore(t, 7)
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		lw := &fixtures.LiveWriter{DataDir: a, Every: 5 * time.Millisecond, Out: pw, ConversationID: "live", Seed: 1, Compression: convlog.Zstd}
		if err := lw.Run(ctx); err != nil {
			t.Error(err)
		}
		pw.Close()
	}()
	defer func() {
		cancel()
		go io.Copy(io.Discard, pr)
		wg.Wait()
	}()
	line := make([]byte, 64)
	if _, err := pr.Read(line); err != nil || !strings.HasPrefix(string(line), "ready") {
		t.Fatalf("live writer: %q %v", line, err)
	}
	go io.Copy(io.Discard, pr)
	for i := range 5 {
		time.Sleep(7 * time.Millisecond)
		arch, res := exportTo(t, a, "live")
		if !res.Manifest.Online || res.Manifest.Holder == nil {
			t.Fatalf("export %d: not online: %+v", i, res.Manifest)
		}
		b := filepath.Join(t.TempDir(), "B")
		ir, err := importFile(t, arch, b, ImportOptions{})
		if err != nil {
			t.Fatalf("import %d: %v", i, err)
		}
		if ir.Counts.Imported != 1 {
			t.Fatalf("%+v", ir.Counts)
		}
	}
}

// TestImportLocked: runtime.lock held by another holder gives ErrLocked
// after verification, with nothing written.
func TestImportLocked(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	arch, _ := exportTo(t, a, rep.Find(fixtures.CaseBasic).ID)
	b, _ := fixtureStore(t, 11)
	lock, err := store.Open(context.Background(), b, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "runtime"}})
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	before := treeHash(t, b)
	_, err = importFile(t, arch, b, ImportOptions{})
	if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("got %v", err)
	}
	if treeHash(t, b) != before {
		t.Fatalf("changed:\n%s", listTree(b))
	}
}

// TestStaleStaging: the staging directory of a killed import is removed by
// the next import; a live one is left alone.
func TestStaleStaging(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	arch, _ := exportTo(t, a, rep.Find(fixtures.CaseBasic).ID)
	b := t.TempDir()
	// What a killed import leaves: its lock file, free, and a tree.
	dead := filepath.Join(b, stagingName+"-0123456789ab.tmp")
	if err := os.MkdirAll(filepath.Join(dead, "tree", "conversations"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dead, ".lock"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	live, err := archive.NewStaging(b, stagingName)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Remove()
	if _, err := importFile(t, arch, b, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(dead); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stale staging directory left: %v", err)
	}
	if _, err := os.Lstat(live.Tree()); err != nil {
		t.Fatalf("live staging directory removed: %v", err)
	}
}

func TestMapCwd(t *testing.T) {
	maps := []CwdMapping{{From: "/home/dev", To: "/srv/a"}, {From: "/home/dev/src", To: "/work"}, {From: "/x", To: "/"}}
	for _, c := range []struct{ in, want string }{
		{"/home/dev/src/app", "/work/app"},
		{"/home/dev/src", "/work"},
		{"/home/dev/docs", "/srv/a/docs"},
		{"/home/developer", "/home/developer"},
		{"/x/y", "/y"},
		{"/other", "/other"},
	} {
		got, _ := mapCwd(maps, c.in)
		if got != c.want {
			t.Errorf("%s: got %s, want %s", c.in, got, c.want)
		}
	}
	if got, ok := mapCwd([]CwdMapping{{From: "/", To: "/new"}}, "/a/b"); !ok || got != "/new/a/b" {
		t.Errorf("root mapping: %s", got)
	}
	for _, bad := range []string{"a=b", "/a", "/a=rel", "rel=/a"} {
		if _, err := ParseCwdMapping(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if m, err := ParseCwdMapping("/a/=/b/c/"); err != nil || m != (CwdMapping{From: "/a", To: "/b/c"}) {
		t.Errorf("%+v %v", m, err)
	}
	// A library caller's relative mapping is refused before anything is read.
	_, err := importInto(context.Background(), strings.NewReader("not an archive"), filepath.Join(t.TempDir(), "data"),
		ImportOptions{Archive: "x.tar.zst", MapCwd: []CwdMapping{{From: "/a", To: "rel"}}})
	if err == nil || !strings.Contains(err.Error(), "cwd mapping /a=rel: both must be absolute paths") {
		t.Errorf("relative mapping: %v", err)
	}
}

// TestExportKeepsTheLinesOfATornFrame: a compressed session log whose last
// frame lost its checksum holds that frame's lines as events. Export
// archives them (in a frame of their own), import checks and places a log
// that reads as the source does with no torn tail, and once the source's
// writer has repaired the tail (its lines in a frame it compressed
// itself), the next import finds the store's copy behind, not diverged.
func TestExportKeepsTheLinesOfATornFrame(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	var c *fixtures.Conversation
	var logPath string
	for _, cv := range exportable(rep) {
		for _, l := range cv.Logs {
			if logPath == "" && l.SessionID != "" && l.Compression == convlog.Zstd && l.Version == convlog.CurrentVersion && l.Expect == fixtures.ExpectValid {
				// The report names the generated store; a is a copy.
				rel := l.Path[strings.LastIndex(l.Path, string(filepath.Separator)+store.ConversationsDirName+string(filepath.Separator))+1:]
				c, logPath = &cv, filepath.Join(a, rel)
			}
		}
	}
	if logPath == "" {
		t.Fatal("the store has no compressed v4 session log")
	}
	linesOf := func(p string) []string {
		t.Helper()
		r, err := convlog.Open(p, convlog.ReaderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		var out []string
		for e, err := range r.Events() {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(e.Raw))
		}
		if p != logPath && r.Stats().TornTail {
			t.Fatalf("%s: torn tail", p)
		}
		return out
	}
	want := linesOf(logPath)
	data, _ := os.ReadFile(logPath)
	os.WriteFile(logPath, data[:len(data)-2], 0o600)

	arch, res := exportTo(t, a, c.ID)
	name, _ := filepath.Rel(a, logPath)
	var entry *File
	for i := range res.Manifest.Files {
		if res.Manifest.Files[i].Name == filepath.ToSlash(name) {
			entry = &res.Manifest.Files[i]
		}
	}
	if entry == nil || entry.Events != int64(len(want)) || entry.LeftOut == 0 || entry.Committed != entry.Size {
		t.Fatalf("manifest entry %+v for %s, want %d events", entry, name, len(want))
	}
	b := filepath.Join(t.TempDir(), "B")
	if _, err := importFile(t, arch, b, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := linesOf(filepath.Join(b, name)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("imported %d events, the source reads %d", len(got), len(want))
	}

	// The source's writer repairs the tail and appends.
	w, err := convlog.OpenAppend(logPath, convlog.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A log-only event: the turn it would follow has ended, and a copy of
	// its last event would break the turn's path.
	last := lastEvent(t, filepath.Join(b, name))
	if err := w.Append([]convlog.Event{{Type: "session/title", Time: last.Time, Data: []byte(`{"title":"grown","messageSeqs":[],"source":{"kind":"user"}}`)}}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	arch2, _ := exportTo(t, a, c.ID)
	ir, err := importFile(t, arch2, b, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := planOf(t, ir, c.ID); p.Action != ActionUpdate {
		t.Fatalf("second import: %s (%s), want %s", p.Action, p.Detail, ActionUpdate)
	}
	if got := linesOf(filepath.Join(b, name)); len(got) != len(want)+1 {
		t.Fatalf("updated log holds %d events, want %d", len(got), len(want)+1)
	}
}

// TestExportLeavesOutAMisnamedConversationLog: a conversation directory
// whose conversation log names another conversation is not exported (the
// store does not read it, and an import would refuse the archive).
func TestExportLeavesOutAMisnamedConversationLog(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	basic := rep.Find(fixtures.CaseBasic).ID
	from, err := reader(t, a).ConversationPath(basic)
	if err != nil {
		t.Fatal(err)
	}
	copyTree(t, from, filepath.Join(filepath.Dir(from), "impostor"))
	_, res := exportTo(t, a, "impostor", basic)
	if !res.Partial() || len(res.Manifest.Conversations) != 1 || res.Manifest.Problems[0].ID != "impostor" ||
		!strings.Contains(res.Manifest.Problems[0].Reason, "names id") {
		t.Fatalf("%+v", res.Manifest)
	}
}

// changed reports whether the import wrote (or would write) to the store.
func changed(r *ImportResult) bool {
	c := r.Counts
	return c.Imported+c.Updated+c.Replaced+c.CwdMapped > 0
}

// TestExportReplaysATornConversationLog: a conversation log ending in a
// torn line or frame is exported up to its committed prefix, and the
// manifest describes what that prefix replays, as the import checks.
func TestExportReplaysATornConversationLog(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	torn := map[convlog.Compression]string{}
	var ids []string
	for _, c := range exportable(rep) {
		for _, l := range c.Logs {
			if _, ok := torn[l.Compression]; !ok && l.SessionID == "" && l.Version == convlog.CurrentVersion && l.Expect == fixtures.ExpectValid {
				rel := l.Path[strings.LastIndex(l.Path, string(filepath.Separator)+store.ConversationsDirName+string(filepath.Separator))+1:]
				torn[l.Compression] = rel
				ids = append(ids, c.ID)
			}
		}
	}
	if len(torn) != 2 {
		t.Fatalf("the store lacks a plain or a compressed v4 conversation log: %v", torn)
	}
	for _, rel := range torn {
		p := filepath.Join(a, rel)
		data, _ := os.ReadFile(p)
		os.WriteFile(p, data[:len(data)-2], 0o600)
	}
	arch, res := exportTo(t, a, ids...)
	found := 0
	for _, f := range res.Manifest.Files {
		for _, rel := range torn {
			if f.Name == filepath.ToSlash(rel) {
				found++
				if f.LeftOut == 0 {
					t.Errorf("%s: nothing left out of a torn log: %+v", rel, f)
				}
			}
		}
	}
	if found != len(torn) {
		t.Fatalf("%d of the %d torn conversation logs exported: %+v", found, len(torn), res.Manifest.Problems)
	}
	got, err := importFile(t, arch, filepath.Join(t.TempDir(), "B"), ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := reader(t, a)
	for _, c := range res.Manifest.Conversations {
		info, err := src.ReadConversation(c.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p := planOf(t, got, c.ID); p.Title != c.Title || c.Title != info.Title || c.Cwd != info.Cwd {
			t.Errorf("%s: title %q, cwd %q in the manifest; imported %q; the store reads %q, %q", c.ID, c.Title, c.Cwd, p.Title, info.Title, info.Cwd)
		}
	}
}
