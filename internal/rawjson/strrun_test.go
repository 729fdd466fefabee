package rawjson

import (
	"fmt"
	"strings"
	"testing"
)

// withoutAVX2 runs f as a machine without AVX2 runs it.
func withoutAVX2(f func()) {
	had := hasAVX2
	hasAVX2 = false
	defer func() { hasAVX2 = had }()
	f()
}

// verdicts is what the checks make of b: Valid's and ObjectNested's
// verdicts (offset and message) and members, and where skipString ends
// each string that opens at a quote of b.
func verdicts(b []byte) string {
	var out strings.Builder
	fmt.Fprintf(&out, "valid %v\n", Valid(b))
	n := &Nested{Key: "data", Inner: &Nested{Key: "message"}}
	ms, err := ObjectNested(b, nil, n)
	fmt.Fprintf(&out, "object %v %d\n", err, len(ms))
	for _, m := range ms {
		fmt.Fprintf(&out, "%q %q %d %d\n", m.Key, m.Value, m.KeyOff, m.ValOff)
	}
	for i, c := range b {
		if c == '"' {
			end, err := skipString(b, i)
			fmt.Fprintf(&out, "string %d: %d %v\n", i, end, err)
		}
	}
	return out.String()
}

// FuzzStringRun: the AVX2 string scan (strrun_amd64.s) and the scan of
// eight bytes a turn reach the same verdicts at the same offsets, for
// every kind of string body: escapes at every alignment, control
// characters, invalid UTF-8, unterminated strings, a backslash at the end.
func FuzzStringRun(f *testing.F) {
	long := strings.Repeat("abcdefgh", 9)
	for _, s := range []string{
		`{"data":{"message":{"text":"` + long + `\n` + long + `\"x\\y\/z\b\f\r\t` + long + `"}}}`,
		`{"a":"` + long + `\u00e9` + long + `"}`,
		`{"a":"` + long + "\x01" + long + `"}`,
		`{"a":"` + long + "\xff" + long + `"}`,
		`{"a":"` + long + "é" + long + `"}`,
		`{"a":"` + long + `\x` + long + `"}`,
		`{"a":"` + long + `\`,
		`{"a":"` + long + long,
		`["` + strings.Repeat(`\n`, 40) + `"]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !hasAVX2 {
			t.Skip("this machine has no AVX2: one scan only")
		}
		with := verdicts(b)
		var without string
		withoutAVX2(func() { without = verdicts(b) })
		if with != without {
			t.Fatalf("%q:\nwith AVX2:\n%s\nwithout:\n%s", b, with, without)
		}
	})
}

// TestStringRunAlignments puts each kind of byte a string scan stops at,
// and each two-byte escape, at every offset of a long string body, both
// ways.
func TestStringRunAlignments(t *testing.T) {
	if !hasAVX2 {
		t.Skip("this machine has no AVX2: one scan only")
	}
	for _, ins := range []string{`\n`, `\"`, `\\`, `\/`, `\b`, `\f`, `\r`, `\t`, `\u0041`, `\x`, "\x1f", "\x7f", "\xc3\xa9", "\xc3", "\xff", `"`, `\`} {
		for at := 0; at < 130; at++ {
			b := []byte(`{"k":"` + strings.Repeat("a", at) + ins + strings.Repeat("b", 140-at) + `"}`)
			with := verdicts(b)
			var without string
			withoutAVX2(func() { without = verdicts(b) })
			if with != without {
				t.Fatalf("%q at %d:\nwith AVX2:\n%s\nwithout:\n%s", ins, at, with, without)
			}
		}
	}
}
