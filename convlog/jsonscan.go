package convlog

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// The envelope scanner walks one JSON line without building values: it checks
// the whole line's syntax (including UTF-8) and hands back the byte spans of
// the top-level members, so event data can stay raw bytes. It is the hot path
// of every read.

// maxJSONDepth bounds nesting so hostile input cannot exhaust the stack.
const maxJSONDepth = 512

// syntaxError is a JSON problem at a byte offset within one line.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string { return fmt.Sprintf("%s at column %d", e.msg, e.off+1) }

func synErr(off int, format string, args ...any) *syntaxError {
	return &syntaxError{off: off, msg: fmt.Sprintf(format, args...)}
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\r', '\n':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue returns the offset just past the JSON value starting at b[i].
func skipValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, synErr(i, "unexpected end of JSON")
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{':
		if depth >= maxJSONDepth {
			return i, synErr(i, "JSON nested deeper than %d levels", maxJSONDepth)
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return i, synErr(i, "expected a string key in object")
			}
			var err error
			if i, err = skipString(b, i); err != nil {
				return i, err
			}
			i = skipWS(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, synErr(i, "expected ':' after object key")
			}
			if i, err = skipValue(b, skipWS(b, i+1), depth+1); err != nil {
				return i, err
			}
			i = skipWS(b, i)
			if i < len(b) && b[i] == ',' {
				i = skipWS(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				return i + 1, nil
			}
			return i, synErr(i, "expected ',' or '}' in object")
		}
	case c == '[':
		if depth >= maxJSONDepth {
			return i, synErr(i, "JSON nested deeper than %d levels", maxJSONDepth)
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = skipValue(b, i, depth+1); err != nil {
				return i, err
			}
			i = skipWS(b, i)
			if i < len(b) && b[i] == ',' {
				i = skipWS(b, i+1)
				continue
			}
			if i < len(b) && b[i] == ']' {
				return i + 1, nil
			}
			return i, synErr(i, "expected ',' or ']' in array")
		}
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	default:
		return i, synErr(i, "invalid character %q looking for a JSON value", c)
	}
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	if bytes.HasPrefix(b[i:], []byte(lit)) {
		return i + len(lit), nil
	}
	return i, synErr(i, "invalid literal, expected %s", lit)
}

func skipNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return i, synErr(start, "invalid number")
	}
	switch {
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
	default:
		return i, synErr(start, "invalid number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return i, synErr(start, "invalid number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == d {
			return i, synErr(start, "invalid number")
		}
	}
	return i, nil
}

// skipString validates a JSON string starting at the opening quote: escapes,
// no raw control characters, valid UTF-8. It returns the offset past the
// closing quote.
func skipString(b []byte, i int) (int, error) {
	start := i
	i++
	for i < len(b) {
		// Skip eight plain ASCII bytes at a time: none of '"', '\\',
		// a control character or a non-ASCII byte among them. In a
		// word that holds one, go straight to the first: the lowest
		// byte each test flags is exact (only bytes above it can be
		// flagged wrongly), and most strings are short.
		for i+8 <= len(b) {
			v := binary.LittleEndian.Uint64(b[i:])
			if m := (hasLess(v, 0x20) | hasZero(v^0x2222222222222222) | hasZero(v^0x5C5C5C5C5C5C5C5C) | v) & 0x8080808080808080; m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				break
			}
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(b) {
				return i, synErr(i, "unterminated string escape")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return i, synErr(i, "truncated \\u escape")
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return i, synErr(i, "invalid \\u escape")
					}
				}
				i += 6
			default:
				return i, synErr(i, "invalid escape \\%c in string", b[i+1])
			}
		case c < 0x20:
			return i, synErr(i, "control character 0x%02x in string", c)
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return i, synErr(i, "invalid UTF-8 in string")
			}
			i += size
		}
	}
	return start, synErr(start, "unterminated string")
}

// hasZero sets the high bit of each zero byte of v (and possibly of bytes
// above one, which only sends the caller to the byte-wise path).
func hasZero(v uint64) uint64 { return (v - 0x0101010101010101) &^ v & 0x8080808080808080 }

// hasLess sets the high bit of bytes below n (n <= 128).
func hasLess(v uint64, n byte) uint64 {
	return (v - 0x0101010101010101*uint64(n)) &^ v & 0x8080808080808080
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// member is one top-level member of a JSON object: the decoded key and the
// raw value span within the scanned line.
type member struct {
	key        string
	keyOff     int
	valStart   int
	valEnd     int
	valueBytes []byte
}

// scanObject checks that b is exactly one JSON object (surrounding white
// space allowed) and returns its top-level members in order, in one pass.
// Duplicate keys are refused: JSON readers disagree on which one wins.
func scanObject(b []byte, members []member) ([]member, error) {
	return scanMembers(b, members, skipValue)
}

// scanTrusted is scanObject for bytes already validated (a member of a
// validated line): values are skipped without checking them again.
func scanTrusted(b []byte, members []member) ([]member, error) {
	return scanMembers(b, members, skipTrusted)
}

func scanMembers(b []byte, members []member, skip func([]byte, int, int) (int, error)) ([]member, error) {
	members = members[:0]
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return members, synErr(i, "not a JSON object")
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return members, synErr(i, "expected a string key in object")
			}
			ks := i
			ke, err := skipString(b, i)
			if err != nil {
				return members, err
			}
			key, err := decodeKey(b[ks:ke])
			if err != nil {
				return members, synErr(ks, "%v", err)
			}
			for _, m := range members {
				if m.key == key {
					return members, synErr(ks, "duplicate member %q", key)
				}
			}
			i = skipWS(b, ke)
			if i >= len(b) || b[i] != ':' {
				return members, synErr(i, "expected ':' after object key")
			}
			vs := skipWS(b, i+1)
			ve, err := skip(b, vs, 1)
			if err != nil {
				return members, err
			}
			members = append(members, member{key: key, keyOff: ks, valStart: vs, valEnd: ve, valueBytes: b[vs:ve]})
			i = skipWS(b, ve)
			if i < len(b) && b[i] == ',' {
				i = skipWS(b, i+1)
				continue
			}
			if i < len(b) && b[i] == '}' {
				i++
				break
			}
			return members, synErr(i, "expected ',' or '}' in object")
		}
	}
	if j := skipWS(b, i); j != len(b) {
		return members, synErr(j, "unexpected data after the JSON object")
	}
	return members, nil
}

