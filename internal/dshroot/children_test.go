package dshroot

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/convkit/convkit/convlog/upgrade"
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

// A copy of a child's session directory beside it (an operator's backup,
// cp -r k1 k1-bak) names k1 from k1-bak: it is no child, is left out of
// the candidates, and is reported once however often the index is asked.
func TestChildCandidatesIgnoreCopies(t *testing.T) {
	root := t.TempDir()
	session(t, root, 3, "parent", "/p", "")
	k1 := session(t, root, 3, "k1", "/p", "parent", descriptor)
	body, err := os.ReadFile(k1)
	if err != nil {
		t.Fatal(err)
	}
	put(t, root, "--p--/k1-bak/session.v3.jsonl", strings.TrimSuffix(string(body), "\n"))
	// A copy in another project directory: its cwd names --p--.
	put(t, root, "--q--/k1/session.v3.jsonl", strings.TrimSuffix(string(body), "\n"))
	r, _ := Open(root)
	var reported []string
	r.OnIgnoredChild(func(dir, parent string, err error) {
		var ie *IdentityError
		if !errors.As(err, &ie) || parent != "parent" {
			t.Errorf("%s: parent %q, %v", dir, parent, err)
		}
		rel, _ := filepath.Rel(root, dir)
		reported = append(reported, rel)
	})
	for range 2 {
		got, err := r.ChildCandidates("parent")
		if err != nil {
			t.Fatal(err)
		}
		if s := rels(t, root, got); s != "--p--/k1/session.v3.jsonl" {
			t.Fatalf("candidates: %s", s)
		}
		// A change of the copy's directory reads it again; it is still
		// reported once.
		put(t, root, "--p--/k1-bak/notes.txt", "x")
	}
	sort.Strings(reported)
	if strings.Join(reported, " ") != "--p--/k1-bak --q--/k1" {
		t.Fatalf("reported %q", reported)
	}
	facts, err := upgrade.CollectChildrenFrom(r, "parent")
	if err != nil || len(facts) != 1 || facts[0].SourcePath != k1 {
		t.Fatalf("%+v %v", facts, err)
	}
}
