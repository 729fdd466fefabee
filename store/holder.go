package store

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The kernel drops runtime.lock when its holder dies but the record in the
// file stays, so a record is believed only when it can be the holder's: made
// on this host by a live process started before the record was written and,
// where /proc/locks says, one of the lock's holders.

// startSlack absorbs the second-granular boot time and clock adjustments.
const startSlack = 2 * time.Second

// holderCheck is who holds runtime.lock: as in LockedError.
type holderCheck struct {
	holder  *Holder
	ignored string
	kernel  []int
}

// checkHolder reads and checks the record of the held lock file at path.
func checkHolder(path string) holderCheck {
	var hc holderCheck
	kernel, listed := lockPIDs(path)
	if listed {
		hc.kernel = kernel
	}
	h := readHolder(path)
	if h == nil {
		return hc
	}
	if why := recordMismatch(h, kernel, listed); why != "" {
		hc.ignored = "the last record names pid " + strconv.Itoa(h.PID) + why
		return hc
	}
	hc.holder = h
	return hc
}

// recordMismatch says why h cannot be the lock holder's record, or "".
func recordMismatch(h *Holder, kernel []int, listed bool) string {
	if host, err := os.Hostname(); err == nil && h.Host != "" && h.Host != host {
		return " on host " + h.Host + ", which cannot be checked from this host"
	}
	if alive, known := processAlive(h.PID); known && !alive {
		return ", which is not running"
	}
	if start, ok := processStart(h.PID); ok && !h.StartedAt.IsZero() && start.After(h.StartedAt.Add(startSlack)) {
		return ", now a process started at " + start.UTC().Format(time.RFC3339) + ", after the record was written"
	}
	// The kernel's pid of a lock held in another pid namespace may be 0.
	if listed && !slices.Contains(kernel, h.PID) && slices.ContainsFunc(kernel, func(p int) bool { return p > 0 }) {
		return ", which does not hold it"
	}
	return ""
}

// pidList is "pid 1" or "pids 1, 2".
func pidList(pids []int) string {
	var s []string
	for _, p := range pids {
		if p > 0 {
			s = append(s, strconv.Itoa(p))
		}
	}
	if len(s) == 1 {
		return "pid " + s[0]
	}
	return "pids " + strings.Join(s, ", ")
}

// noRecordDetail is what is known of a holder that left no record.
func noRecordDetail(ignored string, kernel []int) string {
	var parts []string
	if len(kernel) > 0 && slices.ContainsFunc(kernel, func(p int) bool { return p > 0 }) {
		parts = append(parts, "the kernel lists "+pidList(kernel)+" as holding it")
	}
	if ignored != "" {
		parts = append(parts, ignored)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, "; ") + ")"
}
