//go:build !purego

package rawjson

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The kernel must not mix legacy-SSE instructions with its 256-bit ones:
// on Intel cores each switch costs a state transition (about 300 ns a
// call, which made the kernel slower than the scan of eight-byte words).
func TestAVX2KernelIsVEXOnly(t *testing.T) {
	src, err := os.ReadFile("strrun_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	vecReg := regexp.MustCompile(`\b[XYZ][0-9]+\b`)
	for n, line := range strings.Split(string(src), "\n") {
		code, _, _ := strings.Cut(line, "//")
		fields := strings.Fields(code)
		if len(fields) < 2 || !vecReg.MatchString(code) {
			continue
		}
		if op := fields[0]; !strings.HasPrefix(op, "V") {
			t.Errorf("strrun_amd64.s:%d: %s on a vector register is a legacy-SSE encoding; use its VEX form (V%s)", n+1, op, op)
		}
	}
}

// kernelStop is where stringRunAVX2 must stop from b[i], byte by byte: at
// a quote, a control or non-ASCII byte or a backslash that does not begin
// one of the two-byte escapes it passes over; len(b) when there is none.
func kernelStop(b []byte, i int) int {
	for i < len(b) {
		c := b[i]
		if c == '\\' && i+1 < len(b) && strings.IndexByte(`"\/bfnrt`, b[i+1]) >= 0 {
			i += 2
			continue
		}
		if c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
			return i
		}
		i++
	}
	return i
}

// checkKernel fails t unless stringRunAVX2 stops, from every offset of b,
// where kernelStop does, or short of it where fewer than 32 bytes are left
// and at an offset from which kernelStop reaches the same stop.
func checkKernel(t *testing.T, b []byte) {
	t.Helper()
	for i := 0; i <= len(b)-32; i++ {
		want := kernelStop(b, i)
		got := stringRunAVX2(b, i)
		if got != want && (len(b)-got >= 32 || got > want || kernelStop(b, got) != want) {
			t.Fatalf("%q from %d: stopped at %d, want %d", b, i, got, want)
		}
	}
}

// FuzzStringRunKernel: the AVX2 kernel stops where the byte loop says.
func FuzzStringRunKernel(f *testing.F) {
	if !hasAVX2 {
		f.Skip("this machine has no AVX2")
	}
	f.Add([]byte(strings.Repeat(`ab\n\\\"cd\t`, 30)))
	f.Add([]byte(strings.Repeat(`x`, 63) + `\"` + strings.Repeat(`\\`, 40) + `"`))
	f.Add([]byte(strings.Repeat(`\`, 130) + `"` + strings.Repeat(`y`, 64)))
	f.Add([]byte(strings.Repeat(`z`, 70) + `\u0041\x` + "\x01\xc3\xa9" + strings.Repeat(`z`, 70)))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 4096 {
			return
		}
		checkKernel(t, b)
	})
}

// TestStringRunKernelRuns puts runs of backslashes of every length, then
// each kind of byte, at every offset around a word's end; and a backslash
// before every byte value.
func TestStringRunKernelRuns(t *testing.T) {
	for c := range 256 {
		for _, at := range []int{0, 30, 62, 63, 64, 100} {
			checkKernel(t, []byte(strings.Repeat("a", at)+`\`+string([]byte{byte(c)})+strings.Repeat("b", 140-at)))
		}
	}
	for run := 1; run <= 5; run++ {
		for _, after := range []string{`"`, `n`, `u`, `x`, `/`, "\x01", "\xc3", `a`} {
			for at := 0; at < 140; at++ {
				checkKernel(t, []byte(strings.Repeat("a", at)+strings.Repeat(`\`, run)+after+strings.Repeat("b", 140-at)))
			}
		}
	}
}
