//go:build unix

package convlog

import (
	"syscall"
	"time"
)

// cpuTime is the process's CPU time, user and system: what a benchmark
// costs on a busy machine, where its wall time says more of the others.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
