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

// checkHolder fills in st, of a held lock file, with what its record and
// the kernel say of the holder.
func checkHolder(st *Status) {
	kernel, listed := lockPIDs(st.Path)
	if listed {
		st.KernelPIDs = kernel
	}
	h := readHolder(st.Path)
	if h == nil {
		return
	}
	if why := recordMismatch(h, kernel, listed); why != "" {
		st.RecordIgnored = "the last record names pid " + strconv.Itoa(h.PID) + why
		return
	}
	st.Holder = h
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

// NoRecordText describes a lock held by a process that left no record,
// with what is known of it.
func (st Status) NoRecordText() string {
	var parts []string
	if slices.ContainsFunc(st.KernelPIDs, func(p int) bool { return p > 0 }) {
		parts = append(parts, "the kernel lists "+pidList(st.KernelPIDs)+" as holding it")
	}
	if st.RecordIgnored != "" {
		parts = append(parts, st.RecordIgnored)
	}
	if len(parts) == 0 {
		return "held by a process that left no record"
	}
	return "held by a process that left no record (" + strings.Join(parts, "; ") + ")"
}
