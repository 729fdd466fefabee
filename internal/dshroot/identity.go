package dshroot

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/termtext"
)

// IdentityError refuses a log whose header names another place than the
// one it sits in. It wraps convlog.ErrCorrupt and convlog.ErrIdentity.
type IdentityError struct {
	Path    string // the log
	ID, Cwd string // the header's
	// Expected is where the header's id and cwd say the log belongs.
	// When the opener refused the header for naming another session than
	// the directory does, it is "" and Session is the directory's session.
	Expected string
	Session  string
}

func (e *IdentityError) Error() string {
	if e.Expected == "" {
		return fmt.Sprintf("corrupt session log %s: header id %s is not the session %s its session directory names", termtext.Quote(e.Path), termtext.Quote(e.ID), termtext.Quote(e.Session))
	}
	return fmt.Sprintf("corrupt session log %s: header id %s and cwd identify %s", termtext.Quote(e.Path), termtext.Quote(e.ID), termtext.Quote(e.Expected))
}

func (e *IdentityError) Unwrap() []error { return []error{convlog.ErrCorrupt, convlog.ErrIdentity} }

// CheckLog checks that the log at path, a generation in a session directory of
// this root, is the session its place names: convlog's opener refuses a header
// of another session (ReaderOptions.WantID), then CheckIdentity checks the
// cwd; either refusal is an *IdentityError.
func (r *Root) CheckLog(path string) error {
	id, err := DecodeSessionDir(filepath.Base(filepath.Dir(path)))
	if err != nil {
		return err
	}
	lr, err := convlog.Open(path, convlog.ReaderOptions{WantID: id})
	var ie *convlog.IdentityError
	if errors.As(err, &ie) {
		return &IdentityError{Path: path, ID: ie.ID, Session: id}
	}
	if err != nil {
		return err
	}
	defer lr.Close()
	return r.CheckIdentity(path, lr.Header())
}

// GenerationPath is where generation version of the session id, whose
// header has the working directory cwd, lives under the root: the project
// directory of cwd, the session directory of id, the generation's name
// (compressed with suffix, "" meaning ".zstd").
func (r *Root) GenerationPath(cwd, id string, version int, c convlog.Compression, suffix string) (string, error) {
	dir, err := SessionDir(id)
	if err != nil {
		return "", err
	}
	return filepath.Join(r.dir, ProjectDir(cwd), dir, GenerationName(version, c, suffix)), nil
}

// CheckIdentity refuses the header h of the log at path unless its id names
// the session directory and its working directory the project directory, so a
// log copied to another session's place is not read as that session.
func (r *Root) CheckIdentity(path string, h *convlog.Header) error {
	n, ok := ParseGeneration(filepath.Base(path))
	if !ok {
		return fmt.Errorf("%s: not a generation file name", path)
	}
	want, err := r.GenerationPath(h.Cwd, h.ID, h.Version, n.Compression, n.Suffix)
	if err != nil {
		want = filepath.Join(r.dir, ProjectDir(h.Cwd), "(no session directory: "+err.Error()+")")
	}
	if err == nil && filepath.Clean(path) == want {
		return nil
	}
	return &IdentityError{Path: path, ID: h.ID, Cwd: h.Cwd, Expected: want}
}
