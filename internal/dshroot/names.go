package dshroot

import (
	"fmt"
	"strings"
	"unicode/utf16"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// Names in the layout.
const (
	// NoCwdDir is the project directory of sessions whose header has no
	// working directory.
	NoCwdDir = "_no-cwd"
	// GenerationBase is the base of every generation file name.
	GenerationBase = "session"
	// LockFileName is the per-session lock, in the session directory.
	LockFileName = "session.lock"
)

// maxSlugUnits is how many UTF-16 code units of the slug a project
// directory name keeps.
const maxSlugUnits = 251

const hexUpper = "0123456789ABCDEF"

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
			b.WriteByte('~')
			b.WriteByte(hexUpper[u>>12])
			b.WriteByte(hexUpper[u>>8&0xF])
			b.WriteByte(hexUpper[u>>4&0xF])
			b.WriteByte(hexUpper[u&0xF])
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

// IsProjectDirName reports whether name has the shape of a project
// directory name: NoCwdDir, or "--<slug>--" with a non-empty slug.
func IsProjectDirName(name string) bool {
	if name == NoCwdDir {
		return true
	}
	return len(name) > 4 && strings.HasPrefix(name, "--") && strings.HasSuffix(name, "--")
}

// SessionDir is the name of the session directory of id: DSH's
// encodeSegment, which is the store's EncodeSegment.
func SessionDir(id string) (string, error) { return store.EncodeSegment(id) }

// DecodeSessionDir inverts SessionDir and refuses every name it would not
// have produced: `noncanonical Session directory name "<name>"`.
func DecodeSessionDir(name string) (string, error) {
	id, err := store.DecodeSegment(name)
	if err != nil {
		return "", fmt.Errorf("noncanonical Session directory name %s", termtext.Quote(name))
	}
	return id, nil
}

// ParseGeneration parses a generation file name, session.jsonl (v0) or
// session.vN.jsonl (N ≥ 1 without leading zeros), plain or with .zstd (the
// runtime's) or .zst (convkit's); anything else is not a generation.
func ParseGeneration(name string) (convlog.Name, bool) {
	n, ok := convlog.ParseName(name)
	if !ok || n.Base != GenerationBase {
		return convlog.Name{}, false
	}
	return n, true
}

// GenerationName is the file name of generation version of a session,
// compressed with the suffix given (".zstd" or ".zst"; "" means ".zstd",
// the runtime's) when c is zstd.
func GenerationName(version int, c convlog.Compression, suffix string) string {
	if c == convlog.Zstd && suffix == "" {
		suffix = convlog.ZstdSuffix
	}
	return convlog.Name{Base: GenerationBase, Version: version, Compression: c, Suffix: suffix}.String()
}

// logShaped reports whether a file name ends like a log (*.jsonl,
// *.jsonl.zstd or *.jsonl.zst), canonical or not: such a file outside a
// session directory is the flat-file layout.
func logShaped(name string) bool {
	name = strings.TrimSuffix(name, convlog.ZstdSuffix)
	name = strings.TrimSuffix(name, convlog.ZstSuffix)
	return strings.HasSuffix(name, convlog.JSONLSuffix)
}