// skipTrusted skips one value of already validated JSON: strings by their
// closing quote, containers by bracket depth outside strings.
func skipTrusted(b []byte, i, _ int) (int, error) {
	if i >= len(b) {
		return i, synErr(i, "unexpected end of JSON")
	}
	switch b[i] {
	case '"':
		return skipStringTrusted(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				e, err := skipStringTrusted(b, i)
				if err != nil {
					return i, err
				}
				i = e
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return i, synErr(i, "unexpected end of JSON")
	default:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return i, nil
			}
			i++
		}
		return i, nil
	}
}

func skipStringTrusted(b []byte, i int) (int, error) {
	j := i + 1
	for {
		// Most strings are short: look for the quote a word at a time
		// (the lowest byte hasZero flags is exact) before handing a
		// long one to IndexByte.
		k := -1
		for end := min(j+32, len(b)); j+8 <= end; j += 8 {
			if m := hasZero(binary.LittleEndian.Uint64(b[j:]) ^ 0x2222222222222222); m != 0 {
				k = bits.TrailingZeros64(m) >> 3
				break
			}
		}
		if k < 0 {
			k = bytes.IndexByte(b[j:], '"')
		}
		if k < 0 {
			return i, synErr(i, "unterminated string")
		}
		j += k
		// The quote is escaped when an odd number of backslashes precede it.
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, nil
		}
		j++
	}
}

// commonKey returns the usual member names as constants, so that scanning
// them allocates nothing for their names ("" for another name).
func commonKey(b []byte) string {
	switch string(b) {
	case "type":
		return "type"
	case "seq":
		return "seq"
	case "time":
		return "time"
	case "data":
		return "data"
	case "ignorable":
		return "ignorable"
	case "surfaceOp":
		return "surfaceOp"
	case "sourceEventSeqs":
		return "sourceEventSeqs"
	case "seq0":
		return "seq0"
	case "time0":
		return "time0"
	case "message":
		return "message"
	case "role":
		return "role"
	case "content":
		return "content"
	case "source":
		return "source"
	case "kind":
		return "kind"
	case "id":
		return "id"
	case "text":
		return "text"
	case "turn":
		return "turn"
	case "step":
		return "step"
	case "stream":
		return "stream"
	case "usage":
		return "usage"
	case "callId":
		return "callId"
	case "toolCallId":
		return "toolCallId"
	case "isError":
		return "isError"
	case "name":
		return "name"
	case "arguments":
		return "arguments"
	case "reason":
		return "reason"
	case "op":
		return "op"
	case "startSeq":
		return "startSeq"
	case "endSeq":
		return "endSeq"
	case "provider":
		return "provider"
	case "model":
		return "model"
	case "header":
		return "header"
	case "sessionId":
		return "sessionId"
	case "outcome":
		return "outcome"
	case "title":
		return "title"
	case "cwd":
		return "cwd"
	case "agents":
		return "agents"
	case "models":
		return "models"
	case "agent":
		return "agent"
	case "parentSession":
		return "parentSession"
	case "version":
		return "version"
	case "createdAt":
		return "createdAt"
	case "index":
		return "index"
	case "chunk":
		return "chunk"
	case "dt":
		return "dt"
	case "texts":
		return "texts"
	case "args":
		return "args"
	case "config":
		return "config"
	case "delegationDepth":
		return "delegationDepth"
	case "origin":
		return "origin"
	case "isSeeded":
		return "isSeeded"
	case "seedLength":
		return "seedLength"
	case "agentPreset":
		return "agentPreset"
	case "messageSeqs":
		return "messageSeqs"
	}
	return ""
}

func decodeKey(raw []byte) (string, error) {
	if bytes.IndexByte(raw, '\\') < 0 {
		if k := commonKey(raw[1 : len(raw)-1]); k != "" {
			return k, nil
		}
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", err
	}
	return s, nil
}

// parseSafeInt parses a JSON integer literal within ±(2^53-1). Fractions,
// exponents and "-0" are refused: every integer field of the format is
// written as a plain integer.
func parseSafeInt(raw []byte) (int64, bool) {
	if len(raw) == 0 || len(raw) > 17 {
		return 0, false
	}
	if string(raw) == "-0" {
		return 0, false
	}
	for k, c := range raw {
		if !(c >= '0' && c <= '9') && !(k == 0 && c == '-') {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || v > maxSafeInteger || v < -maxSafeInteger {
		return 0, false
	}
	return v, true
}

// parseJSONString decodes a raw JSON string value.
func parseJSONString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}
