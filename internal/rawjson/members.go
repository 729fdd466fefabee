package rawjson

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/bits"
)

// Member is one member of a JSON object: spans of the scanned bytes.
type Member struct {
	// Key is the decoded key. It aliases the scanned bytes unless the key
	// holds an escape.
	Key []byte
	// RawKey is the key as written, with its quotes.
	RawKey []byte
	// Value is the raw value.
	Value []byte
	// KeyOff and ValOff are the offsets of the key's opening quote and of
	// the value in the scanned bytes.
	KeyOff, ValOff int
}

// Object checks that b is exactly one JSON object (white space around it
// allowed) as Skip does, and appends its members to buf in order.
func Object(b []byte, buf []Member) ([]Member, error) { return ObjectNested(b, buf, nil) }

// Nested asks ObjectNested to keep, as it checks them, the members of the
// value of the member Key (when that value is an object): they go into
// Members, whose storage is reused, and Found says whether it was met.
// Inner, when set, asks the same of one member of that value. The bytes are
// scanned once: what Object checks is checked, and nested members come for
// free.
type Nested struct {
	Key     string
	Members []Member
	Found   bool
	Inner   *Nested
}

// ObjectNested is Object that also keeps the members n asks for.
func ObjectNested(b []byte, buf []Member, n *Nested) ([]Member, error) {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return buf[:0], synErr(i, "not a JSON object")
	}
	members, end, err := object(b, i, 0, buf[:0], true, n)
	if err != nil {
		return members, err
	}
	if j := SkipSpace(b, end); j != len(b) {
		return members, synErr(j, "unexpected data after the JSON object")
	}
	return members, nil
}

// object checks the object starting at b[start] ('{') at nesting depth
// depth, appends its members to members when keep, and returns the offset
// just past it. n says which member's object value to keep the members of
// too.
func object(b []byte, start, depth int, members []Member, keep bool, n *Nested) ([]Member, int, error) {
	if n != nil {
		n.Found = false
		n.Members = n.Members[:0]
	}
	i := SkipSpace(b, start+1)
	if i < len(b) && b[i] == '}' {
		return members, i + 1, nil
	}
	var keys objKeys
	for {
		if i >= len(b) || b[i] != '"' {
			return members, i, synErr(i, "expected a string key in object")
		}
		// A key of at most fifteen plain ASCII bytes, its closing quote
		// in the two words after its opening one (the usual key), is found
		// here without a call; scanString takes any other.
		ks := i
		ke, esc := -1, false
		if i+17 <= len(b) {
			w := b[i+1 : i+17]
			m, j := special(binary.LittleEndian.Uint64(w)), i+1
			if m == 0 {
				m, j = special(binary.LittleEndian.Uint64(w[8:])), i+9
			}
			if j += bits.TrailingZeros64(m) >> 3; m != 0 && b[j] == '"' {
				ke = j + 1
			}
		}
		var err error
		if ke < 0 {
			if ke, esc, err = scanString(b, i); err != nil {
				return members, i, err
			}
		}
		// A key's fast path, by hand: a call per key cost more than the
		// check. (n passes linearKeys once the keys are in a map; offs is
		// read only while n fits it.)
		if bit := keyBitAt(b, ks+1, ke-1); !esc && keys.bloom&bit == 0 && keys.n < linearKeys {
			keys.offs[keys.n&(len(keys.offs)-1)] = uint32(ks)
			keys.bloom |= bit
			keys.n++
		} else if keys.addSlow(b, start, ks, ke, esc) {
			return members, i, duplicate(ks, b[ks:ke])
		}
		// The usual member has no white space: ':' right after the key,
		// the value right after it.
		i = ke
		if i >= len(b) || b[i] != ':' {
			if i = SkipSpace(b, i); i >= len(b) || b[i] != ':' {
				return members, i, synErr(i, "expected ':' after object key")
			}
		}
		vs := i + 1
		if vs < len(b) && b[vs] <= ' ' {
			vs = SkipSpace(b, vs)
		}
		var ve int
		if vs >= len(b) {
			return members, vs, synErr(vs, "unexpected end of JSON")
		}
		switch c := b[vs]; {
		case c == '"':
			ve, err = skipString(b, vs)
		case c-'0' <= 9:
			ve, err = skipNumber(b, vs)
		case c == '{' && n != nil && !n.Found && string(keyOf(b[ks:ke], esc)) == n.Key:
			if depth+1 >= MaxDepth {
				return members, vs, synErr(vs, "JSON nested deeper than %d levels", MaxDepth)
			}
			n.Members, ve, err = object(b, vs, depth+1, n.Members, true, n.Inner)
			n.Found = err == nil
		default:
			ve, err = skipValue(b, vs, depth+1)
		}
		if err != nil {
			return members, ve, err
		}
		if keep {
			// Field by field into the slice's next element: a composite
			// literal appended is built on the stack and copied.
			if len(members) == cap(members) {
				members = append(members, Member{})[:len(members)]
			}
			members = members[:len(members)+1]
			m := &members[len(members)-1]
			m.RawKey = b[ks:ke]
			if !esc {
				m.Key = b[ks+1 : ke-1]
			} else {
				m.Key = keyOf(m.RawKey, true)
			}
			m.Value, m.KeyOff, m.ValOff = b[vs:ve], ks, vs
		}
		i = ve
		if i < len(b) && b[i] <= ' ' {
			i = SkipSpace(b, i)
		}
		if i < len(b) && b[i] == ',' {
			if i++; i < len(b) && b[i] <= ' ' {
				i = SkipSpace(b, i)
			}
			continue
		}
		if i < len(b) && b[i] == '}' {
			return members, i + 1, nil
		}
		return members, i, synErr(i, "expected ',' or '}' in object")
	}
}

