package cli

import (
	"errors"
	"math"
	"os"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"
)

// jobsPattern accepts what a person means by a whole number: digits with
// an optional sign, fraction of zeros or exponent ("32", "+1", "01", "1e2").
var jobsPattern = regexp.MustCompile(`^\+?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$`)

// parseJobs parses a --jobs value (migrate, reindex): a positive safe
// integer. How many workers actually run is the library's to bound.
func parseJobs(s string) (int, error) {
	bad := errors.New("--jobs must be a positive safe integer")
	t := strings.TrimSpace(s)
	if !jobsPattern.MatchString(t) {
		return 0, bad
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 1 || f > 1<<53-1 || f != float64(int64(f)) {
		return 0, bad
	}
	return int(f), nil
}

// memoryBudget is the peak memory (resident set) a migration with the given
// number of jobs is meant to stay within: 64 MiB for the process and 32 MiB
// per job.
func memoryBudget(jobs int) int64 { return 64<<20 + int64(jobs)*(32<<20) }

// unaccountedMemory is what a process's resident set holds beside the
// memory the Go runtime counts against its limit: the program's own code
// and data pages (about 8 MiB at start), with some room.
const unaccountedMemory = 12 << 20

// softMemoryLimit sets the process's soft memory limit (the Go runtime's)
// to memoryBudget less unaccountedMemory, unless GOMEMLIMIT or the program
// has set one, and returns what restores the previous limit. It is the
// process's concern, so the command sets it, not the library. The garbage
// collector lets the heap grow to twice what is live (GOGC 100); a
// migration job's live data is tens of megabytes when lines are megabytes
// long (see docs/PERFORMANCE.md), so that growth alone could pass the
// budget. Below the limit the limit does nothing; near it the collector
// runs more often; a job whose live data passes it (lines of tens of
// megabytes) still finishes, the collector then taking up to half the CPU.
func softMemoryLimit(jobs int) (restore func()) { return softMemoryLimitOf(memoryBudget(jobs)) }

// softMemoryLimitOf is softMemoryLimit for a process meant to stay within
// budget bytes (a backup: 64 MiB, whatever the store's size).
func softMemoryLimitOf(budget int64) (restore func()) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return func() {}
	}
	prev := debug.SetMemoryLimit(-1)
	if prev != math.MaxInt64 {
		return func() {}
	}
	debug.SetMemoryLimit(budget - unaccountedMemory)
	return func() { debug.SetMemoryLimit(prev) }
}
