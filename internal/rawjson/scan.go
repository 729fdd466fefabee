// Package rawjson is the one raw JSON scanner of convkit: it checks JSON
// syntax without building values, hands back the byte spans of an object's
// members and an array's elements, decodes strings, parses the log format's
// integers and writes strings the way the runtime writes them. The log
// reader (convlog), the upgrade chain and the store's fast replay use it and
// no other JSON walker, so they cannot disagree on what a line holds.
//
// # Two kinds of input
//
// Valid, Object and Skip check everything: syntax, UTF-8 in strings,
// nesting (at most MaxDepth levels) and duplicate keys (refused in every
// object, at every depth). Members, EachMember, EachElement and Next take
// bytes those checks already passed (a member of a validated line) and only
// find boundaries; on other bytes they return an error or stop early, never
// panic, but do not diagnose.
//
// # Numbers and strings
//
// Int parses an integer of the format: the plain decimal literal of a
// JavaScript safe integer, within ±(2^53−1). A fraction, an exponent, "-0",
// a leading zero, a plus sign or a quoted number is refused: JSON.stringify
// never writes a safe integer so, and a reader that took 1e0 or 1.0 for 1
// would read a log differently from one that did not.
//
// String decodes a JSON string as encoding/json does (an unpaired surrogate
// escape becomes U+FFFD).
package rawjson

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"unicode/utf8"
)

// MaxDepth bounds nesting, so that hostile input cannot exhaust the stack.
const MaxDepth = 512

// SyntaxError is a JSON problem at a byte offset of the scanned bytes.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%s at column %d", e.Msg, e.Offset+1) }

