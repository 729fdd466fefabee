package durable

import (
	"errors"
	"fmt"
	"os"
)

// ErrSymlink is wrapped when a path to write or lock is a symbolic link:
// never followed, so a link cannot redirect a write outside the store.
var ErrSymlink = errors.New("symbolic links are never followed")

var ErrNotRegular = errors.New("not a regular file")

// OpenRegular opens the existing file at path with flag (never O_CREATE or
// O_TRUNC), never following a link in the last component, never blocking,
// and refusing anything but a regular file, checked on the descriptor.
func OpenRegular(path string, flag int) (*os.File, error) {
	if flag&(os.O_CREATE|os.O_TRUNC) != 0 {
		return nil, fmt.Errorf("open %s: OpenRegular never creates or truncates", path)
	}
	f, err := os.OpenFile(path, flag|NoFollowFlags, 0)
	if err != nil {
		return nil, openError(path, err)
	}
	if err := checkRegular(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// CreateExcl creates a new file at path, mode 0600 whatever the umask; it
// fails if anything exists there, a symbolic link included.
func CreateExcl(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL|NoFollowFlags, FileMode)
	if err != nil {
		return nil, openError(path, err)
	}
	if err := f.Chmod(FileMode); err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	return f, nil
}

func checkRegular(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("fstat %s: %w", f.Name(), err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: %w (%s)", f.Name(), ErrNotRegular, Kind(fi.Mode()))
	}
	return nil
}

// Kind names what a file of mode m is, for messages ("a FIFO").
func Kind(m os.FileMode) string {
	switch {
	case m.IsRegular():
		return "a regular file"
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeDevice != 0:
		return "a device"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "not a file"
}

// openError wraps ErrSymlink or ErrNotRegular when the path is one.
func openError(path string, err error) error {
	if isLoop(err) {
		return fmt.Errorf("%s is a symbolic link: %w", path, ErrSymlink)
	}
	if errors.Is(err, os.ErrNotExist) {
		return err
	}
	if fi, lerr := os.Lstat(path); lerr == nil {
		switch m := fi.Mode(); {
		case m&os.ModeSymlink != 0:
			return fmt.Errorf("%s is a symbolic link: %w", path, ErrSymlink)
		case !m.IsRegular():
			return fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, Kind(m))
		}
	}
	return err
}

// OpenInput opens a path the user named for reading, following a link but
// never blocking: a FIFO without a writer reads as empty.
func OpenInput(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|InputFlags, 0)
}

// PrivateDir sets the directory dir to mode 0700 whatever the umask,
// through a descriptor opened without following a link.
func PrivateDir(dir string) error {
	d, err := os.OpenFile(dir, os.O_RDONLY|NoFollowFlags|DirFlag, 0)
	if err != nil {
		return openError(dir, err)
	}
	defer d.Close()
	fi, err := d.Stat()
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", dir)
	}
	if err := d.Chmod(DirMode); err != nil {
		return fmt.Errorf("chmod %s: %w", dir, err)
	}
	return nil
}
