package backup

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzParseSpan: a span that parses prints as what it parsed from (the
// units in order, none zero) and reads back the same, and counts back no
// later than where it started.
func FuzzParseSpan(f *testing.F) {
	for _, s := range []string{"26h", "7d", "1y6m", "2d12h", "1y2m3d4h", "0h", "3w", "1h2d"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sp, err := ParseSpan(s)
		if err != nil {
			return
		}
		again, err := ParseSpan(sp.String())
		if err != nil || again != sp {
			t.Fatalf("%q parses as %+v, printed %q, which reads back as %+v, %v", s, sp, sp.String(), again, err)
		}
		now := time.Date(2026, 9, 1, 3, 0, 0, 0, time.UTC)
		if sp.Before(now).After(now) {
			t.Fatalf("%q counts forward", s)
		}
	})
}

// FuzzReadMetrics: whatever an earlier metrics file holds, reading it
// takes only the values of sample lines and never fails on their content.
func FuzzReadMetrics(f *testing.F) {
	for _, s := range []string{
		"convkit_backup_last_success_timestamp_seconds 1796610063\n",
		"# HELP a b\n# TYPE a gauge\na 1\n",
		"a NaN\nb +Inf\nc -1e9\n",
		"a{l=\"v\"} 2\n",
		"a 1 1700000000000\n",
		"no-value\n\n \n",
		"convkit_backup_conversations 20",
		strings.Repeat("x", 70<<10) + " 1\n",
	} {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, s string) {
		p := filepath.Join(dir, "m.prom")
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		values, err := readMetrics(p)
		if err != nil {
			return // a line longer than the scanner takes
		}
		for name, v := range values {
			found := false
			for _, line := range strings.Split(s, "\n") {
				// A line may end in CRLF: the scanner drops the CR.
				n, val, ok := strings.Cut(strings.TrimSuffix(line, "\r"), " ")
				if ok && n == name {
					if x, err := strconv.ParseFloat(val, 64); err == nil && (x == v || math.IsNaN(x) && math.IsNaN(v)) {
						found = true
					}
				}
			}
			if !found {
				t.Fatalf("%s = %v, which no line of the file says", name, v)
			}
		}
	})
}
