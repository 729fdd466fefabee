package store

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/convkit/convkit/internal/termtext"
)

// Ids become file names with DSH's encodeSegment escaping, per UTF-16 code
// unit so names stay byte-identical to DSH's: [A-Za-z0-9._-] stays, every
// other unit becomes "~" and 4 uppercase hex digits. Decoding accepts only the
// canonical spelling, so no two names mean the same id.

// metadataEscaped is EncodeBase("metadata"): escaping the first letter keeps
// a session named "metadata" apart from the conversation log.
const metadataEscaped = "~006Detadata"

// EncodeSegment encodes id as a directory name exactly like DSH
// encodeSegment. "." and ".." are escaped because they are not names.
func EncodeSegment(id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	switch id {
	case ".":
		return "~002E", nil
	case "..":
		return "~002E~002E", nil
	}
	return escape(id, false), nil
}

// DecodeSegment inverts EncodeSegment and refuses every name EncodeSegment
// would not have produced.
func DecodeSegment(name string) (string, error) {
	id, ok := unescape(name)
	if ok {
		if enc, err := EncodeSegment(id); err == nil && enc == name {
			return id, nil
		}
	}
	return "", fmt.Errorf("noncanonical directory name %s", termtext.Quote(name))
}

// EncodeBase encodes id as the base of a log file name. Unlike EncodeSegment
// it escapes every '.', so "<base>[.vN].jsonl[.zst]" parses one way, and it
// spells the id "metadata" as "~006Detadata" so no session log can be taken
// for the conversation log (base ConversationLogBase).
func EncodeBase(id string) (string, error) {
	if err := checkID(id); err != nil {
		return "", err
	}
	if id == ConversationLogBase {
		return metadataEscaped, nil
	}
	return escape(id, true), nil
}

// DecodeBase inverts EncodeBase and refuses every name EncodeBase would not
// have produced, including the conversation log's base "metadata".
func DecodeBase(name string) (string, error) {
	id, ok := unescape(name)
	if ok {
		if enc, err := EncodeBase(id); err == nil && enc == name {
			return id, nil
		}
	}
	return "", fmt.Errorf("noncanonical log file base %s", termtext.Quote(name))
}

func checkID(id string) error {
	if id == "" {
		return errors.New("cannot encode an empty path segment")
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("cannot encode id %s: not valid UTF-8", termtext.Quote(id))
	}
	return nil
}

func literal(u uint16, escapeDot bool) bool {
	switch {
	case 'A' <= u && u <= 'Z', 'a' <= u && u <= 'z', '0' <= u && u <= '9':
		return true
	case u == '-' || u == '_':
		return true
	case u == '.':
		return !escapeDot
	}
	return false
}

const hexUpper = "0123456789ABCDEF"

func escape(id string, escapeDot bool) string {
	var b strings.Builder
	b.Grow(len(id))
	for _, u := range utf16.Encode([]rune(id)) {
		if literal(u, escapeDot) {
			b.WriteByte(byte(u))
			continue
		}
		b.WriteByte('~')
		b.WriteByte(hexUpper[u>>12])
		b.WriteByte(hexUpper[u>>8&0xF])
		b.WriteByte(hexUpper[u>>4&0xF])
		b.WriteByte(hexUpper[u&0xF])
	}
	return b.String()
}

// unescape replaces each "~XXXX" (uppercase hex) by its UTF-16 unit and
// decodes the result. It is lenient (lone surrogates become U+FFFD, other
// bytes pass through); callers re-encode and compare to reject every
// noncanonical spelling.
func unescape(name string) (string, bool) {
	if !utf8.ValidString(name) {
		return "", false
	}
	units := make([]uint16, 0, len(name))
	for i := 0; i < len(name); {
		if name[i] == '~' {
			if i+5 > len(name) {
				return "", false
			}
			var u uint16
			for _, c := range []byte(name[i+1 : i+5]) {
				d := strings.IndexByte(hexUpper, c)
				if d < 0 {
					return "", false
				}
				u = u<<4 | uint16(d)
			}
			units = append(units, u)
			i += 5
			continue
		}
		r, size := utf8.DecodeRuneInString(name[i:])
		units = utf16.AppendRune(units, r)
		i += size
	}
	return string(utf16.Decode(units)), true
}
