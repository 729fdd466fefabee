package rawjson

import (
	"fmt"
	"strings"
	"testing"
)

// oracleVerdicts is what the current checks and the oracle's (oracle_test.go)
// make of b, side by side: Valid's and ObjectNested's errors (offset and
// message), the members and nested members kept, and where each string
// that opens at a quote of b ends.
func oracleVerdicts(b []byte) (got, want string) {
	var g, w strings.Builder
	fmt.Fprintf(&g, "valid %v\n", Valid(b))
	fmt.Fprintf(&w, "valid %v\n", oldValid(b))
	object := func(out *strings.Builder, f func([]byte, []Member, *Nested) ([]Member, error)) {
		n := &Nested{Key: "data", Inner: &Nested{Key: "message"}}
		ms, err := f(b, nil, n)
		fmt.Fprintf(out, "object %v %d\n", err, len(ms))
		for _, m := range ms {
			fmt.Fprintf(out, "%q %q %q %d %d\n", m.Key, m.RawKey, m.Value, m.KeyOff, m.ValOff)
		}
		for n := n; n != nil; n = n.Inner {
			fmt.Fprintf(out, "nested %s %v %d\n", n.Key, n.Found, len(n.Members))
			for _, m := range n.Members {
				fmt.Fprintf(out, "%q %q %q %d %d\n", m.Key, m.RawKey, m.Value, m.KeyOff, m.ValOff)
			}
		}
	}
	object(&g, ObjectNested)
	object(&w, oldObjectNested)
	for i, c := range b {
		if c == '"' {
			end, err := skipString(b, i)
			fmt.Fprintf(&g, "string %d: %d %v\n", i, end, err)
			end, err = oldSkipString(b, i)
			fmt.Fprintf(&w, "string %d: %d %v\n", i, end, err)
		}
	}
	return g.String(), w.String()
}

// checkOracle fails t when the current checks and the oracle disagree on
// b, with and without the AVX2 kernels.
func checkOracle(t *testing.T, b []byte) {
	t.Helper()
	if got, want := oracleVerdicts(b); got != want {
		t.Fatalf("%q:\nnow:\n%s\noracle:\n%s", b, got, want)
	}
	if hasAVX2 {
		var got, want string
		withoutAVX2(func() { got, want = oracleVerdicts(b) })
		if got != want {
			t.Fatalf("%q without AVX2:\nnow:\n%s\noracle:\n%s", b, got, want)
		}
	}
}

// oracleSeeds are lines of the log's shapes and the checks' edge cases:
// duplicate keys (escaped too), deep nesting, every escape, control
// characters, invalid UTF-8, numbers of every form.
func oracleSeeds() []string {
	long := strings.Repeat("abcdefgh", 9)
	seeds := []string{
		`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"ab":1,"a\u0062":2}`, `{"a\"":1,"a\u0022":2}`,
		`{"type":1,"time":2,"tipe":3,"typf":4}`,
		`{"k0":0,"k1":1,"k2":2,"k3":3,"k4":4,"k5":5,"k6":6,"k7":7,"k8":8,"k9":9,"k10":10,"k11":11,"k12":12,"k13":13,"k14":14,"k15":15,"k16":16,"k3":17}`,
		strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
		strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth),
		`{"s":"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00\ud83d"}`, `{"s":"\x"}`, `{"s":"\u12"}`, `{"s":"\u12g4"}`,
		"{\"s\":\"a\x01b\"}", "{\"s\":\"a\x7fb\"}", "{\"s\":\"\xff\"}", "{\"s\":\"\xc3\"}", "{\"s\":\"\xed\xa0\x80\"}", `{"s":"é"}`,
		`[0,-0,1.5,-1e9,1E+2,2e-3,01,-,1.,.5,1e,9007199254740993,-9007199254740993]`, `[0]`, `[-0.0e-0]`, `[1.e1]`,
		`[true,false,null]`, `[tru]`, `[nul`, `{"a":fals}`, `{"a" : [ 1 , 2 ] , "b" : { } }`, " {\"a\":1}\t\r\n", `{"a":1} x`,
		`{"a":1,}`, `{,}`, `{"a"}`, `{"a":}`, `{"a":1 "b":2}`, `[1,]`, `[,1]`, `{"a":"`, `{"a":"` + long, `{"a":"` + long + `\`,
		`{"data":{"message":{"id":"m","content":[1]},"turn":1},"type":"x"}`, `{"data":{"message":{"a":1,"a":2}}}`,
		`{"data":{"a":1,"a":2}}`, `{"\u0064ata":{"message":{}}}`, `{"data":1,"data":{}}`,
		`{"s":"` + long + `\n` + long + `\"x\\y\/z\b\f\r\t` + long + `"}`, `{"` + long + `":1,"` + long + `":2}`,
		`{"` + long + `":1,"` + long[:len(long)-1] + `\u0068":2}`,
		// Runs of non-ASCII text, which the string scan checks as UTF-8 at once.
		`{"s":"漢字かな漢字かな漢字かな","e":"ok 👍 café déjà ñ"}`, `{"` + strings.Repeat("ключ", 5) + `":"` + strings.Repeat("текст ", 8) + `"}`,
	}
	// Escapes and runs of backslashes at the edges of the AVX2 scan's words
	// of 64 bytes, in lines longer than a word.
	for _, at := range []int{62, 63, 64, 127} {
		for _, esc := range []string{`\"`, `\\`, `\\\"`, `\u00e9`, `\x`, `\`} {
			seeds = append(seeds, `{"s":"`+strings.Repeat("a", at-6)+esc+strings.Repeat(`b\n`, 20)+`","t":1}`)
		}
	}
	for _, l := range benchLines() {
		seeds = append(seeds, string(l))
	}
	return seeds
}

// FuzzOracle: the checks reach the oracle's verdicts, at the same offsets
// with the same messages, and keep the same members.
func FuzzOracle(f *testing.F) {
	for _, s := range oracleSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkOracle(t, b) })
}

// TestOracleMutations puts each byte a check turns on at every offset of
// each seed, over the byte there and inserted before it.
func TestOracleMutations(t *testing.T) {
	ins := []string{`"`, `\`, `{`, `}`, `[`, `]`, `:`, `,`, ` `, `0`, `-`, `e`, `.`, "\x00", "\x1f", "\xff", "\xc3", `\u0061`, `\n`, `a`}
	for _, s := range oracleSeeds() {
		if len(s) > 300 { // the long ones are FuzzOracle's: seconds here
			continue
		}
		for at := 0; at <= len(s); at++ {
			for _, x := range ins {
				checkOracle(t, []byte(s[:at]+x+s[at:]))
				if at < len(s) {
					checkOracle(t, []byte(s[:at]+x+s[at+1:]))
				}
			}
		}
	}
}

// TestRuneRunsAgainstOracle puts every lead byte from 0x80, with every
// second byte and the third bytes at the edges of the continuation range,
// inside a run of non-ASCII text: the rune checks' fast paths and
// DecodeRune reach the oracle's verdicts.
func TestRuneRunsAgainstOracle(t *testing.T) {
	for lead := 0x80; lead <= 0xFF; lead++ {
		for second := 0; second <= 0xFF; second++ {
			for _, third := range []byte{'a', '"', 0x7F, 0x80, 0xBF, 0xC0} {
				s := string([]byte{byte(lead), byte(second), third})
				checkOracle(t, []byte(`{"s":"漢字`+s+`字","t":"ж`+s+`"}`))
			}
		}
	}
}