func synErr(off int, format string, args ...any) *SyntaxError {
	return &SyntaxError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// SkipSpace returns the offset of the first byte at or after i that is not
// JSON white space.
func SkipSpace(b []byte, i int) int {
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

// Valid reports whether b is exactly one JSON value (white space around it
// allowed) that passes every check of Skip.
func Valid(b []byte) error {
	i := SkipSpace(b, 0)
	end, err := Skip(b, i)
	if err != nil {
		return err
	}
	if j := SkipSpace(b, end); j != len(b) {
		return synErr(j, "unexpected data after the JSON value")
	}
	return nil
}

// Skip checks the JSON value starting at b[i] and returns the offset just
// past it.
func Skip(b []byte, i int) (int, error) { return skipValue(b, i, 0) }

func skipValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, synErr(i, "unexpected end of JSON")
	}
	switch c := b[i]; {
	case c == '"':
		end, _, err := scanString(b, i)
		return end, err
	case c == '{':
		return skipObject(b, i, depth)
	case c == '[':
		if depth >= MaxDepth {
			return i, synErr(i, "JSON nested deeper than %d levels", MaxDepth)
		}
		i = SkipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, nil
		}
		for {
			var err error
			if i, err = skipValue(b, i, depth+1); err != nil {
				return i, err
			}
			i = SkipSpace(b, i)
			if i < len(b) && b[i] == ',' {
				i = SkipSpace(b, i+1)
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

// skipObject checks the object at b[i] ('{'), its keys unique.
func skipObject(b []byte, i, depth int) (int, error) {
	if depth >= MaxDepth {
		return i, synErr(i, "JSON nested deeper than %d levels", MaxDepth)
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	var keys keySet
	for {
		if i >= len(b) || b[i] != '"' {
			return i, synErr(i, "expected a string key in object")
		}
		ks := i
		ke, esc, err := scanString(b, i)
		if err != nil {
			return ke, err
		}
		if keys.add(b, ks, ke, esc) {
			return ks, duplicate(ks, b[ks:ke])
		}
		i = SkipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return i, synErr(i, "expected ':' after object key")
		}
		if i, err = skipValue(b, SkipSpace(b, i+1), depth+1); err != nil {
			return i, err
		}
		i = SkipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = SkipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		return i, synErr(i, "expected ',' or '}' in object")
	}
}

func duplicate(off int, rawKey []byte) *SyntaxError {
	k, _ := String(rawKey)
	return synErr(off, "duplicate member %q", k)
}

// keySet finds a repeated key in one object. Keys are compared as decoded
// ("a" and "\u0061" are one key); the first few are kept inline as spans of
// the scanned bytes, the rest in a map, so an object of many keys costs
// linear time.
type keySet struct {
	n      int
	inline [10]struct{ s, e int } // raw keys without escapes, quotes stripped
	esc    []string               // decoded keys that held escapes
	more   map[string]struct{}
}

// add records the key b[ks:ke] (with its quotes) and reports whether the
// object had it already.
func (s *keySet) add(b []byte, ks, ke int, esc bool) bool {
	k := b[ks+1 : ke-1]
	var d string
	if esc {
		d, _ = String(b[ks:ke])
		k = []byte(d)
	}
	if s.more != nil {
		if _, ok := s.more[string(k)]; ok {
			return true
		}
		s.more[string(k)] = struct{}{}
		return false
	}
	for _, p := range s.inline[:s.n] {
		if string(b[p.s:p.e]) == string(k) {
			return true
		}
	}
	for _, e := range s.esc {
		if e == string(k) {
			return true
		}
	}
	switch {
	case s.n+len(s.esc) >= len(s.inline):
		s.more = make(map[string]struct{}, 4*len(s.inline))
		for _, p := range s.inline[:s.n] {
			s.more[string(b[p.s:p.e])] = struct{}{}
		}
		for _, e := range s.esc {
			s.more[e] = struct{}{}
		}
		s.more[string(k)] = struct{}{}
	case esc:
		s.esc = append(s.esc, d)
	default:
		s.inline[s.n] = struct{ s, e int }{ks + 1, ke - 1}
		s.n++
	}
	return false
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), nil
	}
	return i, synErr(i, "invalid literal, expected %s", lit)
}

// skipNumber checks the JSON number at b[i] and returns the offset past it.
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

// scanString checks the JSON string starting at the opening quote b[i]:
// escapes, no raw control characters, valid UTF-8. It returns the offset
// past the closing quote and whether the string holds an escape.
func scanString(b []byte, i int) (end int, esc bool, err error) {
	start := i
	i++
	for i < len(b) {
		// Skip eight plain ASCII bytes at a time: none of '"', '\\', a
		// control character or a non-ASCII byte among them. In a word
		// that holds one, go straight to the first: the lowest byte each
		// test flags is exact (only bytes above it can be flagged
		// wrongly), and most strings are short.
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
			return i + 1, esc, nil
		case c == '\\':
			esc = true
			if i+1 >= len(b) {
				return i, esc, synErr(i, "unterminated string escape")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return i, esc, synErr(i, "truncated \\u escape")
				}
				for _, h := range b[i+2 : i+6] {
					if unhex(h) < 0 {
						return i, esc, synErr(i, "invalid \\u escape")
					}
				}
				i += 6
			default:
				return i, esc, synErr(i, "invalid escape \\%c in string", b[i+1])
			}
		case c < 0x20:
			return i, esc, synErr(i, "control character 0x%02x in string", c)
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return i, esc, synErr(i, "invalid UTF-8 in string")
			}
			i += size
		}
	}
	return start, esc, synErr(start, "unterminated string")
}

// hasZero sets the high bit of each zero byte of v (and possibly of bytes
// above one, which only sends the caller to the byte-wise path).
func hasZero(v uint64) uint64 { return (v - 0x0101010101010101) &^ v & 0x8080808080808080 }

// hasLess sets the high bit of bytes below n (n <= 128).
func hasLess(v uint64, n byte) uint64 {
	return (v - 0x0101010101010101*uint64(n)) &^ v & 0x8080808080808080
}

func unhex(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c - 'a' + 10)
	case c >= 'A' && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}
