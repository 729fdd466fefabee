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

// unit is what a bar counts: a plural noun, or bytes.
type unit string

const unitBytes unit = "bytes"

// newProgress returns a job's bar on a terminal's stderr (total <= 0:
// unknown), nil (reporting nothing) elsewhere or under --json or --quiet.
func (e *env) newProgress(what string, u unit, total int64) *barReporter {
	if e.g.JSON || e.g.Quiet || !e.terminal(e.stderr) {
		return nil
	}
	w := e.stderr
	if t, ok := w.(*termWriter); ok {
		w = t.w // the bar clears itself
	}
	r := newBarReporter(w, what, u, total)
	r.line = &e.line
	r.line.mu.Lock()
	r.line.bar = r
	r.line.mu.Unlock()
	r.startTicker()
	return r
}

// rateAfter is how long a bar runs before it shows a rate and a time left:
// the first readings of a job say nothing of the rest.
const rateAfter = 3 * time.Second

// rateWindow is the span the rate is taken over.
const rateWindow = 10 * time.Second

// newBarReporter draws a bar on w, whatever w is: progressbar's percent and
// bar (a spinner without a total), then progressText.
func newBarReporter(w io.Writer, what string, u unit, total int64) *barReporter {
	r := &barReporter{what: what, u: u, now: time.Now, line: &barLine{}}
	r.start = r.now()
	r.total = max(total, 0)
	r.bar = progressbar.NewOptions64(barMax(r.total),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowDescriptionAtLineEnd(),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionSetElapsedTime(false),
		// The reporter throttles itself; progressbar draws when told, and
		// only then (its own spinner goroutine would draw over a line).
		progressbar.OptionThrottle(0),
		progressbar.OptionSetSpinnerChangeInterval(0),
		progressbar.OptionClearOnFinish(),
	)
	return r
}

// progressbar stops drawing a bar whose count reaches its total, so it is
// given count*barScale of total*barScale+1, which the count never reaches;
// -1 is a spinner.
const barScale = 100

func barMax(total int64) int64 {
	if total <= 0 {
		return -1
	}
	return total*barScale + 1
}

// barLine is the terminal line a bar is drawn on; its lock orders the bar's
// drawing and every other write to the terminal (termWriter).
type barLine struct {
	mu      sync.Mutex
	bar     *barReporter // the bar drawn, nil when none is
	midLine bool         // the last write did not end its line: the bar waits
}

// barReporter is a progress bar, safe for concurrent use.
type barReporter struct {
	line *barLine
	bar  *progressbar.ProgressBar
	what string
	u    unit
	now  func() time.Time

	// Under line.mu:
	total, done int64
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

// startTicker redraws the bar twice a second, so its time moves.
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

// do runs fn under the line's lock unless the bar is nil or finished.
func (r *barReporter) do(fn func()) {
	if r == nil {
		return
	}
	r.line.mu.Lock()
	defer r.line.mu.Unlock()
	if !r.finished {
		fn()
	}
}

func (r *barReporter) Add(n int64) {
	r.do(func() {
		now := r.now()
		if len(r.samples) == 0 {
			// From the first unit's start: the job may have looked for them first.
			r.samples = append(r.samples, progressSample{at: now, done: r.done})
		}
		r.done += n
		r.sample(now)
		r.drawLocked(false)
	})
}

func (r *barReporter) SetTotal(n int64) {
	r.do(func() {
		r.total = max(n, 0)
		r.drawLocked(true)
	})
}

func (r *barReporter) Finish() {
	r.do(func() {
		r.finished = true
		if r.stop != nil {
			close(r.stop)
		}
		if r.drawn {
			_ = r.bar.Clear()
		}
		if r.line.bar == r {
			r.line.bar = nil
		}
	})
}

// sample records the progress at now, keeping rateWindow of it.
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

// drawLocked draws the bar, at most ten times a second unless force.
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
	if m := barMax(r.total); r.bar.GetMax64() != m {
		r.bar.ChangeMax64(m)
	}
	if r.total > 0 {
		_ = r.bar.Set64(min(r.done, r.total) * barScale)
	} else {
		_ = r.bar.Set64(r.done)
	}
	r.bar.Describe(text)
	r.drawn, r.lastDraw = true, now
}

// progressText is what a bar says after the bar itself:
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

func roundDuration(d time.Duration) time.Duration {
	if d > time.Hour {
		return d.Round(time.Minute)
	}
	return d.Round(time.Second)
}

// termWriter is a terminal stream: a write first clears the bar drawn
// there, so the bar never shares a line with other output.
type termWriter struct {
	w    io.Writer
	line *barLine
}

func (w *termWriter) Write(p []byte) (int, error) {
	w.line.mu.Lock()
	defer w.line.mu.Unlock()
	if b := w.line.bar; b != nil && b.drawn {
		_ = b.bar.Clear()
		b.drawn = false
	}
	n, err := w.w.Write(p)
	if n > 0 {
		w.line.midLine = p[n-1] != '\n'
	}
	return n, err
}

func isTerminal(s any) bool {
	if r, ok := s.(*resultWriter); ok {
		s = r.w
	}
	if t, ok := s.(*termWriter); ok {
		s = t.w
	}
	f, ok := s.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

func (e *env) terminal(s any) bool {
	if e.isTerminal != nil {
		return e.isTerminal(s)
	}
	return isTerminal(s)
}

// progressReader counts each byte read once (a dry run reads a file twice).
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

// archiveInput opens an archive argument ("-": stdin) behind a bar of bytes.
func (e *env) archiveInput(name, what string) (io.Reader, *barReporter, func(), error) {
	if name == "-" {
		bar := e.newProgress(what, unitBytes, 0)
		return &progressReader{r: e.stdin, p: bar}, bar, func() {}, nil
	}
	// A link is followed (it is only read); a FIFO is read as a stream.
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
