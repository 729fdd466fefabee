package durable

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteFilePrivateAndNoOverwrite(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if fi, _ := os.Stat(d); fi.Mode().Perm() != DirMode {
			t.Errorf("%s mode %v, want %v", d, fi.Mode().Perm(), DirMode)
		}
	}
	p := filepath.Join(dir, "f")
	if err := WriteFile(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(p); fi.Mode().Perm() != FileMode {
		t.Errorf("file mode %v, want %v", fi.Mode().Perm(), FileMode)
	}
	if err := WriteFile(p, []byte("two")); !errors.Is(err, ErrExists) {
		t.Fatalf("second WriteFile: err = %v, want ErrExists", err)
	}
	if b, _ := os.ReadFile(p); string(b) != "one" {
		t.Fatalf("the existing file was overwritten: %q", b)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temporary files left: %v", ents)
	}
}

func TestCreateTempIsRecognisable(t *testing.T) {
	dir := t.TempDir()
	f, err := CreateTemp(dir, ".x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !IsTemp(filepath.Base(f.Name())) {
		t.Fatalf("%s is not recognised as temporary", f.Name())
	}
	if IsTemp("s1.v4.jsonl") {
		t.Fatal("a log name counts as temporary")
	}
}

func TestMkdirAllRefusesAFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "file")
	os.WriteFile(p, nil, 0o600)
	if err := MkdirAll(p); err == nil {
		t.Fatal("MkdirAll accepted a regular file")
	}
}
