package durable

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestOpenRegular(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(file, link); err != nil {
		t.Fatal(err)
	}
	dangling := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "nowhere"), dangling); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	haveFifo := syscall.Mkfifo(fifo, 0o600) == nil
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		path string
		flag int
		want error // nil: opens
	}{
		{file, os.O_RDONLY, nil},
		{file, os.O_RDWR, nil},
		{link, os.O_RDONLY, ErrSymlink},
		{link, os.O_RDWR, ErrSymlink},
		{dangling, os.O_RDWR, ErrSymlink},
		{fifo, os.O_RDONLY, ErrNotRegular},
		{fifo, os.O_RDWR, ErrNotRegular},
		{sub, os.O_RDONLY, ErrNotRegular},
		{sub, os.O_RDWR, ErrNotRegular},
		{filepath.Join(dir, "missing"), os.O_RDONLY, fs.ErrNotExist},
	}
	for _, c := range cases {
		if c.path == fifo && !haveFifo {
			continue
		}
		done := make(chan error, 1)
		go func() {
			f, err := OpenRegular(c.path, c.flag)
			if err == nil {
				f.Close()
			}
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("OpenRegular(%s) blocked", c.path)
		}
		switch {
		case c.want == nil && err != nil:
			t.Errorf("OpenRegular(%s, %#x): %v", c.path, c.flag, err)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("OpenRegular(%s, %#x): %v, want %v", c.path, c.flag, err, c.want)
		}
	}
	if _, err := OpenRegular(file, os.O_RDWR|os.O_TRUNC); err == nil {
		t.Error("OpenRegular accepted O_TRUNC")
	}
	if got, _ := os.ReadFile(file); string(got) != "keep" {
		t.Errorf("the file behind the link changed: %q", got)
	}
}

func TestCreateExcl(t *testing.T) {
	dir := t.TempDir()
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	p := filepath.Join(dir, "new")
	f, err := CreateExcl(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, _ := os.Lstat(p); fi.Mode().Perm() != FileMode {
		t.Errorf("mode %v, want %v", fi.Mode().Perm(), FileMode)
	}
	if _, err := CreateExcl(p); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second CreateExcl: %v, want ErrExist", err)
	}
	target := filepath.Join(dir, "target")
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateExcl(link); !errors.Is(err, ErrSymlink) {
		t.Errorf("CreateExcl through a dangling link: %v, want ErrSymlink", err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CreateExcl created the link's target: %v", err)
	}
}
