package rawjson

// The checker as it was before the scan was made faster: the oracle the
// fuzz targets hold the current one to (same verdicts, offsets, messages
// and members). Only renamed; it shares the helpers that did not change.

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"unicode/utf8"
)

const oldLinearKeys = 16

func oldValid(b []byte) error {
	i := SkipSpace(b, 0)
	end, err := oldSkipValue(b, i, 0)
	if err != nil {
		return err
	}
	if j := SkipSpace(b, end); j != len(b) {
		return synErr(j, "unexpected data after the JSON value")
	}
	return nil
}

func oldSkipValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, synErr(i, "unexpected end of JSON")
	}
	switch c := b[i]; {
	case c == '"':
		return oldSkipString(b, i)
	case c == '{':
		if depth >= MaxDepth {
			return i, synErr(i, "JSON nested deeper than %d levels", MaxDepth)
		}
		_, end, err := oldObject(b, i, depth, nil, false, nil)
		return end, err
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
			if i, err = oldSkipValue(b, i, depth+1); err != nil {
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
		return oldSkipNumber(b, i)
	case c == 't':
		return oldSkipLiteral(b, i, "true")
	case c == 'f':
		return oldSkipLiteral(b, i, "false")
	case c == 'n':
		return oldSkipLiteral(b, i, "null")
	default:
		return i, synErr(i, "invalid character %q looking for a JSON value", c)
	}
}

func oldDuplicate(off int, rawKey []byte) *SyntaxError {
	k, _ := String(rawKey)
	return synErr(off, "duplicate member %q", k)
}

func oldKeyBit(k []byte) uint64 {
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

func oldSkipLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), nil
	}
	return i, synErr(i, "invalid literal, expected %s", lit)
}

func oldSkipNumber(b []byte, i int) (int, error) {
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
		i = oldDigits(b, i)
	default:
		return i, synErr(start, "invalid number")
	}
	if i < len(b) && b[i] == '.' {
		d := i + 1
		if i = oldDigits(b, d); i == d {
			return i, synErr(start, "invalid number")
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		d := i
		if i = oldDigits(b, d); i == d {
			return i, synErr(start, "invalid number")
		}
	}
	return i, nil
}

func oldDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

func oldShortKey(b []byte, i int) (end int, esc bool, err error) {
	if i+17 <= len(b) {
		j := i + 1
		m := special(binary.LittleEndian.Uint64(b[j:]))
		if m == 0 {
			j += 8
			m = special(binary.LittleEndian.Uint64(b[j:]))
		}
		if m != 0 {
			if j += bits.TrailingZeros64(m) >> 3; b[j] == '"' {
				return j + 1, false, nil
			}
		}
	}
	return -1, false, nil
}

func oldScanString(b []byte, i int) (end int, esc bool, err error) {
	if end, err = oldSkipString(b, i); err != nil {
		return end, false, err
	}
	return end, bytes.IndexByte(b[i+1:end-1], '\\') >= 0, nil
}

func oldSkipString(b []byte, i int) (int, error) {
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
		// many at a time: see oldStringRun.
		i = oldStringRun(b, i)
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
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size <= 1 {
				return i, synErr(i, "invalid UTF-8 in string")
			}
			i += size
		}
	}
	return start, synErr(start, "unterminated string")
}

