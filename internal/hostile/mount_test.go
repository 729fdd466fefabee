package hostile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// noMount makes the cases act as if mount(2) were not permitted, to run
// their fallbacks: HOSTILE_NO_MOUNT=1 go test ./internal/hostile/.
var noMount = os.Getenv("HOSTILE_NO_MOUNT") != ""

// mountTmpfs mounts a tmpfs of size bytes at dir (made if missing) and
// unmounts it when the case ends (before t.TempDir's removal, which was
// registered earlier). It reports why not when mounting is not permitted.
func mountTmpfs(t *testing.T, dir string, size int64) error {
	t.Helper()
	if noMount {
		return errors.New("HOSTILE_NO_MOUNT is set")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	t.Cleanup(func() { unmount(t, dir) })
	return nil
}

// bindReadOnly makes dir read-only by bind-mounting it onto itself and
// remounting the bind read-only; unmounted when the case ends.
func bindReadOnly(t *testing.T, dir string) error {
	t.Helper()
	if noMount {
		return errors.New("HOSTILE_NO_MOUNT is set")
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s: %w", dir, err)
	}
	t.Cleanup(func() { unmount(t, dir) })
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""); err != nil {
		return fmt.Errorf("remount %s read-only: %w", dir, err)
	}
	return nil
}

func unmount(t *testing.T, dir string) {
	if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
		t.Errorf("unmount %s: %v", dir, err)
	}
}

// readOnly makes dir read-only for the command: a read-only bind mount when
// mount(2) is permitted (as root, chmod would not stop a write), else, for
// a user that is not root, mode 0500 on every directory and 0400 on every
// file under dir (restored when the case ends). {rofs} is the error either
// gives. It logs which, or skips the case saying why neither works.
func (f *fx) readOnly(dir string) {
	t := f.t
	t.Helper()
	err := bindReadOnly(t, dir)
	if err == nil {
		t.Logf("read-only: a read-only bind mount of %s", dir)
		f.vars["rofs"] = "read-only file system"
		return
	}
	if os.Geteuid() == 0 {
		t.Skipf("cannot make %s read-only: %v; and as root chmod does not stop writes", dir, err)
	}
	type saved struct {
		p    string
		mode os.FileMode
	}
	var modes []saved
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && (d.IsDir() || d.Type().IsRegular()) {
			if fi, err := d.Info(); err == nil {
				modes = append(modes, saved{p, fi.Mode().Perm()})
			}
		}
		return nil
	})
	// Files first, then directories from the deepest.
	for i := len(modes) - 1; i >= 0; i-- {
		m := modes[i]
		ro := os.FileMode(0o400)
		if fi, err := os.Lstat(m.p); err == nil && fi.IsDir() {
			ro = 0o500
		}
		if err := os.Chmod(m.p, ro); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, m := range modes {
			os.Chmod(m.p, m.mode)
		}
	})
	t.Logf("read-only: mode 0500 on the directories and 0400 on the files of %s (mount: %v)", dir, err)
	f.vars["rofs"] = "permission denied"
}

// fill writes dir/filler until the file system is full.
func fill(t *testing.T, dir string) {
	t.Helper()
	fh, err := os.OpenFile(filepath.Join(dir, "filler"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := fh.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	// The last pages, a byte at a time.
	for {
		if _, err := fh.Write(buf[:1]); err != nil {
			break
		}
	}
	if err := fh.Sync(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
}
