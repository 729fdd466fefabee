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
// object, at every depth). Members, EachMember, Get, GetFrom, EachElement
// and Next take bytes those checks already passed (a member of a validated
// line) and only find boundaries; on other bytes they return an error or stop early, never
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
	"bytes"
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
		return skipString(b, i)
	case c == '{':
		if depth >= MaxDepth {
			return i, synErr(i, "JSON nested deeper than %d levels", MaxDepth)
		}
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

func duplicate(off int, rawKey []byte) *SyntaxError {
	k, _ := String(rawKey)
	return synErr(off, "duplicate member %q", k)
}

// objKeys finds a repeated key in one object, as cheaply as the scan
// allows: each key sets one bit of a 64-bit filter (from its length, end
// and middle bytes, or from its decoded form when it holds an escape), and
// only when a key's bit is set already is it compared with the object's
// earlier keys (decoded: "a" and "\u0061" are one key), found from the
// offsets kept of the first ones, or by walking the object's validated
// bytes again. Past linearKeys keys the object's keys go to a map, so an
// object of many keys costs linear time.
type objKeys struct {
	bloom uint64
	n     int
	offs  [8]uint32 // where the first keys start (their opening quote)
	more  map[string]struct{}
}

const linearKeys = 16

func keyBit(k []byte) uint64 {
	if len(k) == 0 {
		return 1
	}
	// The middle byte too: "type" and "time", which open every line,
	// agree in length and end bytes. The multiplier is one under which the
	// keys of each of the format's common objects (the envelope, data,
	// messages, content blocks, sources, usage, tool definitions) take
	// bits of their own: a key whose bit is taken costs a comparison.
	h := (uint32(len(k))<<24 | uint32(k[0])<<16 | uint32(k[len(k)>>1])<<8 | uint32(k[len(k)-1])) * 0x516C42B1
	return 1 << (h >> 26)
}

// keyBitAt is keyBit(b[s:e]) without the slice: the loops' fast path.
func keyBitAt(b []byte, s, e int) uint64 {
	if s >= e {
		return 1
	}
	h := (uint32(e-s)<<24 | uint32(b[s])<<16 | uint32(b[s+(e-s)>>1])<<8 | uint32(b[e-1])) * 0x516C42B1
	return 1 << (h >> 26)
}

// keep notes where the key at b[ks] starts, for the first keys.
func (o *objKeys) keep(ks int) { o.offs[o.n&(len(o.offs)-1)] = uint32(ks) }

func (o *objKeys) addSlow(b []byte, obj, ks, ke int, esc bool) bool {
	k := b[ks+1 : ke-1]
	if esc {
		d, _ := AppendUnquote(nil, b[ks:ke])
		k = d
	}
	if o.more == nil && o.n < linearKeys {
		if o.seen(b, obj, ks, k) {
			return true
		}
		o.keep(ks)
		o.bloom |= keyBit(k)
		o.n++
		return false
	}
	if o.more == nil {
		o.n = linearKeys + 1 // the fast path is closed from now on
		o.more = make(map[string]struct{}, 4*linearKeys)
		eachKey(b, obj, ks, func(prev []byte) bool {
			o.more[string(prev)] = struct{}{}
			return true
		})
	}
	if _, ok := o.more[string(k)]; ok {
		return true
	}
	o.more[string(k)] = struct{}{}
	return false
}

// seen reports whether one of the object's keys before b[ks] is k.
func (o *objKeys) seen(b []byte, obj, ks int, k []byte) bool {
	if o.n <= len(o.offs) && uint64(ks) <= 1<<32-1 {
		for _, off := range o.offs[:o.n] {
			ke, err := skipStringTrusted(b, int(off))
			if err != nil {
				break
			}
			if prev := b[off+1 : ke-1]; bytes.IndexByte(prev, '\\') < 0 {
				if string(prev) == string(k) {
					return true
				}
			} else if d, _ := AppendUnquote(nil, b[off:ke]); string(d) == string(k) {
				return true
			}
		}
		return false
	}
	dup := false
	eachKey(b, obj, ks, func(prev []byte) bool {
		dup = string(prev) == string(k)
		return !dup
	})
	return dup
}

// eachKey calls fn with each key (decoded) of the object at b[obj] that
// comes before offset end, which the scan has validated.
func eachKey(b []byte, obj, end int, fn func([]byte) bool) {
	EachMember(b[obj:end], func(m Member) bool { return fn(m.Key) })
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
		i = digits(b, i)
	default:
		return i, synErr(start, "invalid number")
	}
	if i < len(b) && b[i] == '.' {
		d := i + 1
		if i = digits(b, d); i == d {
			return i, synErr(start, "invalid number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		if i = digits(b, d); i == d {
			return i, synErr(start, "invalid number")
		}
	}
	return i, nil
}

