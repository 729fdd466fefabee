package rawjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestInt(t *testing.T) {
	for _, tc := range []struct {
		raw string
		v   int64
		ok  bool
	}{
		{"0", 0, true},
		{"7", 7, true},
		{"-7", -7, true},
		{"9007199254740991", MaxSafeInt, true},
		{"-9007199254740991", -MaxSafeInt, true},
		{"9007199254740992", 0, false},  // 2^53
		{"9007199254740993", 0, false},  // 2^53+1
		{"-9007199254740992", 0, false}, // -2^53
		{"99999999999999999", 0, false},
		{"-0", 0, false},
		{"00", 0, false},
		{"01", 0, false},
		{"-01", 0, false},
		{"+1", 0, false},
		{"1.0", 0, false},
		{"1.5", 0, false},
		{"1e0", 0, false},
		{"1E3", 0, false},
		{"1e999", 0, false},
		{`"0"`, 0, false},
		{"", 0, false},
		{"-", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"0x10", 0, false},
		{"true", 0, false},
		{"null", 0, false},
	} {
		v, ok := Int([]byte(tc.raw))
		if v != tc.v || ok != tc.ok {
			t.Errorf("Int(%q) = %d, %v; want %d, %v", tc.raw, v, ok, tc.v, tc.ok)
		}
	}
}

// intForm is the one spelling Int accepts.
var intForm = regexp.MustCompile(`^-?(0|[1-9][0-9]*)$`)

func FuzzInt(f *testing.F) {
	for _, s := range []string{"0", "-0", "1", "-1", "9007199254740991", "9007199254740992", "-9007199254740991",
		"1e999", "1.0", "01", "+1", `"0"`, "18446744073709551617", "-9223372036854775808", " 1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, ok := Int(raw)
		want, err := strconv.ParseInt(string(raw), 10, 64)
		wantOK := err == nil && intForm.Match(raw) && string(raw) != "-0" && want >= -MaxSafeInt && want <= MaxSafeInt
		if ok != wantOK || (ok && v != want) {
			t.Fatalf("Int(%q) = %d, %v; want %d, %v", raw, v, ok, want, wantOK)
		}
		if ok {
			// What the format accepts is a JSON number every reader holds
			// exactly, written as JSON.stringify writes it.
			var f float64
			if json.Unmarshal(raw, &f) != nil || f != float64(v) || string(AppendInt(nil, v)) != string(raw) {
				t.Fatalf("Int(%q) = %d does not round-trip", raw, v)
			}
		}
	})
}

func TestString(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
		ok        bool
	}{
		{`""`, "", true},
		{`"abc"`, "abc", true},
		{`"a\"b\\c\/d\b\f\n\r\t"`, "a\"b\\c/d\b\f\n\r\t", true},
		{`"\u00e9\u4E2D"`, "é中", true},
		{`"\ud83d\ude00"`, "😀", true},
		{`"\ud83d"`, "\uFFFD", true},
		{`"\ude00\ud83d"`, "\uFFFD\uFFFD", true},
		{`"\ud83dx"`, "\uFFFDx", true},
		{`"\ud83d\u0041"`, "\uFFFDA", true},
		{"\"\xff\"", "\uFFFD", true},
		{`"\x"`, "", false},
		{`"\u12"`, "", false},
		{`"\u12g4"`, "", false},
		{`abc`, "", false},
		{`"`, "", false},
	} {
		got, ok := String([]byte(tc.raw))
		if got != tc.want || ok != tc.ok {
			t.Errorf("String(%s) = %q, %v; want %q, %v", tc.raw, got, ok, tc.want, tc.ok)
		}
	}
	if !StringIs([]byte(`"a\u0062c"`), "abc") || !StringIs([]byte(`"abc"`), "abc") || StringIs([]byte(`"abd"`), "abc") || StringIs([]byte(`abc`), "abc") {
		t.Error("StringIs")
	}
}

