package migrate

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// With one job, each input goes from its start to its result before the
// next starts, in index order: no publication overlaps the next input.
func TestOneJobIsSerial(t *testing.T) {
	root := t.TempDir()
	for i := range 5 {
		session(t, root, 3, fmt.Sprintf("s%d", i), "", "")
	}
	session(t, root, 4, "s5", "", "")
	var mu sync.Mutex
	var seq []string
	opts := Options{Jobs: 1, BeforePublish: func(src string) {
		mu.Lock()
		seq = append(seq, "publish")
		mu.Unlock()
	}}
	opts.OnEvent = func(ev Event) {
		if ev.Action == "note" {
			return
		}
		mu.Lock()
		seq = append(seq, fmt.Sprintf("%s %d", ev.Action, ev.Index))
		mu.Unlock()
	}
	opts.ReportDir = t.TempDir()
	sum := runSessionsOpts(t, root, opts)
	if sum.Totals != (Counts{Converted: 5, AlreadyV4: 1}) {
		t.Fatalf("%+v", sum.Totals)
	}
	var want []string
	for i := 1; i <= 5; i++ {
		want = append(want, fmt.Sprintf("start %d", i), "publish", fmt.Sprintf("converted %d", i))
	}
	want = append(want, "start 6", "already-v4 6")
	if got := strings.Join(seq, ", "); got != strings.Join(want, ", ") {
		t.Fatalf("order:\n%s\nwant\n%s", got, strings.Join(want, ", "))
	}
}

// --jobs 100 is reported as asked, in the banner and the summary, while
// at most maxJobs convert at once.
func TestJobsReportedAsAsked(t *testing.T) {
	root := t.TempDir()
	for i := range 3 {
		session(t, root, 3, fmt.Sprintf("s%d", i), "", "")
	}
	sum, out := runSessions(t, root, Options{Jobs: 100})
	if sum.Jobs != 100 || !strings.Contains(out, "\nSession jobs: 100\n") || sum.Totals.Converted != 3 {
		t.Fatalf("jobs %d, %+v\n%s", sum.Jobs, sum.Totals, out)
	}
	for jobs, want := range map[int]int{1: 1, 16: 16, 64: 64, 100: maxJobs, 1 << 53: maxJobs} {
		if got := Workers(jobs); got != want {
			t.Errorf("Workers(%d) = %d, want %d", jobs, got, want)
		}
	}
}
