package dshroot

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestMain lets the test binary be the second process that holds a
// session.lock: DSHROOT_HOLD=<session dir> locks it, creates .held beside
// it and waits for .release.
func TestMain(m *testing.M) {
	if dir := os.Getenv("DSHROOT_HOLD"); dir != "" {
		r, _ := Open(filepath.Dir(filepath.Dir(dir)))
		l, err := r.LockSession(&Session{Dir: dir, ID: filepath.Base(dir)})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.WriteFile(filepath.Join(filepath.Dir(dir), ".held"), nil, 0o600)
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), ".release")); err == nil {
				break
			}
		}
		l.Release()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// hold starts a second process holding dir's session.lock and returns a
// function that makes it let go and waits for it.
func hold(t *testing.T, dir string) func() {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "DSHROOT_HOLD="+dir)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	held := filepath.Join(filepath.Dir(dir), ".held")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(held); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("the holder never took the lock")
		}
	}
	return func() {
		os.WriteFile(filepath.Join(filepath.Dir(dir), ".release"), nil, 0o600)
		if err := cmd.Wait(); err != nil {
			t.Errorf("holder: %v", err)
		}
		os.Remove(held)
		os.Remove(filepath.Join(filepath.Dir(dir), ".release"))
	}
}

func TestLockSession(t *testing.T) {
	root := t.TempDir()
	session(t, root, 3, "s", "/p", "")
	r, _ := Open(root)
	s := &Session{Dir: filepath.Join(root, "--p--", "s"), ID: "s"}
	lockPath := filepath.Join(s.Dir, LockFileName)

	// Free: taken, and the file is created 0600 whatever the umask.
	l, err := r.LockSession(s)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(lockPath)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || fi.Size() != 0 {
		t.Fatalf("session.lock: %v %v", fi, err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	if err := l.Release(); err != nil {
		t.Fatal("a second release:", err)
	}
	// Never deleted.
	if _, err := os.Lstat(lockPath); err != nil {
		t.Fatal("released lock file removed:", err)
	}

	// Held by another process: an *OwnedError at once, wrapping ErrOwned.
	release := hold(t, s.Dir)
	start := time.Now()
	_, err = r.LockSession(s)
	var owned *OwnedError
	if !errors.As(err, &owned) || !errors.Is(err, ErrOwned) || owned.Path != lockPath || owned.ID != "s" {
		release()
		t.Fatalf("held lock: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("a held lock was waited for (%s)", time.Since(start))
	}
	release()
	// Free again once the holder let go.
	l, err = r.LockSession(s)
	if err != nil {
		t.Fatal("after the holder let go:", err)
	}
	l.Release()

	// A session.lock that is a symbolic link or a directory is refused;
	// nothing is created through the link.
	target := filepath.Join(t.TempDir(), "target")
	os.Remove(lockPath)
	os.Symlink(target, lockPath)
	if _, err := r.LockSession(s); err == nil {
		t.Fatal("locked through a symbolic link")
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatal("created the link's target")
	}
	os.Remove(lockPath)
	os.Mkdir(lockPath, 0o700)
	if _, err := r.LockSession(s); err == nil {
		t.Fatal("locked a directory")
	}
}
