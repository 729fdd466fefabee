package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// stageDir makes a directory beside the store holding one file, as a
// restore or an import stages a conversation.
func stageDir(t *testing.T, s *Store, name, content string) string {
	t.Helper()
	dir := filepath.Join(s.DataDir(), ".stage-"+name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readF(t *testing.T, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "f"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestPlaceConversation(t *testing.T) {
	at := time.Date(2026, 9, 3, 1, 2, 3, 0, time.UTC)
	dir := filepath.Join(t.TempDir(), "data")
	s, err := Open(context.Background(), dir, OpenOptions{Lock: LockOptions{Mode: LockExclusive, Command: "test"},
		Create: CreateAlways, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const id = "conv/1"
	to, err := s.ConversationPath(id)
	if err != nil {
		t.Fatal(err)
	}

	// A new conversation: nothing is moved aside.
	aside, err := s.PlaceConversation(id, stageDir(t, s, "a", "first"))
	if err != nil || aside != "" {
		t.Fatalf("place a new conversation: aside %q, %v", aside, err)
	}
	if readF(t, to) != "first" {
		t.Fatal("the staged copy is not in place")
	}

	// A copy there is moved aside, whole, named by the store's clock; a
	// second one at the same time takes the next free name.
	want := filepath.Join(dir, ReplacedDirName, filepath.Base(to)+"-20260903T010203Z")
	for i, content := range []string{"second", "third"} {
		aside, err := s.PlaceConversation(id, stageDir(t, s, content, content))
		if err != nil {
			t.Fatal(err)
		}
		w := want
		if i == 1 {
			w += "-2"
		}
		if aside != w {
			t.Fatalf("moved aside to %s, want %s", aside, w)
		}
		if readF(t, to) != content {
			t.Fatalf("%s is not in place", content)
		}
	}
	if readF(t, want) != "first" || readF(t, want+"-2") != "second" {
		t.Fatal("what was moved aside is not the old copies")
	}

	// A failed rename puts the old copy back.
	if _, err := s.PlaceConversation(id, filepath.Join(dir, ".stage-missing")); err == nil {
		t.Fatal("a missing staged directory was placed")
	}
	if readF(t, to) != "third" {
		t.Fatal("the store's copy was not put back")
	}
	if _, err := os.Lstat(want + "-3"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed placement left %s-3: %v", want, err)
	}

	// Only a store holding runtime.lock exclusively is written.
	ro, err := Open(context.Background(), dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.PlaceConversation(id, stageDir(t, s, "ro", "ro")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("a read-only store placed a conversation: %v", err)
	}
	if _, err := ro.ReplaceWith(stageDir(t, s, "ro2", "ro")); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("a read-only store was replaced: %v", err)
	}
}

func TestReplaceWith(t *testing.T) {
	at := time.Date(2026, 9, 3, 0, 0, 0, 0, time.UTC)
	parent := t.TempDir()
	dir := filepath.Join(parent, "data")
	s, err := Open(context.Background(), dir, OpenOptions{Lock: LockOptions{Mode: LockExclusive, Command: "test"},
		Create: CreateAlways, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	newDir := filepath.Join(parent, "staged")
	if err := os.Mkdir(newDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(newDir, "f"), []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A failed rename puts the old store back.
	if _, err := s.ReplaceWith(filepath.Join(parent, "missing")); err == nil {
		t.Fatal("a missing directory replaced the store")
	}
	if readF(t, dir) != "old" {
		t.Fatal("the store was not put back")
	}
	aside, err := s.ReplaceWith(newDir)
	if err != nil {
		t.Fatal(err)
	}
	if aside != dir+".replaced-20260903T000000Z" || readF(t, aside) != "old" || readF(t, dir) != "new" {
		t.Fatalf("moved aside to %s; the store holds %q", aside, readF(t, dir))
	}
}
