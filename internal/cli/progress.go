package cli

import (
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/convkit/convkit/durable"
	"github.com/convkit/convkit/progress"
)

// progressReporter is a progress.Progress the command finishes when its job
// ends, successful or not.
type progressReporter interface {
	progress.Progress
	// Finish removes the bar from the terminal. Call it once, before printing
	// the result.
	Finish()
}

// unit is what a bar counts: a plural noun ("logs", "conversations"), or
// bytes.
type unit string

const unitBytes unit = "bytes"

// newProgress returns the reporter for a job: a bar on stderr that says
// what it counts ("migrate: logs"), how many of how many when the total is
// known (total <= 0: unknown, or set later with SetTotal), the rate and,
// with a total, the time left. It draws only when stderr is a terminal and
// neither --json nor --quiet is set; otherwise it discards everything.
func (e *env) newProgress(what string, u unit, total int64) progressReporter {
	if e.g.JSON || e.g.Quiet || !e.terminal(e.stderr) {
		return nopReporter{}
	}
	return newBarReporter(e.stderr, what, u, total)
}

// newBarReporter draws a bar on w, whatever w is.
func newBarReporter(w io.Writer, what string, u unit, total int64) *barReporter {
	if total <= 0 {
		total = -1 // a spinner: count and rate, no time left
	}
	opts := []progressbar.Option{
		// Never the default (os.Stdout): stdout carries results only.
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(what + ": " + string(u)),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		// [elapsed:left] with a total, [elapsed] without.
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		// At most 10 redraws a second, however fast the job reports.
		progressbar.OptionThrottle(100 * time.Millisecond),
		// Leave no bar behind: the result or the error follows on a clean line.
		progressbar.OptionClearOnFinish(),
	}
	if u == unitBytes {
		opts = append(opts, progressbar.OptionShowBytes(true), progressbar.OptionUseIECUnits(true))
	} else {
		opts = append(opts, progressbar.OptionShowIts(), progressbar.OptionSetItsString(string(u)))
	}
	return &barReporter{bar: progressbar.NewOptions64(total, opts...)}
}

// isTerminal reports whether the stream s (a reader or a writer) is a
// terminal.
func isTerminal(s any) bool {
	f, ok := s.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// terminal is the "is this stream a terminal" test Main uses; tests
// inject their own (env.isTerminal).
func (e *env) terminal(s any) bool {
	if e.isTerminal != nil {
		return e.isTerminal(s)
	}
	return isTerminal(s)
}

type barReporter struct {
	bar *progressbar.ProgressBar
}

// The bar's own lock makes these safe for concurrent use. Its errors (an Add
// past the total, a failed write to the terminal) are not the job's errors.

func (r *barReporter) Add(n int64) { _ = r.bar.Add64(n) }

func (r *barReporter) SetTotal(n int64) {
	if n <= 0 {
		n = -1
	}
	r.bar.ChangeMax64(n)
}

func (r *barReporter) Finish() { _ = r.bar.Finish() }

type nopReporter struct{ progress.Nop }

func (nopReporter) Finish() {}

// progressReader counts the bytes read through it on a bar.
type progressReader struct {
	r io.Reader
	p progress.Progress
	n atomic.Int64
}

func (pr *progressReader) Read(b []byte) (int, error) {
	n, err := pr.r.Read(b)
	if n > 0 {
		pr.n.Add(int64(n))
		pr.p.Add(int64(n))
	}
	return n, err
}

// archiveInput opens an archive argument for reading ("-": stdin) and
// counts what is read on a bar of its bytes, with the file's size as the
// total.
func (e *env) archiveInput(name, what string) (io.Reader, progressReporter, func(), error) {
	if name == "-" {
		bar := e.newProgress(what, unitBytes, 0)
		return &progressReader{r: e.stdin, p: bar}, bar, func() {}, nil
	}
	// A link given as the archive is followed (it is only read); a FIFO
	// or a pipe (<(...)) never blocks the open, and is read as a stream.
	f, err := durable.OpenInput(name)
	if err != nil {
		return nil, nil, nil, err
	}
	var size int64
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		size = fi.Size()
	}
	bar := e.newProgress(what, unitBytes, size)
	return &progressReader{r: f, p: bar}, bar, func() { f.Close() }, nil
}