// skipObject is object for an object whose members no one keeps (most
// of a line's): the same checks, in the same order, with fewer values
// live in the loop. FuzzOracle holds the two to the same verdicts.
func skipObject(b []byte, start, depth int) (int, error) {
	i := SkipSpace(b, start+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	var keys objKeys
	for {
		if i >= len(b) || b[i] != '"' {
			return i, synErr(i, "expected a string key in object")
		}
		// A key of at most fifteen plain ASCII bytes, its closing quote
		// in the two words after its opening one (the usual key), is found
		// here without a call; scanString takes any other.
		ks := i
		ke, esc := -1, false
		if i+17 <= len(b) {
			w := b[i+1 : i+17]
			m, j := special(binary.LittleEndian.Uint64(w)), i+1
			if m == 0 {
				m, j = special(binary.LittleEndian.Uint64(w[8:])), i+9
			}
			if j += bits.TrailingZeros64(m) >> 3; m != 0 && b[j] == '"' {
				ke = j + 1
			}
		}
		var err error
		if ke < 0 {
			if ke, esc, err = scanString(b, i); err != nil {
				return i, err
			}
		}
		// A key's fast path, by hand: a call per key cost more than the
		// check. (n passes linearKeys once the keys are in a map; offs is
		// read only while n fits it.)
		if bit := keyBitAt(b, ks+1, ke-1); !esc && keys.bloom&bit == 0 && keys.n < linearKeys {
			keys.offs[keys.n&(len(keys.offs)-1)] = uint32(ks)
			keys.bloom |= bit
			keys.n++
		} else if keys.addSlow(b, start, ks, ke, esc) {
			return i, duplicate(ks, b[ks:ke])
		}
		// The usual member has no white space: ':' right after the key,
		// the value right after it.
		i = ke
		if i >= len(b) || b[i] != ':' {
			if i = SkipSpace(b, i); i >= len(b) || b[i] != ':' {
				return i, synErr(i, "expected ':' after object key")
			}
		}
		vs := i + 1
		if vs < len(b) && b[vs] <= ' ' {
			vs = SkipSpace(b, vs)
		}
		var ve int
		if vs >= len(b) {
			return vs, synErr(vs, "unexpected end of JSON")
		}
		switch c := b[vs]; {
		case c == '"':
			ve, err = skipString(b, vs)
		case c-'0' <= 9:
			ve, err = skipNumber(b, vs)
		case c == '{':
			if depth+1 >= MaxDepth {
				return vs, synErr(vs, "JSON nested deeper than %d levels", MaxDepth)
			}
			ve, err = skipObject(b, vs, depth+1)
		default:
			ve, err = skipValue(b, vs, depth+1)
		}
		if err != nil {
			return ve, err
		}
		i = ve
		if i < len(b) && b[i] <= ' ' {
			i = SkipSpace(b, i)
		}
		if i < len(b) && b[i] == ',' {
			if i++; i < len(b) && b[i] <= ' ' {
				i = SkipSpace(b, i)
			}
			continue
		}
		if i < len(b) && b[i] == '}' {
			return i + 1, nil
		}
		return i, synErr(i, "expected ',' or '}' in object")
	}
}

// keyOf decodes a raw key; without escapes it aliases raw.
func keyOf(raw []byte, esc bool) []byte {
	if !esc {
		return raw[1 : len(raw)-1]
	}
	d, _ := AppendUnquote(nil, raw)
	return d
}

// ErrMalformed is returned by the functions for validated bytes when the
// bytes are not what they expect.
var ErrMalformed = errors.New("malformed JSON")

// Members appends the members of the object b to buf, in order, for bytes
// that passed Valid (a value of a validated line): values are skipped, not
// checked again.
func Members(b []byte, buf []Member) ([]Member, error) {
	members := buf[:0]
	err := EachMember(b, func(m Member) bool {
		members = append(members, m)
		return true
	})
	return members, err
}

// EachMember calls fn with each member of the object b, for validated
// bytes; fn returns false to stop.
func EachMember(b []byte, fn func(Member) bool) error {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return ErrMalformed
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return ErrMalformed
		}
		ks := i
		ke, err := skipStringTrusted(b, i)
		if err != nil {
			return err
		}
		i = SkipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return ErrMalformed
		}
		vs := SkipSpace(b, i+1)
		ve, err := Next(b, vs)
		if err != nil {
			return err
		}
		raw := b[ks:ke]
		if !fn(Member{Key: keyOf(raw, bytes.IndexByte(raw, '\\') >= 0), RawKey: raw, Value: b[vs:ve], KeyOff: ks, ValOff: vs}) {
			return nil
		}
		i = SkipSpace(b, ve)
		if i < len(b) && b[i] == ',' {
			i = SkipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return nil
		}
		return ErrMalformed
	}
}

