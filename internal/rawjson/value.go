package rawjson

import (
	"bytes"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// MaxSafeInt is 2^53−1, the largest integer every JSON reader holds
// exactly (JavaScript's Number.MAX_SAFE_INTEGER).
const MaxSafeInt = 1<<53 - 1

// Int parses raw as an integer of the format: an optional '-' and decimal
// digits without a leading zero, within ±MaxSafeInt. Everything else is
// refused: "-0", fractions ("1.0"), exponents ("1e0", "1e999"), a plus
// sign, a quoted number ("\"0\""), 2^53 and beyond.
func Int(raw []byte) (int64, bool) {
	d := raw
	neg := len(d) > 0 && d[0] == '-'
	if neg {
		d = d[1:]
	}
	// 16 digits hold every safe integer (MaxSafeInt has 16).
	if len(d) == 0 || len(d) > 16 || (d[0] == '0' && (len(d) > 1 || neg)) {
		return 0, false
	}
	var v int64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if v > MaxSafeInt {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// AppendInt appends v in decimal.
func AppendInt(dst []byte, v int64) []byte { return strconv.AppendInt(dst, v, 10) }

// IsString reports whether raw is a JSON string token.
func IsString(raw []byte) bool { return len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' }

// String decodes the JSON string token raw. ok is false when raw is not a
// string token or holds a malformed escape. Without escapes the string is
// the bytes between the quotes.
func String(raw []byte) (string, bool) {
	if !IsString(raw) {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	// Decoding never makes a valid string longer than it is written
	// (an escape is longer than what it stands for): one allocation.
	d, ok := AppendUnquote(make([]byte, 0, len(inner)), raw)
	return string(d), ok
}

// StringIs reports whether raw is the JSON string s, escapes decoded.
func StringIs(raw []byte, s string) bool {
	if len(raw) == len(s)+2 && IsString(raw) && string(raw[1:len(raw)-1]) == s {
		return true
	}
	if !IsString(raw) || bytes.IndexByte(raw, '\\') < 0 {
		return false
	}
	d, ok := AppendUnquote(nil, raw)
	return ok && string(d) == s
}

// AppendUnquote appends the decoded JSON string token raw to dst, as
// encoding/json decodes it: an escape of an unpaired surrogate and invalid
// UTF-8 become U+FFFD. ok is false when raw is not a string token or holds
// a malformed escape (dst is then returned as it was).
func AppendUnquote(dst, raw []byte) ([]byte, bool) {
	if !IsString(raw) {
		return dst, false
	}
	orig := len(dst)
	s := raw[1 : len(raw)-1]
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\\':
			if i+1 >= len(s) {
				return dst[:orig], false
			}
			switch s[i+1] {
			case '"', '\\', '/':
				dst = append(dst, s[i+1])
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r, ok := hex4(s[i+2:])
				if !ok {
					return dst[:orig], false
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if r2, ok := lowSurrogate(s[i:]); ok {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							dst = utf8.AppendRune(dst, dec)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default:
				return dst[:orig], false
			}
			i += 2
		case c < utf8.RuneSelf:
			if c == '"' || c < 0x20 {
				return dst[:orig], false
			}
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(s[i:])
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, "\uFFFD"...)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
		}
	}
	return dst, true
}

// hex4 reads the four hex digits of a \u escape.
func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		h := unhex(c)
		if h < 0 {
			return 0, false
		}
		r = r<<4 | h
	}
	return r, true
}

// lowSurrogate reads a \uXXXX escape at the start of s.
func lowSurrogate(s []byte) (rune, bool) {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, false
	}
	return hex4(s[2:])
}

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string the way log lines are written
// (JSON.stringify's way): no HTML escaping, U+2028 and U+2029 as they are,
// control characters escaped; invalid UTF-8 becomes U+FFFD, written as
// the character, so a string read back and written again gives the same
// bytes.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\uFFFD"...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// EmptyArray and EmptyObject report whether raw is [] or {}, white space
// allowed.
func EmptyArray(raw []byte) bool  { return emptyOf(raw, '[', ']') }
func EmptyObject(raw []byte) bool { return emptyOf(raw, '{', '}') }

func emptyOf(raw []byte, open, close byte) bool {
	i := SkipSpace(raw, 0)
	if i >= len(raw) || raw[i] != open {
		return false
	}
	i = SkipSpace(raw, i+1)
	return i < len(raw) && raw[i] == close
}
