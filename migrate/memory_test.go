package migrate

import (
	"math"
	"os"
	"runtime/debug"
	"testing"
)

// TestSoftMemoryLimit: a run sets the soft memory limit to its budget less
// the program's own pages, and restores the previous one; a limit already
// set (GOMEMLIMIT, or the program) is left alone.
func TestSoftMemoryLimit(t *testing.T) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		t.Skip("GOMEMLIMIT is set")
	}
	if debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Skip("a memory limit is set")
	}
	restore := softMemoryLimit(2)
	if got, want := debug.SetMemoryLimit(-1), int64(128<<20-unaccountedMemory); got != want {
		t.Errorf("limit with 2 jobs: %d, want %d", got, want)
	}
	// Nested: the limit set is kept, and restored by the outer run only.
	inner := softMemoryLimit(8)
	if got := debug.SetMemoryLimit(-1); got != 128<<20-unaccountedMemory {
		t.Errorf("an inner run changed the limit to %d", got)
	}
	inner()
	restore()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("limit after the run: %d, want none", got)
	}

	t.Setenv("GOMEMLIMIT", "off")
	restore = softMemoryLimit(1)
	got := debug.SetMemoryLimit(-1)
	restore()
	if got != math.MaxInt64 {
		t.Errorf("GOMEMLIMIT set, yet the run set a limit: %d", got)
	}
}
