package cli

import (
	"math"
	"os"
	"runtime/debug"
	"testing"
)

func TestParseJobs(t *testing.T) {
	for _, ok := range []string{"1", "32", "+1", "01", " 1", "1e2", "2.0", "100"} {
		if _, err := parseJobs(ok); err != nil {
			t.Errorf("parseJobs(%q) = %v", ok, err)
		}
	}
	for _, bad := range []string{"0", "-1", "1.5", "abc", "", "0x10", "9007199254740992", "NaN", "Infinity", "1e400"} {
		if _, err := parseJobs(bad); err == nil || err.Error() != "--jobs must be a positive safe integer" {
			t.Errorf("parseJobs(%q) = %v", bad, err)
		}
	}
	if n, _ := parseJobs("1e2"); n != 100 {
		t.Errorf("1e2 = %d", n)
	}
}

// TestSoftMemoryLimit: a migration sets the soft memory limit to its budget less
// the program's own pages, and restores the previous one; a limit already
// set (GOMEMLIMIT, or the program) is left alone.
func TestSoftMemoryLimit(t *testing.T) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		t.Skip("GOMEMLIMIT is set")
	}
	if debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Skip("a memory limit is set")
	}
	restore := softMemoryLimit(memoryBudget(2))
	if got, want := debug.SetMemoryLimit(-1), int64(128<<20-unaccountedMemory); got != want {
		t.Errorf("limit with 2 jobs: %d, want %d", got, want)
	}
	// Nested: the limit set is kept, and restored by the outer run only.
	inner := softMemoryLimit(memoryBudget(8))
	if got := debug.SetMemoryLimit(-1); got != 128<<20-unaccountedMemory {
		t.Errorf("an inner run changed the limit to %d", got)
	}
	inner()
	restore()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("limit after the run: %d, want none", got)
	}

	t.Setenv("GOMEMLIMIT", "off")
	restore = softMemoryLimit(memoryBudget(1))
	got := debug.SetMemoryLimit(-1)
	restore()
	if got != math.MaxInt64 {
		t.Errorf("GOMEMLIMIT set, yet the run set a limit: %d", got)
	}
}
