package termtext

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
	"testing"
)

// TestText: a system call's error wrapped by a message that names its
// file already loses its own mention; one whose file is not named before
// it keeps it.
func TestText(t *testing.T) {
	nospace := &fs.PathError{Op: "write", Path: "/d/.x.tmp", Err: syscall.ENOSPC}
	cases := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("write /d/.x.tmp: %w", nospace), "write /d/.x.tmp: write: no space left on device"},
		{fmt.Errorf("stage the successor: %w", nospace), "stage the successor: write /d/.x.tmp: no space left on device"},
		{fmt.Errorf("lock /d/runtime.lock: %w", &fs.PathError{Op: "open", Path: "/d/runtime.lock", Err: syscall.EROFS}),
			"lock /d/runtime.lock: open: read-only file system"},
		{fmt.Errorf("publish /d/b: %w", &os.LinkError{Op: "link", Old: "/d/a", New: "/d/b", Err: syscall.EEXIST}),
			"publish /d/b: link /d/a /d/b: file exists"},
		{fmt.Errorf("copy /d/a to /d/b: %w", &os.LinkError{Op: "link", Old: "/d/a", New: "/d/b", Err: syscall.EEXIST}),
			"copy /d/a to /d/b: link: file exists"},
		{errors.New("plain"), "plain"},
	}
	for _, c := range cases {
		if got := Text(c.err); got != c.want {
			t.Errorf("Text(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestReason: a reason about a file names the file once. The message of a
// format error, of an error wrapping one, of a system call's error about
// that file loses its mention of the path; other files stay.
func TestReason(t *testing.T) {
	const p = "/srv/c/x.v4.jsonl"
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"leading path", fmt.Errorf("%s: line 22 column 35, byte 8046: event is not valid JSON", p), "line 22 column 35, byte 8046: event is not valid JSON"},
		{"quoted leading path", fmt.Errorf(`"%s": refused`, p), "refused"},
		{"system call", fmt.Errorf("read the log: %w", &fs.PathError{Op: "open", Path: p, Err: syscall.EACCES}), "read the log: open: permission denied"},
		{"wrapped twice", fmt.Errorf("open %s: %w", p, &fs.PathError{Op: "open", Path: p, Err: syscall.ENOTDIR}), "open: open: not a directory"},
		{"quoted inside", fmt.Errorf(`corrupt session log "%s": header id "a" is not the session "b"`, p), `corrupt session log: header id "a" is not the session "b"`},
		{"inside", fmt.Errorf("sessions root %s is not a directory", p), "sessions root is not a directory"},
		{"another file", fmt.Errorf("/srv/c/kid.v3.jsonl: line 1, byte 0: bad header"), "/srv/c/kid.v3.jsonl: line 1, byte 0: bad header"},
		{"a longer path that begins with it", fmt.Errorf("open %s.zst: gone", p), "open " + p + ".zst: gone"},
		{"no path", errors.New("no such conversation"), "no such conversation"},
	}
	for _, c := range cases {
		if got := Reason(p, c.err); got != c.want {
			t.Errorf("%s: Reason = %q, want %q", c.name, got, c.want)
		}
	}
}