// digits returns the offset past the run of decimal digits at b[i]: a
// word at a time while eight bytes are left (nonDigit).
func digits(b []byte, i int) int {
	for i+8 <= len(b) {
		if m := nonDigit(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// nonDigit sets the high bit of the bytes of v that are not ASCII digits;
// as with special, the lowest byte flagged is exact (a borrow or carry
// into a byte comes only from a flagged byte below it).
func nonDigit(v uint64) uint64 {
	const ones = 0x0101010101010101
	x := v - 0x30*ones // a digit's byte is now 0-9
	return (v | x | (x + 0x76*ones)) & 0x8080808080808080
}

// scanString checks the JSON string starting at the opening quote b[i]
// (escapes, no raw control characters, valid UTF-8) and returns the offset
// past the closing quote and whether the string holds an escape. Only keys
// object's fast path does not take come here, so a second look for a
// backslash is cheap.
func scanString(b []byte, i int) (end int, esc bool, err error) {
	if end, err = skipString(b, i); err != nil {
		return end, false, err
	}
	return end, bytes.IndexByte(b[i+1:end-1], '\\') >= 0, nil
}

// skipString checks the JSON string starting at the opening quote b[i]
// and returns the offset past the closing quote.
func skipString(b []byte, i int) (int, error) {
	start := i
	i++
	// Most strings are a few bytes: their first two words, looked at
	// here without a call, hold the closing quote.
	if i+16 <= len(b) {
		m := special(binary.LittleEndian.Uint64(b[i:]))
		if m == 0 {
			i += 8
			m = special(binary.LittleEndian.Uint64(b[i:]))
		}
		if m == 0 {
			i += 8
		} else if i += bits.TrailingZeros64(m) >> 3; b[i] == '"' {
			return i + 1, nil
		}
	}
	for i < len(b) {
		// Pass over plain ASCII bytes (and, with AVX2, two-byte escapes)
		// many at a time: see stringRun.
		i = stringRun(b, i)
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
					if unhex(h) < 0 {
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
			// A run of non-ASCII text (CJK: every byte) is checked rune by
			// rune here: back through stringRun it cost a call a rune.
			for i < len(b) && b[i] >= utf8.RuneSelf {
				// The usual two- and three-byte runes (Latin, Cyrillic,
				// CJK) here; DecodeRune takes the rest (E0 and ED, whose
				// second byte has a narrower range, and four-byte runes).
				if c := b[i]; i+2 < len(b) && c >= 0xE1 && c <= 0xEF && c != 0xED && b[i+1]&0xC0 == 0x80 && b[i+2]&0xC0 == 0x80 {
					i += 3
					continue
				} else if i+1 < len(b) && c >= 0xC2 && c <= 0xDF && b[i+1]&0xC0 == 0x80 {
					i += 2
					continue
				}
				r, size := utf8.DecodeRune(b[i:])
				if r == utf8.RuneError && size <= 1 {
					return i, synErr(i, "invalid UTF-8 in string")
				}
				i += size
			}
		}
	}
	return start, synErr(start, "unterminated string")
}

// plainRun returns the offset of the first byte from i on that a string
// scan must look at (see special), len(b) or a few bytes before it when
// there is none: two words a turn on long runs, one on short ones.
func plainRun(b []byte, i int) int {
	for i+16 <= len(b) {
		if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		if m := special(binary.LittleEndian.Uint64(b[i+8:])); m != 0 {
			return i + 8 + bits.TrailingZeros64(m)>>3
		}
		i += 16
	}
	if i+8 <= len(b) {
		if m := special(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	return i
}

// special sets the high bit of the bytes of v a string scan must look at:
// '"', '\\', control characters and non-ASCII bytes. The lowest byte flagged
// is exact; bytes above it may be flagged wrongly.
//
// Each term is a bytewise subtraction whose result has its high bit set for
// the bytes sought: below 0x20 (and from 0xA0), equal to '"' or '\\' (and
// some non-ASCII bytes); v's own high bits flag every non-ASCII byte, so
// the terms need not clear theirs (as hasZero's &^ does). A
// borrow into a byte comes only from a flagged byte below it, so the
// lowest byte flagged stays exact.
func special(v uint64) uint64 {
	const ones = 0x0101010101010101
	return (v | (v - 0x20*ones) | ((v ^ 0x22*ones) - ones) | ((v ^ 0x5C*ones) - ones)) & 0x8080808080808080
}

// hasZero sets the high bit of each zero byte of v (and possibly of bytes
// above one, which only sends the caller to the byte-wise path).
func hasZero(v uint64) uint64 { return (v - 0x0101010101010101) &^ v & 0x8080808080808080 }

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
