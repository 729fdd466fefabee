package rawjson

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// skipStringReference is skipString as it was before it jumped to the
// first byte that needs a look.
func skipStringReference(b []byte, i int) (int, error) {
	start := i
	i++
	for i < len(b) {
		for i+8 <= len(b) {
			v := binary.LittleEndian.Uint64(b[i:])
			if (hasLess(v, 0x20)|hasZero(v^0x2222222222222222)|hasZero(v^0x5C5C5C5C5C5C5C5C)|v)&0x8080808080808080 != 0 {
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

func TestSkipStringMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "b", " ", "\"", "\\", "\\\"", "\\n", "\\u00e9", "\\u12", "\\x", "\n", "\x01", "\x7f",
		"é", "€", "𝄞", "\xff", "\xc3", "\xe2\x82", "0123456789abcdef", strings.Repeat("z", 9)}
	for range 200000 {
		var b strings.Builder
		b.WriteByte('"')
		for range rng.IntN(12) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		if rng.IntN(4) > 0 {
			b.WriteString(`"`)
		}
		b.WriteString(strings.Repeat(",", rng.IntN(10)))
		s := []byte(b.String())
		got, _, gerr := scanString(s, 0)
		want, werr := skipStringReference(s, 0)
		if got != want || fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Fatalf("skipString(%q) = %d, %v; want %d, %v", s, got, gerr, want, werr)
		}
	}
}

func TestSkipStringTrustedMatchesIndexByte(t *testing.T) {
	reference := func(b []byte, i int) (int, error) {
		j := i + 1
		for {
			k := bytes.IndexByte(b[j:], '"')
			if k < 0 {
				return i, ErrMalformed
			}
			j += k
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
	rng := rand.New(rand.NewPCG(5, 6))
	parts := []string{"a", "\\\"", "\\\\", "\\", "é", strings.Repeat("x", 7), strings.Repeat("y", 40), "\\u0041"}
	for range 100000 {
		var b strings.Builder
		b.WriteByte('"')
		for range rng.IntN(10) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		if rng.IntN(5) > 0 {
			b.WriteByte('"')
		}
		b.WriteString(strings.Repeat(`,"z"`, rng.IntN(3)))
		s := []byte(b.String())
		got, gerr := skipStringTrusted(s, 0)
		want, werr := reference(s, 0)
		if got != want || fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Fatalf("skipStringTrusted(%q) = %d, %v; want %d, %v", s, got, gerr, want, werr)
		}
	}
}

// TestSpecialLowestExact: special flags a word that holds a byte a string
// scan must look at, and its lowest flag is the first such byte.
func TestSpecialLowestExact(t *testing.T) {
	isSpecial := func(c byte) bool { return c < 0x20 || c == '"' || c == '\\' || c >= 0x80 }
	interesting := []byte{0, 1, 0x1F, 0x20, 0x21, '"', 0x23, '[', '\\', ']', 'a', 0x7F, 0x80, 0x9F, 0xA0, 0xA2, 0xDC, 0xFF}
	rng := rand.New(rand.NewPCG(3, 3))
	var w [8]byte
	for n := range 2_000_000 {
		for j := range w {
			if n%2 == 0 {
				w[j] = interesting[rng.IntN(len(interesting))]
			} else {
				w[j] = byte(rng.IntN(256))
			}
		}
		first := -1
		for j, c := range w {
			if isSpecial(c) {
				first = j
				break
			}
		}
		m := special(binary.LittleEndian.Uint64(w[:]))
		got := -1
		if m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		if got != first {
			t.Fatalf("special(% x): first flagged byte %d, want %d", w, got, first)
		}
	}
}

// hasLess sets the high bit of bytes below n (n <= 128).
func hasLess(v uint64, n byte) uint64 {
	return (v - 0x0101010101010101*uint64(n)) &^ v & 0x8080808080808080
}

// TestNonDigitLowestExact: the lowest byte nonDigit flags is the first
// byte that is not a digit, for words of digits and every other byte.
func TestNonDigitLowestExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var w [8]byte
	for n := 0; n < 200000; n++ {
		for k := range w {
			if rng.IntN(3) == 0 {
				w[k] = byte(rng.IntN(256))
			} else {
				w[k] = '0' + byte(rng.IntN(10))
			}
		}
		want := 8
		for k, c := range w {
			if c < '0' || c > '9' {
				want = k
				break
			}
		}
		got := 8
		if m := nonDigit(binary.LittleEndian.Uint64(w[:])); m != 0 {
			got = bits.TrailingZeros64(m) >> 3
		}
		if got != want {
			t.Fatalf("%q: first non-digit %d, nonDigit says %d", w, want, got)
		}
	}
	for c := 0; c < 256; c++ {
		for at := 0; at < 8; at++ {
			w := [8]byte{'9', '9', '9', '9', '9', '9', '9', '9'}
			w[at] = byte(c)
			m := nonDigit(binary.LittleEndian.Uint64(w[:]))
			if isDigit := c >= '0' && c <= '9'; isDigit != (m == 0) || (!isDigit && bits.TrailingZeros64(m)>>3 != at) {
				t.Fatalf("%q: nonDigit %#x", w, m)
			}
		}
	}
}

// TestKeyBitAt: the loops' filter bit is keyBit's, for keys of every
// length at every offset.
func TestKeyBitAt(t *testing.T) {
	b := []byte(`{"a":1,"type":"x","timestamp":2,"":3,"\u0061":4,"sourceEventSeqs":[]}`)
	for s := 0; s <= len(b); s++ {
		for e := s; e <= len(b); e++ {
			if got, want := keyBitAt(b, s, e), keyBit(b[s:e]); got != want {
				t.Fatalf("%q: keyBitAt %#x, keyBit %#x", b[s:e], got, want)
			}
		}
	}
}

// PlainKeyEnd finds the end Next finds of a short key without an escape,
// and declines every other string rather than guess.
func TestPlainKeyEnd(t *testing.T) {
	pad := `: 1, "more": "padding to two words"}`
	for _, c := range []struct {
		key   string
		plain bool
	}{
		{`""`, true}, {`"a"`, true}, {`"type"`, true}, {`"seven77"`, true}, {`"eight888"`, true},
		{`"fifteen15151515"`, true}, {`"sixteen161616161"`, false}, {`"a\"b"`, false}, {`"\\"`, false},
		{`"tab\tkey"`, false}, {`"é"`, false}, {"\"ctl\x01\"", false}, {`"\u0041"`, false},
	} {
		b := []byte(`{` + c.key + pad)
		got := PlainKeyEnd(b, 1)
		want, err := Next(b, 1)
		if err != nil {
			t.Fatalf("%s: Next: %v", c.key, err)
		}
		if c.plain && got != want || !c.plain && got != -1 {
			t.Errorf("PlainKeyEnd(%s) = %d, want %d (plain %v)", c.key, got, want, c.plain)
		}
	}
	// Too near the end to read two words: declined.
	if got := PlainKeyEnd([]byte(`{"a":1}`), 1); got != -1 {
		t.Errorf("PlainKeyEnd of a short buffer = %d, want -1", got)
	}
}
