package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
)

// listDir is every path under dir (relative), or nil when dir is missing.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel)
		return nil
	})
	sort.Strings(out)
	return out
}

// TestOpenModes: what each mode of Open does with each kind of directory,
// with runtime.lock free or held by a second process.
func TestOpenModes(t *testing.T) {
	layouts := map[string]func(t *testing.T, dir string){
		"missing": func(*testing.T, string) {},
		"empty":   func(t *testing.T, dir string) { mustNil(t, os.Mkdir(dir, 0o700)) },
		"config only": func(t *testing.T, dir string) {
			mustNil(t, os.Mkdir(dir, 0o700))
			mustNil(t, os.WriteFile(filepath.Join(dir, ConfigFileName), []byte("[agents.coder]\n"), 0o600))
			mustNil(t, os.WriteFile(filepath.Join(dir, ".x.0123456789abcdef.tmp"), nil, 0o600))
		},
		"another directory": func(t *testing.T, dir string) {
			mustNil(t, os.MkdirAll(filepath.Join(dir, "src"), 0o700))
			mustNil(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o600))
		},
		"a file": func(t *testing.T, dir string) { mustNil(t, os.WriteFile(dir, []byte("x"), 0o600)) },
		"store": func(t *testing.T, dir string) {
			s, err := Open(context.Background(), dir, OpenOptions{Lock: LockOptions{Mode: LockExclusive}, Create: CreateAlways})
			mustNil(t, err)
			mustNil(t, s.CreateConversation("c", "/p", nil, nil))
			mustNil(t, s.Close())
		},
		"store with conversations only": func(t *testing.T, dir string) {
			mustNil(t, os.MkdirAll(filepath.Join(dir, ConversationsDirName), 0o700))
		},
	}
	const (
		ok       = "ok"
		noStore  = "no store"
		locked   = "locked"
		notADir  = "not a directory"
		anyError = "error"
	)
	tests := []struct {
		layout string
		held   bool // a second process holds runtime.lock
		mode   LockMode
		create Create
		want   string
		// exists, writable and online are checked when want is ok;
		// created: the directory became a store on disk.
		exists, writable, online, created bool
	}{
		// Read-only: creates nothing, never blocks the runtime.
		{layout: "missing", mode: LockNone, want: noStore},
		{layout: "empty", mode: LockNone, want: noStore},
		{layout: "another directory", mode: LockNone, want: noStore},
		{layout: "a file", mode: LockNone, want: noStore},
		{layout: "store", mode: LockNone, want: ok, exists: true},
		{layout: "store with conversations only", mode: LockNone, want: ok, exists: true},
		{layout: "store", held: true, mode: LockNone, want: ok, exists: true},
		{layout: "missing", mode: LockNone, create: CreateAlways, want: ok},
		{layout: "empty", mode: LockNone, create: CreateIfEmpty, want: ok},
		{layout: "config only", mode: LockNone, create: CreateIfEmpty, want: ok},
		{layout: "another directory", mode: LockNone, create: CreateIfEmpty, want: noStore},

		// Exclusive: the runtime and writing commands.
		{layout: "missing", mode: LockExclusive, want: noStore},
		{layout: "empty", mode: LockExclusive, want: noStore},
		{layout: "another directory", mode: LockExclusive, want: noStore},
		{layout: "store", mode: LockExclusive, want: ok, exists: true, writable: true},
		{layout: "store with conversations only", mode: LockExclusive, want: ok, exists: true, writable: true},
		{layout: "store", held: true, mode: LockExclusive, want: locked},
		{layout: "missing", mode: LockExclusive, create: CreateAlways, want: ok, exists: true, writable: true, created: true},
		{layout: "another directory", mode: LockExclusive, create: CreateAlways, want: ok, exists: true, writable: true, created: true},
		{layout: "a file", mode: LockExclusive, create: CreateAlways, want: noStore},
		{layout: "missing", mode: LockExclusive, create: CreateIfEmpty, want: ok, exists: true, writable: true, created: true},
		{layout: "empty", mode: LockExclusive, create: CreateIfEmpty, want: ok, exists: true, writable: true, created: true},
		{layout: "config only", mode: LockExclusive, create: CreateIfEmpty, want: ok, exists: true, writable: true, created: true},
		{layout: "another directory", mode: LockExclusive, create: CreateIfEmpty, want: noStore},
		{layout: "store", held: true, mode: LockExclusive, create: CreateAlways, want: locked},

		// If free: online backup.
		{layout: "store", mode: LockIfFree, want: ok, exists: true, writable: true},
		{layout: "store", held: true, mode: LockIfFree, want: ok, exists: true, online: true},
		{layout: "missing", mode: LockIfFree, want: noStore},
		{layout: "another directory", mode: LockIfFree, want: noStore},
		{layout: "missing", mode: LockIfFree, create: CreateAlways, want: anyError},
	}
	for _, tt := range tests {
		name := strings.Join([]string{tt.layout, map[bool]string{true: "held", false: "free"}[tt.held], []string{"none", "exclusive", "if-free"}[tt.mode],
			[]string{"never", "always", "if-empty"}[tt.create]}, ", ")
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			layouts[tt.layout](t, dir)
			var pid int
			if tt.held {
				pid = startHolder(t, dir).Process.Pid
			}
			before := listDir(t, dir)
			s, err := Open(context.Background(), dir, OpenOptions{Lock: LockOptions{Mode: tt.mode, Command: "convkit test"}, Create: tt.create})
			switch tt.want {
			case ok:
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				defer s.Close()
			case noStore:
				if !errors.Is(err, ErrNoStore) || !strings.HasPrefix(err.Error(), "no store at "+dir+": ") {
					t.Fatalf("Open: %v, want no store at %s", err, dir)
				}
			case locked:
				var le *LockedError
				if !errors.Is(err, ErrLocked) || !errors.As(err, &le) || le.Holder == nil || le.Holder.PID != pid {
					t.Fatalf("Open: %v, want runtime.lock held by %d", err, pid)
				}
			case anyError:
				if err == nil {
					t.Fatal("Open succeeded")
				}
			}
			if tt.want != ok {
				if after := listDir(t, dir); !equalStrings(after, before) {
					t.Fatalf("a refused Open changed %s: %v -> %v", dir, before, after)
				}
				return
			}
			if exists, _ := IsStore(dir); exists != tt.exists || s.Writable() != tt.writable {
				t.Errorf("exists %v writable %v, want %v %v", exists, s.Writable(), tt.exists, tt.writable)
			}
			online, holder, why := s.Online()
			if online != tt.online {
				t.Errorf("online %v, want %v", online, tt.online)
			}
			if tt.online && (holder == nil || holder.PID != pid || why != nil) {
				t.Errorf("online: holder %+v, why %v; want pid %d", holder, why, pid)
			}
			if tt.writable {
				st, err := LockStatus(dir)
				if err != nil || !st.Held || st.Holder == nil || st.Holder.PID != os.Getpid() {
					t.Errorf("lock status %+v %v, want held by this process", st, err)
				}
			}
			after := listDir(t, dir)
			switch {
			case tt.created:
				if fi, err := os.Stat(lockPath(dir)); err != nil || fi.Mode().Perm() != 0o600 {
					t.Errorf("created store: runtime.lock %v %v", fi, err)
				}
				if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
					t.Errorf("created store: directory %v %v", fi, err)
				}
			case !tt.writable && !equalStrings(after, before):
				t.Errorf("a read-only Open changed %s: %v -> %v", dir, before, after)
			}
		})
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestOpenIfFreeReadOnlyFS: on a file system mounted read-only, a store
// opened LockIfFree goes online, saying why, and a writer is refused.
func TestOpenIfFreeReadOnlyFS(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s, err := Open(context.Background(), dir, OpenOptions{Lock: LockOptions{Mode: LockExclusive}, Create: CreateAlways})
	mustNil(t, err)
	mustNil(t, s.Close())
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	if err := syscall.Mount("", dir, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("read-only remount: %v", err)
	}
	ro, err := Open(context.Background(), dir, OpenOptions{Lock: LockOptions{Mode: LockIfFree}})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	online, holder, why := ro.Online()
	if !online || holder != nil || why == nil || ro.Writable() {
		t.Fatalf("online %v holder %v why %v writable %v", online, holder, why, ro.Writable())
	}
	if _, err := Open(context.Background(), dir, OpenOptions{Lock: LockOptions{Mode: LockExclusive}}); err == nil || errors.Is(err, ErrLocked) {
		t.Fatalf("exclusive Open on a read-only file system: %v", err)
	}
}
