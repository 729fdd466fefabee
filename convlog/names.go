package convlog

import (
	"cmp"
	"strconv"
	"strings"

	"github.com/convkit/convkit/internal/rawjson"
)

// Compression says how a log file's bytes are stored.
type Compression int

const (
	// Plain logs are JSON Lines as text.
	Plain Compression = iota
	// Zstd logs are a concatenation of independent, checksummed zstd frames.
	Zstd
)

func (c Compression) String() string {
	if c == Zstd {
		return "zstd"
	}
	return "none"
}

// Suffixes of log file names. New compressed logs are written with ZstSuffix;
// ZstdSuffix (the runtime's historical spelling) is read too.
const (
	JSONLSuffix = ".jsonl"
	ZstSuffix   = ".zst"
	ZstdSuffix  = ".zstd"
)

// Name is a parsed generation file name: <base>[.vN].jsonl[.zst|.zstd].
type Name struct {
	Base        string
	Version     int
	Compression Compression
	// Suffix is the compression suffix as found: "", ".zst" or ".zstd".
	Suffix string
}

// String renders the canonical file name (compressed names use the suffix the
// name was parsed with, or .zst for a new name).
func (n Name) String() string {
	s := n.Base
	if n.Version > 0 {
		s += ".v" + strconv.Itoa(n.Version)
	}
	s += JSONLSuffix
	if n.Compression == Zstd {
		s += cmp.Or(n.Suffix, ZstSuffix)
	}
	return s
}

// FileName returns the name a new generation of base is written under.
func FileName(base string, version int, c Compression) string {
	return Name{Base: base, Version: version, Compression: c}.String()
}

// ParseName parses a generation file name. It reports false for anything that
// is not a canonical generation name: temporary files, "x.v0.jsonl",
// "x.v01.jsonl", "x.V1.jsonl", versions beyond 2^53-1, a base holding a dot.
func ParseName(name string) (Name, bool) {
	var n Name
	rest := name
	for _, sfx := range []string{ZstSuffix, ZstdSuffix} {
		if r, ok := strings.CutSuffix(rest, sfx); ok {
			n.Compression, n.Suffix, rest = Zstd, sfx, r
			break
		}
	}
	rest, ok := strings.CutSuffix(rest, JSONLSuffix)
	if !ok {
		return Name{}, false
	}
	base, ver, hasVer := strings.Cut(rest, ".")
	if base == "" || strings.Contains(ver, ".") {
		return Name{}, false
	}
	n.Base = base
	if !hasVer {
		return n, true
	}
	v, ok := parseVersionToken(ver)
	if !ok {
		return Name{}, false
	}
	n.Version = v
	return n, true
}

// parseVersionToken accepts "vN" with N a safe integer >= 1 and no leading zero.
func parseVersionToken(s string) (int, bool) {
	if len(s) < 2 || len(s) > 17 || s[0] != 'v' || s[1] < '1' || s[1] > '9' {
		return 0, false
	}
	v, err := strconv.ParseInt(s[1:], 10, 64)
	return int(v), err == nil && v <= rawjson.MaxSafeInt
}
