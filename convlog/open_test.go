package convlog

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/convkit/convkit/internal/durable"
)

// TestOpenRefusesWhatIsNotALogFile: Open and OpenFile never follow a
// symbolic link, never block on a FIFO, and refuse every file that is not
// regular, naming it; a regular file behind a link is not read.
func TestOpenRefusesWhatIsNotALogFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "s1.v4.jsonl")
	if err := os.WriteFile(good, plainLog(hdrV4, lTurnStart(0)), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link.v4.jsonl")
	os.Symlink(good, link)
	devLink := filepath.Join(dir, "zero.v4.jsonl")
	os.Symlink("/dev/zero", devLink)
	fifo := filepath.Join(dir, "fifo.v4.jsonl")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock.v4.jsonl")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	sub := filepath.Join(dir, "dir.v4.jsonl")
	os.Mkdir(sub, 0o700)
	for _, tc := range []struct {
		path, msg string
		cause     error
	}{
		{link, "a symbolic link: symbolic links are never followed", durable.ErrSymlink},
		{devLink, "a symbolic link: symbolic links are never followed", durable.ErrSymlink},
		{fifo, "not a regular file (a FIFO)", durable.ErrNotRegular},
		{sock, "not a regular file (a socket)", durable.ErrNotRegular},
		{sub, "not a regular file (a directory)", durable.ErrNotRegular},
		{"/dev/null", "not a regular file (a device)", durable.ErrNotRegular},
	} {
		done := make(chan error, 2)
		go func() {
			_, err := OpenFile(tc.path)
			done <- err
			_, err = Open(tc.path, ReaderOptions{})
			done <- err
		}()
		for range 2 {
			select {
			case err := <-done:
				var fe *FormatError
				if !errors.As(err, &fe) || !errors.Is(err, tc.cause) || !errors.Is(err, ErrCorrupt) || err.Error() != tc.path+": byte 0: "+tc.msg {
					t.Errorf("%s: %v", filepath.Base(tc.path), err)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s: the open blocks", tc.path)
			}
		}
	}
	if _, err := OpenFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	f, err := OpenFile(good)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want, _ := os.ReadFile(good)
	buf := make([]byte, f.Size())
	if n, err := f.ReadAt(buf, 0); n != len(want) || err != nil || string(buf) != string(want) {
		t.Errorf("read %d bytes, %v", n, err)
	}
	if fi, _ := os.Lstat(good); !f.ModTime().Equal(fi.ModTime()) || f.ModTime().UnixNano() != fi.ModTime().UnixNano() {
		t.Errorf("time %v, file's %v", f.ModTime(), fi.ModTime())
	}
}

// TestOpenWantID: the header must name the log the place implies, with the
// texts the store always used.
func TestOpenWantID(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s1.v4.jsonl")
	os.WriteFile(p, plainLog(hdrV4, lTurnStart(0)), 0o600)
	conv := filepath.Join(dir, "metadata.v4.jsonl")
	os.WriteFile(conv, plainLog(`{"type":"conversation","version":4,"id":"c1","createdAt":1}`), 0o600)
	for _, tc := range []struct {
		path    string
		typ, id string
		msg     string
	}{
		{p, "", "s1", ""},
		{p, SessionLog, "s1", ""},
		{p, "", "s2", `session log header (line 1) names id "s1", but its file name is session "s2"`},
		{conv, "", "s2", `header (line 1) is not a session header (type "conversation"); its file name is session "s2"`},
		{conv, ConversationLog, "c1", ""},
		{conv, ConversationLog, "c2", `conversation log names id "c1", but its directory is "c2"`},
		{p, ConversationLog, "c1", `not a conversation log (header type "session")`},
	} {
		r, err := Open(tc.path, ReaderOptions{WantID: tc.id, WantType: tc.typ})
		if tc.msg == "" {
			if err != nil {
				t.Errorf("%s %s: %v", tc.typ, tc.id, err)
			} else {
				r.Close()
			}
			continue
		}
		var ie *IdentityError
		if !errors.As(err, &ie) || !errors.Is(err, ErrIdentity) || ie.Msg != tc.msg || err.Error() != tc.path+": "+tc.msg {
			t.Errorf("%s %s: %v", tc.typ, tc.id, err)
		}
		h, _ := ParseHeader(tc.path, []byte(strings.SplitN(string(mustRead(t, tc.path)), "\n", 2)[0]), -1)
		if err := CheckIdentity(h, tc.typ, tc.id); err == nil || err.Error() != tc.msg {
			t.Errorf("CheckIdentity: %v", err)
		}
	}
}

// TestOpenAppendNeverFollowsALink: a symbolic link in a log's place is
// refused for appending, and the file behind it is not written.
func TestOpenAppendNeverFollowsALink(t *testing.T) {
	dir := t.TempDir()
	evs := sampleEvents()
	target := writeLog(t, dir, "real.v4.jsonl", Plain, evs)
	before := mustRead(t, target)
	link := filepath.Join(dir, "s1.v4.jsonl")
	os.Symlink(target, link)
	if w, err := OpenAppend(link, WriterOptions{}); err == nil || !errors.Is(err, durable.ErrSymlink) {
		if w != nil {
			w.Append(evs[:1])
			w.Close()
		}
		t.Fatalf("OpenAppend through a link: %v", err)
	}
	if string(mustRead(t, target)) != string(before) {
		t.Fatal("the file behind the link changed")
	}
}
