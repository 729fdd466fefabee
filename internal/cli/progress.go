package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/progress"
	"github.com/convkit/convkit/internal/termtext"
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

// newProgress returns a job's progress bar on stderr (progressText; total
// <= 0: unknown yet), drawn only on a terminal without --json or --quiet;
// other output clears it first (termWriter), so they never share a line.
func (e *env) newProgress(what string, u unit, total int64) progressReporter {
	if e.g.JSON || e.g.Quiet || !e.terminal(e.stderr) {
		return nopReporter{}
	}
	r := newBarReporter(rawStream(e.stderr), what, u, total)
	r.line = &e.line
	r.line.mu.Lock()
	r.line.bar = r
	r.line.mu.Unlock()
	r.startTicker()
	return r
}

// rateAfter is how much progress a bar needs before it shows a rate and
// a time left: the first readings of a job (one log done in its first
// millisecond, a read of a file the cache holds) say nothing of the rest.
const rateAfter = 3 * time.Second

// rateWindow is the span of the latest progress the rate is taken over.
const rateWindow = 10 * time.Second

// newBarReporter draws a bar on w, whatever w is. progressbar draws the
// percent and the bar (a spinner without a total); the text after it is
// the reporter's own (progressText).
func newBarReporter(w io.Writer, what string, u unit, total int64) *barReporter {
	r := &barReporter{what: what, u: u, now: time.Now, line: &barLine{}}
	r.start = r.now()
	max := int64(-1) // a spinner
	if total > 0 {
		r.total, r.drawnTotal = total, total
		max = barMax(total)
	}
	r.bar = progressbar.NewOptions64(max,
		// Never the default (os.Stdout): stdout carries results only.
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowDescriptionAtLineEnd(),
		// The times are the reporter's text.
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionSetElapsedTime(false),
		// The reporter throttles itself; progressbar draws when told, and
		// only then (its own spinner goroutine would draw over a line).
		progressbar.OptionThrottle(0),
		progressbar.OptionSetSpinnerChangeInterval(0),
		// Leave no bar behind: the result or the error follows on a clean line.
		progressbar.OptionClearOnFinish(),
	)
	return r
}

// progressbar takes a bar whose count reaches its total for finished and
// draws it no more: it is given the count times barScale of a total
// times barScale plus one, which the count never reaches (the bar says
// 99% when every unit is done, until the reporter's Finish erases it).
const barScale = 100

func barMax(total int64) int64 { return total*barScale + 1 }

// barLine is the terminal line a bar is drawn on. Its lock orders the
// bar's drawing and every other write to the terminal (termWriter).
type barLine struct {
	mu  sync.Mutex
	bar *barReporter // the bar drawn, nil when none is
	// midLine: the last write to the terminal did not end its line, so
	// the bar waits (drawn there, it would overwrite the line).
	midLine bool
}

// barReporter is a progress bar. Its methods are safe for concurrent use.
type barReporter struct {
	line *barLine
	bar  *progressbar.ProgressBar
	what string
	u    unit
	now  func() time.Time

	// Under line.mu:
	total, done int64
	drawnTotal  int64 // the total progressbar was given
	start       time.Time
	samples     []progressSample // the latest progress, oldest first
	drawn       bool             // on the terminal now
	lastDraw    time.Time
	finished    bool
	stop        chan struct{}
}

type progressSample struct {
	at   time.Time
	done int64
}

// startTicker redraws the bar twice a second, so that the time and the
// spinner move while no unit ends (one large log).
func (r *barReporter) startTicker() {
	r.stop = make(chan struct{})
	go func() {
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-r.stop:
				return
			case <-t.C:
				r.line.mu.Lock()
				r.drawLocked(true)
				r.line.mu.Unlock()
			}
		}
	}()
}

func (r *barReporter) Add(n int64) {
	r.line.mu.Lock()
	defer r.line.mu.Unlock()
	if r.finished {
		return
	}
	now := r.now()
	if len(r.samples) == 0 {
		// Progress is measured from the first unit's start on, not from
		// the bar's: the job may have looked for its units first.
		r.samples = append(r.samples, progressSample{at: now, done: r.done})
	}
	r.done += n
	r.sample(now)
	r.drawLocked(false)
}

func (r *barReporter) SetTotal(n int64) {
	r.line.mu.Lock()
	defer r.line.mu.Unlock()
	if r.finished {
		return
	}
	if n <= 0 {
		n = 0
	}
	r.total = n
	r.drawLocked(true)
}

func (r *barReporter) Finish() {
	r.line.mu.Lock()
	defer r.line.mu.Unlock()
	if r.finished {
		return
	}
	r.finished = true
	if r.stop != nil {
		close(r.stop)
	}
	if r.drawn {
		r.clearLocked()
	}
	if r.line.bar == r {
		r.line.bar = nil
	}
}

// sample records the progress at now, keeping rateWindow of it (and the
// sample just before, the window's start).
func (r *barReporter) sample(now time.Time) {
	if last := r.samples[len(r.samples)-1]; now.Sub(last.at) < 250*time.Millisecond && len(r.samples) > 1 {
		r.samples[len(r.samples)-1] = progressSample{at: now, done: r.done}
	} else {
		r.samples = append(r.samples, progressSample{at: now, done: r.done})
	}
	for len(r.samples) > 2 && now.Sub(r.samples[1].at) > rateWindow {
		r.samples = r.samples[1:]
	}
}

