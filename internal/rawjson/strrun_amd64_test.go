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