// FuzzString: a string token decodes as encoding/json decodes it, and
// AppendString writes what decodes back to the same string.
func FuzzString(f *testing.F) {
	for _, s := range []string{`""`, `"abc"`, `"\u00e9"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ud83d\u0041"`, "\"\xff\"", `"\x"`, `"a\"b"`, "\"\u2028<>&\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		// encoding/json allows white space around the token.
		raw = raw[SkipSpace(raw, 0):]
		for len(raw) > 0 && strings.IndexByte(" \t\r\n", raw[len(raw)-1]) >= 0 {
			raw = raw[:len(raw)-1]
		}
		got, ok := String(raw)
		var want string
		err := json.Unmarshal(raw, &want)
		if err == nil && (!ok || got != want) {
			t.Fatalf("String(%q) = %q, %v; encoding/json %q", raw, got, ok, want)
		}
		if end, _, serr := scanString(raw, 0); len(raw) > 0 && raw[0] == '"' && serr == nil && end == len(raw) && !ok {
			t.Fatalf("String(%q) refuses a token Skip accepts", raw)
		}
		// PlainKeyEnd, of a valid token as a key, finds its end or declines;
		// what it finds is the decoded key, escapes impossible.
		if end, _, serr := scanString(raw, 0); ok && len(raw) > 0 && raw[0] == '"' && serr == nil && end == len(raw) {
			b := append(append([]byte(nil), raw...), `:"padding to two words"}`...)
			if e := PlainKeyEnd(b, 0); e >= 0 && (e != len(raw) || string(b[1:e-1]) != got) {
				t.Fatalf("PlainKeyEnd(%q) = %d, key %q; the token ends at %d, decodes to %q", raw, e, b[1:max(e-1, 1)], len(raw), got)
			}
		}
		enc := AppendString(nil, got)
		back, ok := String(enc)
		if !ok || !json.Valid(enc) || back != strings.ToValidUTF8(got, "\uFFFD") {
			t.Fatalf("AppendString(%q) = %s reads back as %q, %v", got, enc, back, ok)
		}
		if bytes.ContainsAny(enc, "<>&") != strings.ContainsAny(got, "<>&") {
			t.Fatalf("AppendString(%q) = %s escapes HTML", got, enc)
		}
	})
}

func TestValid(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	deepObj := func(n int) string { return strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n) }
	for _, tc := range []struct {
		in  string
		msg string // "" when valid
		off int
	}{
		{`{"a":1,"b":[true,false,null,"x",-1.5e3]}`, "", 0},
		{` [ ] `, "", 0},
		{deep(MaxDepth), "", 0},
		{deep(MaxDepth + 1), "JSON nested deeper than 512 levels", MaxDepth},
		{deep(100000), "JSON nested deeper than 512 levels", MaxDepth},
		{deepObj(MaxDepth), "", 0},
		{deepObj(MaxDepth + 1), "JSON nested deeper than 512 levels", 5 * MaxDepth},
		{`{"a":1,"a":2}`, `duplicate member "a"`, 7},
		{`{"a":1,"\u0061":2}`, `duplicate member "a"`, 7},
		{`{"\u0061":1,"a":2}`, `duplicate member "a"`, 12},
		{`{"x":{"a":1,"b":{"a":1},"a":3}}`, `duplicate member "a"`, 24},
		{`[{"a":1},{"a":1}]`, "", 0},
		{`{"a":1}x`, "unexpected data after the JSON value", 7},
		{`{"a":01}`, "expected ',' or '}' in object", 6},
		{`{"a":-}`, "invalid number", 5},
		{`{"a":1.}`, "invalid number", 5},
		{`{"a":tru}`, "invalid literal, expected true", 5},
		{"{\"a\":\"\x00\"}", "control character 0x00 in string", 6},
		{"{\"a\":\"\xff\"}", "invalid UTF-8 in string", 6},
		{`{"a":"\q"}`, `invalid escape \q in string`, 6},
		{`{"a":"x`, "unterminated string", 5},
		{"\xef\xbb\xbf{}", `invalid character 'ï' looking for a JSON value`, 0},
		{"\x00", `invalid character '\x00' looking for a JSON value`, 0},
	} {
		err := Valid([]byte(tc.in))
		name := tc.in
		if len(name) > 40 {
			name = name[:40]
		}
		if tc.msg == "" {
			if err != nil {
				t.Errorf("Valid(%s) = %v", name, err)
			}
			continue
		}
		var se *SyntaxError
		if !errors.As(err, &se) || se.Msg != tc.msg || se.Offset != tc.off {
			t.Errorf("Valid(%s) = %v; want %q at %d", name, err, tc.msg, tc.off)
		}
	}
}