// Get returns the raw value of the member key of the validated object b,
// nil when b has none or is not an object.
func Get(b []byte, key string) []byte {
	v := GetFrom(b, key)
	end, err := Next(v, 0)
	if err != nil {
		return nil
	}
	return v[:end]
}

// GetFrom returns the validated object b from the value of its member key
// on (the first such member, as Get finds it), nil when b has none or is
// not an object. It does not look for the end of that value: a lookup of a
// member near the start of a large value need not skip the whole value
// first. Get(GetFrom(b, k), m) is Get(Get(b, k), m) for validated bytes.
func GetFrom(b []byte, key string) []byte {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil
	}
	i = SkipSpace(b, i+1)
	for i < len(b) && b[i] == '"' {
		ke, err := skipStringTrusted(b, i)
		if err != nil {
			return nil
		}
		raw := b[i:ke]
		i = SkipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return nil
		}
		vs := SkipSpace(b, i+1)
		if string(keyOf(raw, bytes.IndexByte(raw, '\\') >= 0)) == key {
			return b[vs:]
		}
		ve, err := Next(b, vs)
		if err != nil {
			return nil
		}
		i = SkipSpace(b, ve)
		if i >= len(b) || b[i] != ',' {
			return nil
		}
		i = SkipSpace(b, i+1)
	}
	return nil
}

// EachElement calls fn with each element of the array b, for validated
// bytes; fn returns false to stop.
func EachElement(b []byte, fn func(i int, v []byte) bool) error {
	it := Array(b)
	for n := 0; ; n++ {
		v, ok := it.Next()
		if !ok {
			return it.Err()
		}
		if !fn(n, v) {
			return nil
		}
	}
}

// Iter walks the elements of a validated array without a callback (a
// loop's variables then stay the caller's, on its stack):
//
//	for it := rawjson.Array(b); ; {
//		v, ok := it.Next()
//		if !ok {
//			break // it.Err() says whether b was an array
//		}
//	}
type Iter struct {
	b   []byte
	i   int
	err error
}

// Array starts a walk of the array b.
func Array(b []byte) Iter {
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return Iter{err: ErrMalformed}
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return Iter{i: -1}
	}
	return Iter{b: b, i: i}
}

// Next returns the next element; ok is false at the end or on malformed
// bytes (Err).
func (it *Iter) Next() (v []byte, ok bool) {
	if it.err != nil || it.i < 0 {
		return nil, false
	}
	vs := it.i
	end, err := Next(it.b, vs)
	if err != nil {
		it.err = err
		return nil, false
	}
	i := SkipSpace(it.b, end)
	switch {
	case i < len(it.b) && it.b[i] == ',':
		it.i = SkipSpace(it.b, i+1)
	case i < len(it.b) && it.b[i] == ']':
		it.i = -1
	default:
		it.err = ErrMalformed
		return nil, false
	}
	return it.b[vs:end], true
}

// Err is what ended the walk early: ErrMalformed, or nil.
func (it *Iter) Err() error { return it.err }

// Elements appends the elements of the validated array b to buf.
func Elements(b []byte, buf [][]byte) ([][]byte, error) {
	out := buf[:0]
	err := EachElement(b, func(_ int, v []byte) bool {
		out = append(out, v)
		return true
	})
	return out, err
}

// Next returns the offset just past the value starting at b[i], for
// validated bytes: strings end at their closing quote, containers at their
// matching bracket, other values at the next delimiter.
func Next(b []byte, i int) (int, error) {
	if i >= len(b) {
		return i, ErrMalformed
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
		return i, ErrMalformed
	case ',', '}', ']', ':', ' ', '\t', '\r', '\n':
		return i, ErrMalformed
	default:
		for j := i; j < len(b); j++ {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\r', '\n':
				return j, nil
			}
		}
		return len(b), nil
	}
}

// PlainKeyEnd returns the end (past its closing quote) of the string at
// b[i] when it is at most fifteen plain ASCII bytes without an escape, as
// most keys are, found in two words; -1 for any other (the caller scans it).
func PlainKeyEnd(b []byte, i int) int {
	if i < 0 || i+17 > len(b) {
		return -1
	}
	w := b[i+1 : i+17]
	m, j := special(binary.LittleEndian.Uint64(w)), i+1
	if m == 0 {
		m, j = special(binary.LittleEndian.Uint64(w[8:])), i+9
	}
	if j += bits.TrailingZeros64(m) >> 3; m != 0 && b[j] == '"' {
		return j + 1
	}
	return -1
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
