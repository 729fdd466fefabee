// Package progress is the one interface through which convkit's library
// packages report how far a long job has come. It imports nothing, so the
// runtime server and the libraries can depend on it without pulling in a
// terminal library; the convkit command adapts it to a progress bar on a
// terminal and to nothing everywhere else.
package progress

// Progress receives a job's progress. Units are the job's own (bytes, logs,
// conversations); the caller that builds the reporter knows which.
//
// Implementations must be safe for concurrent use: jobs that run in
// parallel report through the same value. A library must not assume the
// value draws anything, and must not depend on the calls for correctness.
type Progress interface {
	// Add records that n more units are done.
	Add(n int64)
	// SetTotal sets the number of units the job will do, once it is known
	// or when it changes. n <= 0 means unknown.
	SetTotal(n int64)
}

// Nop is a Progress that discards everything. Libraries use it when their
// caller passed none:
//
//	if opts.Progress == nil {
//		opts.Progress = progress.Nop{}
//	}
type Nop struct{}

// Add does nothing.
func (Nop) Add(int64) {}

// SetTotal does nothing.
func (Nop) SetTotal(int64) {}

var _ Progress = Nop{}