// TestManyKeys: an object of many keys is checked for duplicates in linear
// time, a duplicate found wherever it is.
func TestManyKeys(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	const n = 200000
	for i := range n {
		fmt.Fprintf(&b, `"k%d":%d,`, i, i)
	}
	b.WriteString(`"k0":0}`)
	err := Valid([]byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), `duplicate member "k0"`) {
		t.Fatalf("Valid = %v", err)
	}
	esc := strings.Replace(b.String(), `"k0":0}`, `"k\u0031":0}`, 1)
	if err := Valid([]byte(esc)); err == nil || !strings.Contains(err.Error(), `duplicate member "k1"`) {
		t.Fatalf("Valid = %v", err)
	}
}

func TestMembers(t *testing.T) {
	in := []byte(` { "type" : "x" , "s\u0065q":7,"data":{"a":[1,{"b":"}"}]},"e":"\"}"} `)
	ms, err := Object(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ms {
		got = append(got, fmt.Sprintf("%s=%s@%d,%d", m.Key, m.Value, m.KeyOff, m.ValOff))
		if string(in[m.ValOff:m.ValOff+len(m.Value)]) != string(m.Value) || string(in[m.KeyOff:m.KeyOff+len(m.RawKey)]) != string(m.RawKey) {
			t.Errorf("member %s: offsets do not point at its spans", m.Key)
		}
	}
	want := `[type="x"@3,12 seq=7@18,29 data={"a":[1,{"b":"}"}]}@31,38 e="\"}"@58,62]`
	if fmt.Sprint(got) != want {
		t.Errorf("Object = %v\nwant     %v", got, want)
	}
	trusted, err := Members(in, nil)
	if err != nil || fmt.Sprint(trusted) != fmt.Sprint(ms) {
		t.Errorf("Members = %v, %v", trusted, err)
	}
	if v := Get(in, "data"); string(v) != `{"a":[1,{"b":"}"}]}` {
		t.Errorf("Get(data) = %s", v)
	}
	if v := Get(in, "nope"); v != nil {
		t.Errorf("Get(nope) = %s", v)
	}
	els, err := Elements([]byte(` [1, "a,]" ,{"x":[2]}, [] ,null]`), nil)
	if err != nil || fmt.Sprintf("%s", els) != `[1 "a,]" {"x":[2]} [] null]` {
		t.Errorf("Elements = %s, %v", els, err)
	}
	for _, bad := range []string{``, `[`, `[1,`, `[1 2]`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `"x`, `{"a":"x}`} {
		if _, err := Members([]byte(bad), nil); err == nil && strings.HasPrefix(bad, "{") {
			t.Errorf("Members(%s) accepted", bad)
		}
		if _, err := Elements([]byte(bad), nil); err == nil && strings.HasPrefix(bad, "[") {
			t.Errorf("Elements(%s) accepted", bad)
		}
	}
}

// hasDuplicate reports whether any object in the valid JSON b holds a key
// twice, walking encoding/json's tokens: the reference for Valid's check.
func hasDuplicate(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		obj    bool
		keys   map[string]bool
		expect bool // the next string token is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		top := func() *frame {
			if len(stack) == 0 {
				return nil
			}
			return stack[len(stack)-1]
		}
		if f := top(); f != nil && f.obj && f.expect {
			if k, ok := tok.(string); ok {
				if f.keys[k] {
					return true
				}
				f.keys[k] = true
				f.expect = false
				continue
			}
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{obj: true, keys: map[string]bool{}, expect: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if f := top(); f != nil && f.obj {
			f.expect = true // a value ended: a key comes next
		}
	}
}

// TestDuplicateKeysAnywhere: a repeated key is found wherever it is, in
// objects of any size (inline offsets, a second walk, a map), spelled with
// or without escapes, and keys that only look alike are not taken for one.
func TestDuplicateKeysAnywhere(t *testing.T) {
	key := func(i int, esc bool) string {
		k := fmt.Sprintf("k%d", i)
		if esc {
			return `"\u006b` + k[1:] + `"`
		}
		return `"` + k + `"`
	}
	for n := 1; n <= 40; n++ {
		for dup := -1; dup < n; dup++ {
			for _, esc := range []bool{false, true} {
				var parts []string
				for i := range n {
					parts = append(parts, key(i, esc && i%3 == 1)+`:{"a":[1,{"b":2}],"k1":1}`)
				}
				if dup >= 0 {
					parts = append(parts, key(dup, esc)+":0")
				}
				doc := `[{"x":1},{` + strings.Join(parts, ",") + `}]`
				err := Valid([]byte(doc))
				want := hasDuplicate([]byte(doc))
				if want != (dup >= 0) {
					t.Fatalf("n=%d dup=%d: the reference says %v", n, dup, want)
				}
				if (err != nil) != want || (err != nil && !strings.Contains(err.Error(), "duplicate member")) {
					t.Fatalf("n=%d dup=%d esc=%v: Valid = %v", n, dup, esc, err)
				}
			}
		}
	}
	// Keys with the same length and end bytes, all distinct.
	var parts []string
	for i := range 60 {
		parts = append(parts, fmt.Sprintf(`"a%02dz":%d`, i, i))
	}
	if err := Valid([]byte("{" + strings.Join(parts, ",") + "}")); err != nil {
		t.Fatalf("alike keys: %v", err)
	}
}

// FuzzValid: Valid accepts exactly what encoding/json accepts, but for the
// three things the format refuses on purpose (a duplicate key, nesting
// deeper than MaxDepth, invalid UTF-8 in a string); and on what it accepts, the functions for validated bytes
// find the same members and boundaries as the validating ones.
func FuzzValid(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":1,"b":[true,false,null,"x\u00e9",-1.5e3]}`, `{"a":1,"a":2}`,
		`{"a":{"b":1,"\u0062":2}}`, `[[[[]]]]`, `"\ud83d"`, `{"a":"}\"{"}`, "{\"a\":\"\xff\"}", ` 1 `, `-0.0e-0`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		err := Valid(b)
		std := json.Valid(b)
		var se *SyntaxError
		switch {
		case err == nil && !std:
			t.Fatalf("Valid accepts %q, encoding/json refuses it", b)
		case err != nil && !errors.As(err, &se):
			t.Fatalf("Valid(%q) = %T %v", b, err, err)
		case err != nil && (se.Offset < 0 || se.Offset > len(b)):
			t.Fatalf("Valid(%q): offset %d out of range", b, se.Offset)
		case err != nil && std && !strings.HasPrefix(se.Msg, "duplicate member") && !strings.HasPrefix(se.Msg, "JSON nested deeper") && (se.Msg != "invalid UTF-8 in string" || utf8.Valid(b)):
			t.Fatalf("Valid refuses %q (%v), encoding/json accepts it", b, err)
		}
		if err == nil && hasDuplicate(b) {
			t.Fatalf("Valid accepts %q, which repeats a key", b)
		}
		if err != nil && std && strings.HasPrefix(se.Msg, "duplicate member") && !hasDuplicate(b) {
			t.Fatalf("Valid finds a repeated key in %q, which has none", b)
		}
		if err != nil {
			return
		}
		i := SkipSpace(b, 0)
		end, _ := Skip(b, i)
		if n, nerr := Next(b, i); nerr != nil || n != end {
			t.Fatalf("Next(%q) = %d, %v; Skip %d", b, n, nerr, end)
		}
		switch b[i] {
		case '{':
			ms, oerr := Object(b, nil)
			tr, terr := Members(b, nil)
			if oerr != nil || terr != nil || fmt.Sprint(ms) != fmt.Sprint(tr) {
				t.Fatalf("Object %v %v, Members %v %v", ms, oerr, tr, terr)
			}
			var m map[string]json.RawMessage
			if json.Unmarshal(b, &m) != nil || len(m) != len(ms) {
				t.Fatalf("%d members, encoding/json %d", len(ms), len(m))
			}
			for _, mb := range ms {
				if !bytes.Equal(bytes.TrimSpace(m[string(mb.Key)]), mb.Value) {
					t.Fatalf("member %q = %s, encoding/json %s", mb.Key, mb.Value, m[string(mb.Key)])
				}
				if !utf8.Valid(mb.Key) {
					t.Fatalf("key %q is not UTF-8", mb.Key)
				}
			}
		case '[':
			els, eerr := Elements(b, nil)
			var a []json.RawMessage
			if eerr != nil || json.Unmarshal(b, &a) != nil || len(a) != len(els) {
				t.Fatalf("Elements %q %v, encoding/json %d", els, eerr, len(a))
			}
			for k := range a {
				if !bytes.Equal(bytes.TrimSpace(a[k]), els[k]) {
					t.Fatalf("element %d = %s, encoding/json %s", k, els[k], a[k])
				}
			}
		}
	})
}

