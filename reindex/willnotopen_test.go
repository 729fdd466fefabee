package reindex

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/index"
	"github.com/convkit/convkit/store"
)

// createAt creates a conversation working in cwd with one root session.
func createAt(t *testing.T, s *store.Store, id, cwd, agent, model string) {
	t.Helper()
	c := store.NewConversation{ID: id, Cwd: cwd, SessionID: "root", Agent: agent, Model: model}
	if err := fixtures.Converse(s, c, "hello", "hi"); err != nil {
		t.Fatal(err)
	}
}

// copyDir copies a conversation directory as an operator does by hand.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func byID(list []WillNotOpen) map[string][]string {
	m := map[string][]string{}
	for _, w := range list {
		m[w.ID] = w.Reasons
	}
	return m
}

// TestWillNotOpen: after conversations are moved into a store by hand,
// reindex, its check, the incremental update and list say which will not
// open on this machine, and why: a missing working directory (or one that
// is not a directory), an agent or model the runtime configuration lacks,
// a fork source that did not come along. They are indexed all the same.
func TestWillNotOpen(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "data")
	here := t.TempDir()
	file := filepath.Join(here, "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	later := filepath.Join(here, "made-later")
	s := openStore(t, dir)
	createAt(t, s, "opens", here, "coder", "m1")
	createAt(t, s, "no-cwd", later, "coder", "m1")
	createAt(t, s, "cwd-file", file, "coder", "m1")
	createAt(t, s, "no-model", here, "coder", "m2")
	s.Close()

	// Moved by hand from another machine: a conversation log as its
	// runtime wrote it, and a fork made after a compaction without the
	// conversation it reads older history from.
	moved := filepath.Join(store.ConversationsDir(dir), "moved")
	if err := os.MkdirAll(moved, 0o700); err != nil {
		t.Fatal(err)
	}
	log := `{"type":"conversation","version":4,"id":"moved","createdAt":1788269998900}
{"type":"conversation/created","seq":0,"time":1788269998900,"data":{"cwd":"/srv/elsewhere/project","agents":["reviewer"],"models":["m1"]}}
{"type":"conversation/renamed","seq":1,"time":1788269998901,"data":{"title":"Moved by hand"}}
`
	if err := os.WriteFile(filepath.Join(moved, "metadata.v4.jsonl"), []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other")
	rep, err := fixtures.Generate(other, fixtures.Options{Seed: 3, Conversations: 18})
	if err != nil {
		t.Fatal(err)
	}
	fork := rep.Find(fixtures.CaseForkAfterCompaction)
	copyDir(t, fork.Dir, filepath.Join(store.ConversationsDir(dir), filepath.Base(fork.Dir)))

	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte("[agents.coder]\n[models.m1]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	m, warning, err := store.LoadMachine(cfg, true)
	if err != nil || warning != "" {
		t.Fatal(err, warning)
	}

	s = openStore(t, dir)
	var events []store.Item
	res, err := Run(ctx, s, Options{Machine: m, OnEvent: func(e store.Item) {
		if e.Kind == store.ItemWillNotOpen {
			events = append(events, e)
		}
	}})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if res.Indexed != 6 || len(res.Skipped) != 0 || len(res.Warnings) != 0 {
		t.Fatalf("indexed %d, skipped %+v, warnings %q; want all 6 indexed", res.Indexed, res.Skipped, res.Warnings)
	}
	got := byID(res.WillNotOpen)
	want := map[string][]string{
		"no-cwd":   {"working directory " + later + " does not exist here"},
		"cwd-file": {"working directory " + file + " is not a directory"},
		"no-model": {`model "m2" is not configured in ` + cfg},
		"moved":    {"working directory /srv/elsewhere/project does not exist here", `agent "reviewer" is not configured in ` + cfg},
	}
	for id, w := range want {
		if !reflect.DeepEqual(got[id], w) {
			t.Errorf("%s: reasons %q, want %q", id, got[id], w)
		}
	}
	if !slices.Contains(got[fork.ID], `fork source "`+fork.DependsOn[0]+`" is missing: this conversation reads older history from it`) {
		t.Errorf("the fork: reasons %q, want its missing source %s named", got[fork.ID], fork.DependsOn[0])
	}
	if _, ok := got["opens"]; ok || len(got) != 5 || len(events) != 5 {
		t.Fatalf("will not open: %q (%d events); want the five above", got, len(events))
	}
	for _, e := range events {
		if e.Reason != strings.Join(got[e.ID], "; ") {
			t.Errorf("%s: reported %q, the result says %q", e.ID, e.Reason, got[e.ID])
		}
	}

	db, err := index.Open(filepath.Join(dir, store.IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if r, err := db.One(ctx, "no-model"); err != nil || !reflect.DeepEqual(r.WillNotOpen, want["no-model"]) {
		t.Fatalf("the index records %+v, %v", r, err)
	}
	rows, err := db.List(ctx, index.ListOptions{All: true, WillNotOpen: true})
	if err != nil || len(rows) != 5 {
		t.Fatalf("index listing: %+v, %v", rows, err)
	}

	// The check agrees, until the machine changes: the missing working
	// directory is made, and the row is stale until it is updated.
	ck, err := Check(ctx, reader(t, dir), Options{Machine: m})
	if err != nil || ck.Drift() || !reflect.DeepEqual(byID(ck.WillNotOpen), got) {
		t.Fatalf("check: %+v, %v", ck, err)
	}
	if err := os.Mkdir(later, 0o700); err != nil {
		t.Fatal(err)
	}
	m2, _, _ := store.LoadMachine(cfg, true) // a new run looks again
	ck, err = Check(ctx, reader(t, dir), Options{Machine: m2})
	if err != nil || len(ck.Differences) != 1 || ck.Differences[0].ID != "no-cwd" || !strings.Contains(ck.Differences[0].Detail, "will not open") {
		t.Fatalf("check after the directory was made: %+v, %v", ck.Differences, err)
	}
	if _, err := Update(ctx, db, reader(t, dir), "no-cwd", UpdateOptions{Machine: m2}); err != nil {
		t.Fatal(err)
	}
	if r, err := db.One(ctx, "no-cwd"); err != nil || len(r.WillNotOpen) != 0 {
		t.Fatalf("after the update: %+v, %v", r, err)
	}

	// From the logs, list checks as it goes.
	if err := os.Remove(filepath.Join(dir, store.IndexFileName)); err != nil {
		t.Fatal(err)
	}
	l, err := List(ctx, reader(t, dir), ListOptions{All: true, WillNotOpen: true, Machine: m2})
	if err != nil || l.Source != "logs" || len(l.Conversations) != 4 || len(l.Warnings) != 0 {
		t.Fatalf("list from the logs: %+v, %v", l, err)
	}

	// Without a configuration, agents and models are not checked, and the
	// run says so once.
	none := filepath.Join(t.TempDir(), "none.toml")
	m3, warning, err := store.LoadMachine(none, false)
	if err != nil || !strings.Contains(warning, "agents and models were not checked") {
		t.Fatal(err, warning)
	}
	s = openStore(t, dir)
	res, err = Run(ctx, s, Options{Machine: m3})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	got = byID(res.WillNotOpen)
	if len(res.Warnings) != 1 || !strings.Contains(res.Warnings[0], none) || got["no-model"] != nil ||
		!reflect.DeepEqual(got["moved"], want["moved"][:1]) {
		t.Fatalf("without a configuration: warnings %q, will not open %q", res.Warnings, got)
	}
	if _, _, err := store.LoadMachine(none, true); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a named configuration that is missing: %v", err)
	}
}
