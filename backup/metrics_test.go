package backup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// exposition parses a file in the Prometheus text exposition format
// (version 0.0.4) by its rules, and returns each sample's value by its
// name and labels: every line ends in a newline; a comment line is
// "# HELP name text", "# TYPE name type" or any other text after "#"; a
// sample is a metric name, optional {label="value",...}, a value (a Go
// float, NaN, +Inf or -Inf) and an optional integer timestamp; names
// match [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]*;
// a name has at most one HELP and one TYPE, its TYPE before its first
// sample, and its samples are not split by another name's.
func exposition(data string) (map[string]float64, error) {
	if data != "" && !strings.HasSuffix(data, "\n") {
		return nil, errors.New("the last line does not end in a newline")
	}
	name := regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	sample := regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"(?:,[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*")*,?)?\})? ([^ ]+)(?: (-?\d+))?$`)
	types := map[string]string{}
	helps := map[string]bool{}
	done := map[string]bool{} // families whose samples ended
	values := map[string]float64{}
	current := ""
	sc := bufio.NewScanner(strings.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case line == "":
			continue
		case strings.HasPrefix(line, "#"):
			f := strings.Fields(line)
			if len(f) < 3 || (f[1] != "HELP" && f[1] != "TYPE") {
				continue // a comment
			}
			if !name.MatchString(f[2]) {
				return nil, fmt.Errorf("line %d: %s of an invalid name %q", n, f[1], f[2])
			}
			if f[1] == "HELP" {
				if helps[f[2]] {
					return nil, fmt.Errorf("line %d: a second HELP for %s", n, f[2])
				}
				helps[f[2]] = true
				continue
			}
			if len(f) != 4 {
				return nil, fmt.Errorf("line %d: TYPE wants a name and a type", n)
			}
			switch f[3] {
			case "counter", "gauge", "histogram", "summary", "untyped":
			default:
				return nil, fmt.Errorf("line %d: unknown type %q", n, f[3])
			}
			if _, ok := types[f[2]]; ok {
				return nil, fmt.Errorf("line %d: a second TYPE for %s", n, f[2])
			}
			if done[f[2]] || current == f[2] {
				return nil, fmt.Errorf("line %d: TYPE of %s after its samples", n, f[2])
			}
			types[f[2]] = f[3]
		default:
			m := sample.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("line %d: not a sample: %q", n, line)
			}
			if m[1] != current {
				if done[m[1]] {
					return nil, fmt.Errorf("line %d: the samples of %s are split", n, m[1])
				}
				if current != "" {
					done[current] = true
				}
				current = m[1]
			}
			var v float64
			switch m[3] {
			case "NaN":
				v = math.NaN()
			case "+Inf":
				v = math.Inf(1)
			case "-Inf":
				v = math.Inf(-1)
			default:
				var err error
				if v, err = strconv.ParseFloat(m[3], 64); err != nil {
					return nil, fmt.Errorf("line %d: value %q: %v", n, m[3], err)
				}
			}
			key := m[1] + m[2]
			if _, ok := values[key]; ok {
				return nil, fmt.Errorf("line %d: %s twice", n, key)
			}
			values[key] = v
		}
	}
	return values, sc.Err()
}

// TestExpositionParser: the parser refuses what the format does.
func TestExpositionParser(t *testing.T) {
	for _, bad := range []string{
		"a 1",                   // no final newline
		"a{b=\"c\" 1\n",         // unclosed labels
		"1a 1\n",                // a name that starts with a digit
		"a one\n",               // not a number
		"a 1\nb 2\na 3\n",       // a family split
		"a 1\n# TYPE a gauge\n", // TYPE after the samples
		"# TYPE a gauge\n# TYPE a gauge\na 1\n",
		"# TYPE a meter\na 1\n",
		"a 1\na 1\n",
	} {
		if _, err := exposition(bad); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	v, err := exposition("# HELP a x y\n# TYPE a gauge\na{l=\"v\\\"\"} 1.5 1700000000000\na 2\n# just a comment\nb NaN\n")
	if err != nil || v[`a{l="v\""}`] != 1.5 || v["a"] != 2 || !math.IsNaN(v["b"]) {
		t.Errorf("%v, %v", v, err)
	}
}

// TestMetricsFile: a backup's metrics file is in the exposition format,
// with every metric a monitoring system needs, 0644 whatever the umask; a
// run that wrote no archive keeps the last success's time and figures and
// records its own exit status; one before any success says 0. What is at
// the path, a link included, is replaced, never written through.
func TestMetricsFile(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	dataDir, _ := generate(t, 3, 12, false)
	dir := t.TempDir()
	path := filepath.Join(dir, "convkit.prom")

	// A failure before any success.
	start := time.Date(2026, 9, 1, 3, 0, 0, 0, time.UTC)
	if err := WriteMetrics(path, MetricsRun{End: start, Duration: time.Second, ExitCode: 1}); err != nil {
		t.Fatal(err)
	}
	v := readExposition(t, path)
	if v["convkit_backup_last_success_timestamp_seconds"] != 0 || v["convkit_backup_last_run_exit_code"] != 1 || v["convkit_backup_last_run_timestamp_seconds"] != float64(start.Unix()) {
		t.Errorf("a failure first: %v", v)
	}

	_, res := backupFile(t, dataDir, Options{Strict: true})
	end := start.Add(time.Hour)
	if err := WriteMetrics(path, MetricsRun{End: end, Duration: 1500 * time.Millisecond, ExitCode: 3, Result: res}); err != nil {
		t.Fatal(err)
	}
	v = readExposition(t, path)
	m := res.Manifest
	want := map[string]float64{
		"convkit_backup_last_success_timestamp_seconds": float64(end.Unix()), "convkit_backup_last_run_timestamp_seconds": float64(end.Unix()), "convkit_backup_last_run_exit_code": 3, "convkit_backup_duration_seconds": 1.5,
		"convkit_backup_archive_bytes": float64(res.Bytes), "convkit_backup_conversations": float64(m.Counts.Conversations),
		"convkit_backup_files": float64(m.Counts.Files), "convkit_backup_bytes": float64(m.Counts.Bytes),
		"convkit_backup_invalid_logs": 1, "convkit_backup_strict": 1, "convkit_backup_unreadable_files": 0,
		"convkit_backup_online": 0,
	}
	for k, w := range want {
		if g, ok := v[k]; !ok || g != w {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, w)
		}
	}
	if len(v) != len(want) || res.Bytes == 0 || m.Counts.Conversations == 0 {
		t.Errorf("%d metrics, want %d: %v", len(v), len(want), v)
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode().Perm() != metricsMode {
		t.Errorf("mode %v, %v; want %v", fi.Mode(), err, os.FileMode(metricsMode))
	}

	// A failure keeps the success's time and figures.
	later := end.Add(time.Hour)
	if err := WriteMetrics(path, MetricsRun{End: later, Duration: time.Millisecond, ExitCode: 130}); err != nil {
		t.Fatal(err)
	}
	v2 := readExposition(t, path)
	for k, w := range want {
		switch k {
		case "convkit_backup_last_run_timestamp_seconds":
			w = float64(later.Unix())
		case "convkit_backup_last_run_exit_code":
			w = 130
		case "convkit_backup_duration_seconds":
			w = 0.001
		}
		if v2[k] != w {
			t.Errorf("after a failure: %s = %v, want %v", k, v2[k], w)
		}
	}

	// A link at the path is replaced; its target is untouched.
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("mine\n"), 0o600)
	link := filepath.Join(dir, "link.prom")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := WriteMetrics(link, MetricsRun{End: later, Result: res}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "mine\n" {
		t.Errorf("written through the link: %q", b)
	}
	if fi, err := os.Lstat(link); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the link was not replaced: %v %v", fi, err)
	}
	// No temporary file is left beside it.
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".tmp") {
			t.Errorf("left %s", e.Name())
		}
	}
}

func readExposition(t *testing.T, path string) map[string]float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := exposition(string(b))
	if err != nil {
		t.Fatalf("%s is not in the exposition format: %v\n%s", path, err, b)
	}
	return v
}

// TestLatest: the newest archive, refused when there is none, when it is
// older than the maximum age, and, when required, when its last
// verification did not match with every log read.
func TestLatest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "backups")
	if _, err := Latest(dir, LatestOptions{}); err == nil {
		t.Error("a missing directory: no error")
	}
	os.Mkdir(dir, 0o700)
	if _, err := Latest(dir, LatestOptions{}); !errors.Is(err, ErrNoArchive) {
		t.Errorf("an empty directory: %v", err)
	}
	dataDir, _ := generate(t, 5, 10, false)
	base := time.Date(2026, 9, 1, 3, 0, 0, 0, time.UTC)
	var last string
	for i := range 2 {
		dr, err := toDir(context.Background(), dataDir, dir, DirOptions{Options: Options{Now: fixedClock(base.Add(time.Duration(i) * time.Hour))}})
		if err != nil {
			t.Fatal(err)
		}
		last = dr.Archive
	}
	at := func(h int) func() time.Time { return fixedClock(base.Add(time.Duration(h) * time.Hour)) }
	a, err := Latest(dir, LatestOptions{MaxAge: Span{Hours: 2}, Now: at(3)})
	if err != nil || a.Path != last {
		t.Fatalf("fresh: %v, %v", a, err)
	}
	if a, err := Latest(dir, LatestOptions{MaxAge: Span{Hours: 2}, Now: at(4)}); err == nil || a.Path != last ||
		!strings.Contains(err.Error(), "older than 2h") {
		t.Errorf("3 hours old, at most 2: %v, %v", a, err)
	}
	// Taken an hour ahead of the clock (set back since): its age cannot be
	// told, so it is not fresh.
	if a, err := Latest(dir, LatestOptions{MaxAge: Span{Hours: 2}, Now: at(0)}); err == nil || a.Path != last ||
		!strings.Contains(err.Error(), "later than now") {
		t.Errorf("an hour in the future: %v, %v", a, err)
	}
	if _, err := Latest(dir, LatestOptions{Verified: true}); err == nil || !strings.Contains(err.Error(), "not verified") {
		t.Errorf("not verified: %v", err)
	}
	// The generated store's corrupt log: verified, but invalid.
	if _, _, _, err := VerifyArchive(context.Background(), last, VerifyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Latest(dir, LatestOptions{Verified: true}); err == nil || !strings.Contains(err.Error(), "do not read") {
		t.Errorf("verified, invalid: %v", err)
	}
}

// TestParseSpan: restic's spans, and what is not one.
func TestParseSpan(t *testing.T) {
	for in, want := range map[string]Span{"26h": {Hours: 26}, "7d": {Days: 7}, "1y6m": {Years: 1, Months: 6}, "2d12h": {Days: 2, Hours: 12},
		"1y2m3d4h": {1, 2, 3, 4}} {
		if got, err := ParseSpan(in); err != nil || got != want || got.String() != in {
			t.Errorf("%q: %+v %v (%s)", in, got, err, got)
		}
	}
	for _, bad := range []string{"", "7", "d", "1.5d", "3w", "1h2d", "1d1d", "-1d", "26 h", "9999999d"} {
		if s, err := ParseSpan(bad); err == nil {
			t.Errorf("%q: accepted as %+v", bad, s)
		}
	}
	at := time.Date(2026, 3, 31, 12, 0, 0, 0, time.UTC)
	if got := (Span{Months: 1, Hours: 12}).Before(at); !got.Equal(time.Date(2026, 3, 3, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("a month and 12 hours before %v: %v", at, got)
	}
}
