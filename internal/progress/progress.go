// Package progress is how convkit's libraries report how far a long job
// has come. It imports nothing, so the runtime and the libraries depend on
// it without a terminal library; the convkit command draws it as a bar on
// a terminal and discards it everywhere else.
package progress

// Progress receives a job's progress in the job's own units (bytes, logs,
// conversations). It must be safe for concurrent use (parallel workers
// report through one value), and a library must not depend on its calls
// for correctness.
type Progress interface {
	Add(n int64)      // n more units are done
	SetTotal(n int64) // the units the job will do, once known or changed; n <= 0: unknown
}

// Nop discards everything: a library's default when its caller passed none.
type Nop struct{}

func (Nop) Add(int64)      {}
func (Nop) SetTotal(int64) {}
