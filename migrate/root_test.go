package migrate

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convkit/convkit/store"
)

func newStore(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	s, err := store.Open(context.Background(), dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}, Create: store.CreateAlways})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	return dir
}

func TestFindRoot(t *testing.T) {
	data := newStore(t)
	conv := store.ConversationsDir(data)
	// A store's conversations directory, present or not yet.
	for _, l := range []Layout{LayoutAuto, LayoutConvkit} {
		r, err := FindRoot(conv, l)
		if err != nil || r.Layout != LayoutConvkit || r.DataDir != data {
			t.Errorf("%s: %+v %v", l, r, err)
		}
	}
	put(t, conv, "c1/metadata.v4.jsonl", `{"type":"conversation","version":4,"id":"c1","createdAt":1}`)
	if r, err := FindRoot(conv, LayoutAuto); err != nil || r.Layout != LayoutConvkit {
		t.Errorf("with a conversation: %+v %v", r, err)
	}
	if _, err := FindRoot(conv, LayoutDSH); !errors.Is(err, errUnknownLayout) || !strings.Contains(err.Error(), "is the conversations directory of the convkit store "+data) {
		t.Errorf("--layout dsh on a store: %v", err)
	}

	dsh := t.TempDir()
	session(t, dsh, 3, "s", "/p", "")
	for _, l := range []Layout{LayoutAuto, LayoutDSH} {
		if r, err := FindRoot(dsh, l); err != nil || r.Layout != LayoutDSH || r.Dir != dsh || r.DataDir != "" {
			t.Errorf("%s: %+v %v", l, r, err)
		}
	}
	if _, err := FindRoot(dsh, LayoutConvkit); !errors.Is(err, errUnknownLayout) {
		t.Errorf("--layout convkit on a dsh root: %v", err)
	}
	// Session directories in a project directory of any name are the
	// runtime's shape too; so is a project-shaped name alone (a root of
	// flat files or links).
	other := t.TempDir()
	session(t, other, 3, "s", "", "")
	os.Rename(filepath.Join(other, "_no-cwd"), filepath.Join(other, "proj"))
	if r, err := FindRoot(other, LayoutAuto); err != nil || r.Layout != LayoutDSH {
		t.Errorf("session directories: %+v %v", r, err)
	}
	flat := t.TempDir()
	put(t, flat, "--p--/session.jsonl", hdr(0, "x", "/p", ""))
	if r, err := FindRoot(flat, LayoutAuto); err != nil || r.Layout != LayoutDSH {
		t.Errorf("a project of flat files: %+v %v", r, err)
	}

	// Empty and missing: the runtime's layout (the run reports them).
	empty := t.TempDir()
	missing := filepath.Join(empty, "missing")
	for _, d := range []string{empty, missing} {
		if r, err := FindRoot(d, LayoutAuto); err != nil || r.Layout != LayoutDSH {
			t.Errorf("%s: %+v %v", d, r, err)
		}
	}

	// Both shapes: refused, naming one entry of each.
	both := t.TempDir()
	session(t, both, 3, "s", "/p", "")
	put(t, both, "c1/metadata.v4.jsonl", `{"type":"conversation","version":4,"id":"c1","createdAt":1}`)
	_, err := FindRoot(both, LayoutAuto)
	if !errors.Is(err, errUnknownLayout) || !strings.Contains(err.Error(), "it holds both layouts: a convkit conversation directory (c1) and a DSH project directory (--p--)") {
		t.Errorf("both: %v", err)
	}
	// DSH content in a store's conversations directory: refused too.
	conv2 := store.ConversationsDir(newStore(t))
	session(t, conv2, 3, "s", "/p", "")
	if _, err := FindRoot(conv2, LayoutAuto); !errors.Is(err, errUnknownLayout) || !strings.Contains(err.Error(), "but holds a DSH project directory (--p--)") {
		t.Errorf("store with dsh: %v", err)
	}
	// convkit's shape outside a store: no lock to take, refused.
	loose := t.TempDir()
	put(t, loose, "c1/metadata.jsonl.zst", "x")
	if _, err := FindRoot(loose, LayoutAuto); !errors.Is(err, errUnknownLayout) || !strings.Contains(err.Error(), "holds convkit conversation directories (c1) but is not the conversations directory of a convkit store") {
		t.Errorf("loose convkit: %v", err)
	}
	// Neither, with files (a flat log, a link, other files): the runtime's
	// layout, as the runtime's own command takes any root; its walk fails
	// the flat log and the link.
	neither := t.TempDir()
	put(t, neither, "notes.txt", "x")
	put(t, neither, "photos/a.jpg", "x")
	put(t, neither, "legacy.jsonl", "x")
	os.Symlink(t.TempDir(), filepath.Join(neither, "linked-project"))
	if r, err := FindRoot(neither, LayoutAuto); err != nil || r.Layout != LayoutDSH {
		t.Errorf("neither: %+v %v", r, err)
	}
	// A forced layout takes such a root as it is told.
	if r, err := FindRoot(neither, LayoutDSH); err != nil || r.Layout != LayoutDSH {
		t.Errorf("forced: %+v %v", r, err)
	}
}
