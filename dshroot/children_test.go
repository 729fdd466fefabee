package dshroot

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/convkit/convkit/upgrade"
)

const descriptor = `{"type":"subagent/descriptor","seq":%d,"time":%d,"data":{"version":2,"provider":"p","mode":"one-shot","label":"L"}}`

func rels(t *testing.T, root string, paths []string) string {
	t.Helper()
	var out []string
	for _, p := range paths {
		r, _ := filepath.Rel(root, p)
		out = append(out, r)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// Children are found across the whole root: in other session directories,
// in other project directories, by the header's parentSession; a session
// added later, or a child's newer generation, is seen by the next call.
func TestChildCandidates(t *testing.T) {
	root := t.TempDir()
	session(t, root, 3, "parent", "/p", "")
	session(t, root, 3, "k1", "/p", "parent", descriptor)
	session(t, root, 2, "k2", "/elsewhere", "parent")
	session(t, root, 3, "fork", "/p", "")         // no parent
	session(t, root, 3, "other", "/p", "someone") // another parent
	put(t, root, "--p--/junk/session.v3.jsonl", "not a header")
	r, _ := Open(root)

	got, err := r.ChildCandidates("parent")
	if err != nil {
		t.Fatal(err)
	}
	if s := rels(t, root, got); s != "--elsewhere--/k2/session.v2.jsonl --p--/k1/session.v3.jsonl" {
		t.Fatalf("candidates: %s", s)
	}
	facts, err := upgrade.CollectChildrenFrom(r, "parent")
	if err != nil || len(facts) != 2 {
		t.Fatalf("%+v %v", facts, err)
	}
	byID := map[string]upgrade.ChildFact{}
	for _, f := range facts {
		byID[f.ChildID] = f
	}
	if f := byID["k1"]; f.DescriptorCount != 1 || f.ChildCreatedAt != 1002 {
		t.Errorf("k1: %+v", f)
	}
	if f := byID["k2"]; f.DescriptorCount != 0 || f.Warning != "" {
		t.Errorf("k2: %+v", f)
	}

	// A new child in a new project directory, one in an existing project,
	// and k1's successor: all seen by the next call; a removed child goes.
	session(t, root, 3, "k3", "/new", "parent")
	session(t, root, 3, "k4", "/p", "parent")
	put(t, root, "--p--/k1/session.v4.jsonl", hdr(4, "k1", "/p", "parent"))
	os.RemoveAll(filepath.Join(root, "--elsewhere--", "k2"))
	got, err = r.ChildCandidates("parent")
	if err != nil {
		t.Fatal(err)
	}
	if s := rels(t, root, got); s != "--new--/k3/session.v3.jsonl --p--/k1/session.v4.jsonl --p--/k4/session.v3.jsonl" {
		t.Fatalf("after changes: %s", s)
	}

	// A session directory indexed before its first generation existed is
	// read again once it has one.
	if err := os.MkdirAll(filepath.Join(root, "--p--", "k5"), 0o700); err != nil {
		t.Fatal(err)
	}
	r.ChildCandidates("parent")
	session(t, root, 3, "k5", "/p", "parent")
	got, _ = r.ChildCandidates("parent")
	if s := rels(t, root, got); !strings.Contains(s, "--p--/k5/session.v3.jsonl") {
		t.Fatalf("late first generation: %s", s)
	}
	// A child added to a project directory alone (the root unchanged).
	session(t, root, 3, "k6", "/p", "parent")
	got, _ = r.ChildCandidates("parent")
	if s := rels(t, root, got); !strings.Contains(s, "--p--/k6/session.v3.jsonl") {
		t.Fatalf("new child in an existing project: %s", s)
	}

	// Links are not traversed to find children.
	elsewhere := t.TempDir()
	session(t, elsewhere, 3, "far", "/far", "parent")
	os.Symlink(filepath.Join(elsewhere, "--far--"), filepath.Join(root, "--far--"))
	got, _ = r.ChildCandidates("parent")
	if s := rels(t, root, got); strings.Contains(s, "far") {
		t.Fatalf("followed a link: %s", s)
	}
}