// rate is the units a second over the latest progress, and whether there
// is enough of it (rateAfter) to say.
func (r *barReporter) rate(now time.Time) (float64, bool) {
	if len(r.samples) < 2 {
		return 0, false
	}
	first, last := r.samples[0], r.samples[len(r.samples)-1]
	span := now.Sub(first.at).Seconds()
	if now.Sub(first.at) < rateAfter || span <= 0 {
		return 0, false
	}
	return float64(last.done-first.done) / span, true
}

// drawLocked draws the bar, at most ten times a second unless force, and
// not while the terminal's line is taken by other output.
func (r *barReporter) drawLocked(force bool) {
	now := r.now()
	if r.finished || r.line.midLine || (!force && now.Sub(r.lastDraw) < 100*time.Millisecond) {
		return
	}
	if r.line.bar != nil && r.line.bar != r {
		return // another bar holds the line
	}
	rate, ok := r.rate(now)
	text := progressText(r.what, r.u, r.done, r.total, now.Sub(r.start), rate, ok)
	// progressbar draws when told to, here only: a change of its total
	// or its count draws too.
	if r.total != r.drawnTotal {
		if r.total > 0 {
			r.bar.ChangeMax64(barMax(r.total))
		} else {
			r.bar.ChangeMax64(-1)
		}
		r.drawnTotal = r.total
	}
	if r.total > 0 {
		_ = r.bar.Set64(min(r.done, r.total) * barScale)
	} else {
		_ = r.bar.Set64(r.done)
	}
	r.bar.Describe(text)
	r.drawn, r.lastDraw = true, now
}

// clearLocked erases the bar from the terminal.
func (r *barReporter) clearLocked() {
	_ = r.bar.Clear()
	r.drawn = false
}

// progressText is what a bar says after the bar itself: what it counts,
// how many of how many, then, with a rate to go by, the rate and the time
// left; and the time elapsed.
//
//	migrate: 1660/4744 logs, 145 logs/s [11s, 21s left]
//	backup: 3812 files archived [1s]
//	verify: 812 MiB/1.30 GiB, 231 MiB/s [3s, 2s left]
func progressText(what string, u unit, done, total int64, elapsed time.Duration, rate float64, rateKnown bool) string {
	var b strings.Builder
	b.WriteString(what + ": ")
	count := func(n int64) string {
		if u == unitBytes {
			return termtext.Size(n)
		}
		return strconv.FormatInt(n, 10)
	}
	b.WriteString(count(done))
	if total > 0 {
		b.WriteString("/" + count(total))
	}
	if u != unitBytes {
		b.WriteString(" " + string(u))
	}
	left := ""
	if rateKnown {
		switch {
		case u == unitBytes:
			fmt.Fprintf(&b, ", %s/s", termtext.Size(int64(rate)))
		case rate >= 1:
			fmt.Fprintf(&b, ", %.0f %s/s", rate, u)
		default:
			fmt.Fprintf(&b, ", %.1f %s/min", rate*60, u)
		}
		if total > 0 && rate > 0 && done < total {
			left = ", " + roundDuration(time.Duration(float64(total-done)/rate*float64(time.Second))).String() + " left"
		}
	}
	fmt.Fprintf(&b, " [%s%s]", roundDuration(elapsed), left)
	return b.String()
}

// roundDuration is d in whole seconds (minutes above an hour).
func roundDuration(d time.Duration) time.Duration {
	if d > time.Hour {
		return d.Round(time.Minute)
	}
	return d.Round(time.Second)
}

// termWriter is a stream that is a terminal: a write to it first clears
// the bar drawn there, so that the bar never shares a line with other
// output; the bar is drawn again on its next update.
type termWriter struct {
	w    io.Writer // the terminal's file
	line *barLine
}

func (w *termWriter) Write(p []byte) (int, error) {
	w.line.mu.Lock()
	defer w.line.mu.Unlock()
	if b := w.line.bar; b != nil && b.drawn {
		b.clearLocked()
	}
	n, err := w.w.Write(p)
	if n > 0 {
		w.line.midLine = p[n-1] != '\n'
	}
	return n, err
}

// rawStream is the file under a termWriter, else s itself.
func rawStream(s io.Writer) io.Writer {
	if t, ok := s.(*termWriter); ok {
		return t.w
	}
	return s
}

// isTerminal reports whether the stream s (a reader or a writer) is a
// terminal.
func isTerminal(s any) bool {
	if t, ok := s.(*termWriter); ok {
		s = t.w
	}
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

type nopReporter struct{ progress.Nop }

func (nopReporter) Finish() {}

// progressReader counts the bytes read through it on a bar, each byte once
// however often it is read (a dry run reads an archive file twice).
type progressReader struct {
	r        io.Reader
	p        progress.Progress
	pos, top int64
}

func (pr *progressReader) Read(b []byte) (int, error) {
	n, err := pr.r.Read(b)
	pr.pos += int64(n)
	if pr.pos > pr.top {
		pr.p.Add(pr.pos - pr.top)
		pr.top = pr.pos
	}
	return n, err
}

// Seek seeks the file read, when it is one.
func (pr *progressReader) Seek(off int64, whence int) (int64, error) {
	s, ok := pr.r.(io.Seeker)
	if !ok {
		return 0, errors.New("not a file")
	}
	pos, err := s.Seek(off, whence)
	if err == nil {
		pr.pos = pos
	}
	return pos, err
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