func oldPlainRun(b []byte, i int) int {
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

func oldEachKey(b []byte, obj, end int, fn func([]byte) bool) {
	EachMember(b[obj:end], func(m Member) bool { return fn(m.Key) })
}

type oldObjKeys struct {
	bloom uint64
	n     int
	offs  [8]uint32 // where the first keys start (their opening quote)
	more  map[string]struct{}
}

func (o *oldObjKeys) keep(ks int) { o.offs[o.n&(len(o.offs)-1)] = uint32(ks) }

func (o *oldObjKeys) addSlow(b []byte, obj, ks, ke int, esc bool) bool {
	k := b[ks+1 : ke-1]
	if esc {
		d, _ := AppendUnquote(nil, b[ks:ke])
		k = d
	}
	if o.more == nil && o.n < oldLinearKeys {
		if o.seen(b, obj, ks, k) {
			return true
		}
		o.keep(ks)
		o.bloom |= oldKeyBit(k)
		o.n++
		return false
	}
	if o.more == nil {
		o.n = oldLinearKeys + 1 // the fast path is closed from now on
		o.more = make(map[string]struct{}, 4*oldLinearKeys)
		oldEachKey(b, obj, ks, func(prev []byte) bool {
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

func (o *oldObjKeys) seen(b []byte, obj, ks int, k []byte) bool {
	if o.n <= len(o.offs) && uint64(ks) <= 1<<32-1 {
		for _, off := range o.offs[:o.n] {
			ke, err := oldSkipStringTrusted(b, int(off))
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
	oldEachKey(b, obj, ks, func(prev []byte) bool {
		dup = string(prev) == string(k)
		return !dup
	})
	return dup
}

func oldObjectNested(b []byte, buf []Member, n *Nested) ([]Member, error) {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return buf[:0], synErr(i, "not a JSON object")
	}
	members, end, err := oldObject(b, i, 0, buf[:0], true, n)
	if err != nil {
		return members, err
	}
	if j := SkipSpace(b, end); j != len(b) {
		return members, synErr(j, "unexpected data after the JSON object")
	}
	return members, nil
}

func oldObject(b []byte, start, depth int, members []Member, keep bool, n *Nested) ([]Member, int, error) {
	if n != nil {
		n.Found = false
		n.Members = n.Members[:0]
	}
	i := SkipSpace(b, start+1)
	if i < len(b) && b[i] == '}' {
		return members, i + 1, nil
	}
	var keys oldObjKeys
	for {
		if i >= len(b) || b[i] != '"' {
			return members, i, synErr(i, "expected a string key in object")
		}
		ks := i
		ke, esc, err := oldShortKey(b, i)
		if ke < 0 {
			if ke, esc, err = oldScanString(b, i); err != nil {
				return members, i, err
			}
		}
		// A key's fast path, by hand: a call per key cost more than the
		// check. (n passes oldLinearKeys once the keys are in a map; offs is
		// read only while n fits it.)
		if bit := oldKeyBit(b[ks+1 : ke-1]); !esc && keys.bloom&bit == 0 && keys.n < oldLinearKeys {
			keys.offs[keys.n&(len(keys.offs)-1)] = uint32(ks)
			keys.bloom |= bit
			keys.n++
		} else if keys.addSlow(b, start, ks, ke, esc) {
			return members, i, oldDuplicate(ks, b[ks:ke])
		}
		i = SkipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return members, i, synErr(i, "expected ':' after object key")
		}
		vs := SkipSpace(b, i+1)
		var ve int
		if n != nil && !n.Found && vs < len(b) && b[vs] == '{' && string(keyOf(b[ks:ke], esc)) == n.Key {
			if depth+1 >= MaxDepth {
				return members, vs, synErr(vs, "JSON nested deeper than %d levels", MaxDepth)
			}
			n.Members, ve, err = oldObject(b, vs, depth+1, n.Members, true, n.Inner)
			n.Found = err == nil
		} else if vs < len(b) && b[vs] == '"' {
			ve, err = oldSkipString(b, vs)
		} else {
			ve, err = oldSkipValue(b, vs, depth+1)
		}
		if err != nil {
			return members, ve, err
		}
		if keep {
			members = append(members, Member{Key: keyOf(b[ks:ke], esc), RawKey: b[ks:ke], Value: b[vs:ve], KeyOff: ks, ValOff: vs})
		}
		i = SkipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = SkipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return members, i + 1, nil
		}
		return members, i, synErr(i, "expected ',' or '}' in object")
	}
}

func oldSkipStringTrusted(b []byte, i int) (int, error) {
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
			return i, ErrMalformed
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

func oldStringRun(b []byte, i int) int {
	if hasAVX2 && len(b)-i >= 32 {
		if i = stringRunAVX2(b, i); len(b)-i >= 32 {
			return i
		}
	}
	return oldPlainRun(b, i)
}