// FuzzObjectNested: ObjectNested accepts and refuses what Object does, at
// the same offsets, with the same members, and the nested members it keeps
// are the members of the values they belong to.
func FuzzObjectNested(f *testing.F) {
	for _, s := range []string{`{"data":{"message":{"id":"m","content":[1]},"turn":1},"type":"x"}`, `{"data":1}`,
		`{"data":{"message":[]}}`, `{"data":{"a":1,"a":2}}`, `{"data":{"message":{"x":"\ud83d"}}}`, `{"data":{}}`, `{}`,
		`{"a":{"data":{"message":{}}},"data":{"message":{"k":{"message":1}}}}`, `{"data":{"message":{"id":1} ,"z":2}} x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want, werr := Object(b, nil)
		n := &Nested{Key: "data", Inner: &Nested{Key: "message"}}
		got, err := ObjectNested(b, nil, n)
		if (err == nil) != (werr == nil) || (err != nil && err.Error() != werr.Error()) {
			t.Fatalf("ObjectNested(%q) = %v, Object = %v", b, err, werr)
		}
		if err != nil {
			return
		}
		if len(got) != len(want) {
			t.Fatalf("%d members, Object has %d", len(got), len(want))
		}
		check := func(n *Nested, parent []Member) []byte {
			var v []byte
			for _, m := range parent {
				if string(m.Key) == n.Key && len(m.Value) > 0 && m.Value[0] == '{' {
					v = m.Value
					break
				}
			}
			if (v != nil) != n.Found {
				t.Fatalf("%q: found %v, the value is %q", b, n.Found, v)
			}
			if v == nil {
				return nil
			}
			ms, err := Members(v, nil)
			if err != nil || len(ms) != len(n.Members) {
				t.Fatalf("%q: nested %d members, Members has %d (%v)", b, len(n.Members), len(ms), err)
			}
			for i := range ms {
				if string(ms[i].Key) != string(n.Members[i].Key) || string(ms[i].Value) != string(n.Members[i].Value) {
					t.Fatalf("%q: nested member %d differs", b, i)
				}
			}
			return v
		}
		if check(n, got) != nil {
			check(n.Inner, n.Members)
		}
	})
}
