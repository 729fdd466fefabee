package dshroot

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"unicode/utf16"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// Names in the layout.
const (
	NoCwdDir       = "_no-cwd"      // the project of sessions without a cwd
	GenerationBase = "session"      // of every generation file name
	LockFileName   = "session.lock" // per session, in its directory
)

const maxSlugUnits = 251 // UTF-16 units of the slug a project name keeps

// ProjectDir is the project directory name of a session whose header has the
// working directory cwd: NoCwdDir without one, else "--<slug>--", the slug
// built per UTF-16 unit ('/', '\' and ':' runs become '-', [A-Za-z0-9._-]
// stay, others '~' and 4 uppercase hex), leading '-' stripped, "root" when
// empty, cut to 251 units. The mapping is lossy.
func ProjectDir(cwd string) string {
	if cwd == "" {
		return NoCwdDir
	}
	var b strings.Builder
	sepRun := false
	for _, u := range utf16.Encode([]rune(cwd)) {
		switch {
		case u == '/' || u == '\\' || u == ':':
			if !sepRun {
				b.WriteByte('-')
			}
			sepRun = true
			continue
		case 'A' <= u && u <= 'Z', 'a' <= u && u <= 'z', '0' <= u && u <= '9', u == '.', u == '_', u == '-':
			b.WriteByte(byte(u))
		default:
			fmt.Fprintf(&b, "~%04X", u)
		}
		sepRun = false
	}
	slug := strings.TrimLeft(b.String(), "-")
	if slug == "" {
		slug = "root"
	}
	if len(slug) > maxSlugUnits { // ASCII: bytes are units
		slug = slug[:maxSlugUnits]
	}
	return "--" + slug + "--"
}

// IsProjectDirName reports whether name is NoCwdDir or "--<slug>--".
func IsProjectDirName(name string) bool {
	if name == NoCwdDir {
		return true
	}
	return len(name) > 4 && strings.HasPrefix(name, "--") && strings.HasSuffix(name, "--")
}

// SessionDir is id's session directory name (DSH's encodeSegment).
func SessionDir(id string) (string, error) { return store.EncodeSegment(id) }

// DecodeSessionDir inverts SessionDir, refusing names it would not produce.
func DecodeSessionDir(name string) (string, error) {
	id, err := store.DecodeSegment(name)
	if err != nil {
		return "", fmt.Errorf("noncanonical Session directory name %s", termtext.Quote(name))
	}
	return id, nil
}

// ParseGeneration parses a generation file name, session[.vN].jsonl[.zstd|.zst].
func ParseGeneration(name string) (convlog.Name, bool) {
	n, ok := convlog.ParseName(name)
	if !ok || n.Base != GenerationBase {
		return convlog.Name{}, false
	}
	return n, true
}

// GenerationName is the file name of generation version (a zstd suffix "" is ".zstd").
func GenerationName(version int, c convlog.Compression, suffix string) string {
	if c == convlog.Zstd && suffix == "" {
		suffix = convlog.ZstdSuffix
	}
	return convlog.Name{Base: GenerationBase, Version: version, Compression: c, Suffix: suffix}.String()
}

// logShaped reports whether a name ends like a log (*.jsonl[.zstd|.zst]).
func logShaped(name string) bool {
	name = strings.TrimSuffix(name, convlog.ZstdSuffix)
	name = strings.TrimSuffix(name, convlog.ZstSuffix)
	return strings.HasSuffix(name, convlog.JSONLSuffix)
}

// IdentityError refuses a log whose header names another place.
type IdentityError struct {
	Path    string // the log
	ID, Cwd string // the header's
	// Expected is where id and cwd say the log belongs; "": not the directory's Session.
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

// CheckLog refuses (*IdentityError) a log at path that is not the session its place names.
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

// GenerationPath is where generation version of session id with cwd lives.
func (r *Root) GenerationPath(cwd, id string, version int, c convlog.Compression, suffix string) (string, error) {
	dir, err := SessionDir(id)
	if err != nil {
		return "", err
	}
	return filepath.Join(r.dir, ProjectDir(cwd), dir, GenerationName(version, c, suffix)), nil
}

// CheckIdentity refuses a header h whose id and cwd do not name path's
// directories (a copy is not that session).
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
