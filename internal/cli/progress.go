package cli

import (
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

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

// newProgress returns the reporter for a job of total units (total <= 0:
// unknown). It draws a bar on stderr only when stderr is a terminal and
// neither --json nor --quiet is set; otherwise it discards everything.
func newProgress(stderr io.Writer, total int64, description string, g *globals) progressReporter {
	if g.JSON || g.Quiet || !isTerminal(stderr) {
		return nopReporter{}
	}
	return newBarReporter(stderr, total, description)
}

// newBarReporter draws a bar on w, whatever w is.
func newBarReporter(w io.Writer, total int64, description string) *barReporter {
	if total <= 0 {
		total = -1 // a spinner
	}
	bar := progressbar.NewOptions64(total,
		// Never the default (os.Stdout): stdout carries results only.
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(description),
		progressbar.OptionShowCount(),
		progressbar.OptionSetWidth(30),
		// At most 10 redraws a second, however fast the job reports.
		progressbar.OptionThrottle(100*time.Millisecond),
		// Leave no bar behind: the result or the error follows on a clean line.
		progressbar.OptionClearOnFinish(),
	)
	return &barReporter{bar: bar}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
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
