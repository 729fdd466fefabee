package migrate

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/convlog/upgrade"
	"github.com/convkit/convkit/internal/dshroot"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/internal/termtext"
	"github.com/convkit/convkit/store"
)

// Counts are the outcomes of a set of inputs.
type Counts struct {
	Converted int `json:"converted"`
	AlreadyV4 int `json:"alreadyV4"`
	Failed    int `json:"failed"`
	Skipped   int `json:"skipped"`
	Planned   int `json:"planned,omitempty"`
}

// FailureItem is one failed input.
type FailureItem struct {
	InputPath   string `json:"inputPath"`
	Reason      string `json:"reason"`
	ErrorName   string `json:"errorName"`
	Message     string `json:"message"`
	EventType   string `json:"eventType,omitempty"`
	Member      string `json:"member,omitempty"` // of an unexpected_member failure
	Child       bool   `json:"child,omitempty"`  // a child session's failure
	ExpectedSeq *int64 `json:"expectedSeq,omitempty"`
	ActualSeq   *int64 `json:"actualSeq,omitempty"`

	version int // the input's format version, -1 when unknown
}

// FailureGroup gathers failures of one kind.
type FailureGroup struct {
	SourceVersion *int          `json:"sourceVersion"` // nil: unknown
	Reason        string        `json:"reason"`
	ErrorName     string        `json:"errorName"`
	EventType     string        `json:"eventType,omitempty"`
	Member        string        `json:"member,omitempty"`
	Child         bool          `json:"child,omitempty"`
	Count         int           `json:"count"`
	Items         []FailureItem `json:"items"`
}

// PlannedItem is one conversion a dry run would make.
type PlannedItem struct {
	InputPath   string `json:"inputPath"`
	Target      string `json:"target"`
	TargetBytes int64  `json:"targetBytes"`
}

// SummaryVersion is the summary's schemaVersion: the runtime's migrate
// summary's, which convkit's own documents (contract.Version) do not follow.
const SummaryVersion = 1

// Summary is summary.json.
type Summary struct {
	SchemaVersion   int               `json:"schemaVersion"`
	TargetVersion   int               `json:"targetVersion"`
	SessionRoot     string            `json:"sessionRoot"`
	Layout          Layout            `json:"layout"`
	DryRun          bool              `json:"dryRun"`
	InputCount      int               `json:"inputCount"`
	Jobs            int               `json:"jobs"`
	StartedAt       string            `json:"startedAt"`
	FinishedAt      string            `json:"finishedAt"`
	ToolVersion     string            `json:"toolVersion"`
	CheckoutCommit  *string           `json:"checkoutCommit"`
	Runtime         map[string]string `json:"runtime"`
	TextLogPath     string            `json:"textLogPath"`
	SummaryPath     string            `json:"summaryPath"`
	Totals          Counts            `json:"totals"`
	BySourceVersion map[string]Counts `json:"bySourceVersion"`
	FailureGroups   []FailureGroup    `json:"failureGroups"`
	Exclude         []string          `json:"exclude,omitempty"`
	// Interrupted: stopped before every input was worked on.
	Interrupted  bool          `json:"interrupted"`
	Planned      []PlannedItem `json:"planned,omitempty"`
	PlannedBytes int64         `json:"plannedBytes,omitempty"`

	converted map[string]bool // the conversations whose logs were converted
}

type report struct {
	mu        sync.Mutex
	opts      Options
	sum       *Summary
	dir       string
	log       *os.File
	logw      *bufio.Writer
	completed int
	failures  []FailureItem
	// summaryErr: summary.json was not written; cleaned: old folders removed.
	summaryErr error
	cleaned    int
}

const (
	reportPrefix = "convkit-migrate-v4-" // of every report folder's name
	reportMaxAge = 7 * 24 * time.Hour    // an unchanged report folder's life
)

// newReport makes the private report folder and its text log, after cleanReports.
func newReport(opts Options, root string, layout Layout) (*report, error) {
	base := opts.ReportDir
	if base == "" {
		base = os.TempDir()
	} else if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("--report-dir: %w", err)
	}
	cleaned := cleanReports(base, opts.Now().Add(-reportMaxAge))
	dir, err := os.MkdirTemp(base, reportPrefix)
	if err != nil {
		return nil, err
	}
	if err := durable.PrivateDir(dir); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "migration.log")
	f, err := durable.CreateExcl(logPath)
	if err != nil {
		return nil, err
	}
	var commit *string
	if opts.Revision != "" {
		commit = &opts.Revision
	}
	sum := &Summary{SchemaVersion: SummaryVersion, TargetVersion: targetVersion, SessionRoot: root, Layout: layout, DryRun: opts.DryRun,
		CheckoutCommit: commit,
		Jobs:           opts.Jobs, StartedAt: opts.Now().UTC().Format(time.RFC3339Nano), ToolVersion: opts.ToolVersion,
		Runtime:     map[string]string{"go": runtime.Version(), "platform": runtime.GOOS, "arch": runtime.GOARCH},
		TextLogPath: logPath, SummaryPath: filepath.Join(dir, "summary.json"), Exclude: opts.Exclude,
		BySourceVersion: map[string]Counts{}, FailureGroups: []FailureGroup{}, converted: map[string]bool{}}
	return &report{opts: opts, sum: sum, dir: dir, log: f, logw: bufio.NewWriter(f), cleaned: cleaned}, nil
}

// cleanReports removes and counts the report folders in base older than
// before that are ours alone (private, holding nothing else).
func cleanReports(base string, before time.Time) int {
	entries, err := os.ReadDir(base)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if !e.Type().IsDir() || !strings.HasPrefix(e.Name(), reportPrefix) {
			continue
		}
		dir := filepath.Join(base, e.Name())
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || !ownFile(fi) || !fi.ModTime().Before(before) {
			continue
		}
		files, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		ok := true
		for _, f := range files {
			fi, err := os.Lstat(filepath.Join(dir, f.Name()))
			ok = ok && err == nil && (f.Name() == "migration.log" || f.Name() == "summary.json") &&
				fi.Mode().IsRegular() && ownFile(fi) && fi.ModTime().Before(before)
		}
		if !ok {
			continue
		}
		for _, f := range files {
			os.Remove(filepath.Join(dir, f.Name()))
		}
		if os.Remove(dir) == nil {
			n++
		}
	}
	return n
}

// line reports a note: a line of the run's own (preamble, summary).
func (r *report) line(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.emit(Event{Action: "note", Message: fmt.Sprintf(format, args...)})
}

func (r *report) logOnly(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logw.WriteString(fmt.Sprintf(format, args...) + "\n")
	r.logw.Flush()
}

func versionKey(v int) string {
	if v < 0 {
		return "unknown"
	}
	return strconv.Itoa(v)
}

// emit writes the event's line and hands it to OnEvent; the caller holds r.mu.
func (r *report) emit(ev Event) {
	r.logw.WriteString(ev.Line() + "\n")
	r.logw.Flush()
	if r.opts.OnEvent != nil {
		r.opts.OnEvent(ev)
	}
}

// event reports in's step or outcome ev, counting an outcome.
func (r *report) event(in *input, ev Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.eventLocked(in, ev)
}

func (r *report) eventLocked(in *input, ev Event) {
	ev.Index, ev.Count, ev.Path, ev.Rel = in.index, r.sum.InputCount, in.path, in.rel
	if ev.MessageType == "" {
		ev.MessageType = "status"
	}
	if in.version >= 0 {
		v := in.version
		ev.Version = &v
	}
	switch ev.Action {
	case "start", "retry":
		ev.File, ev.Bytes = filepath.Base(in.path), in.size
	case "deferred":
	default:
		r.sum.Totals.add(ev.Action)
		c := r.sum.BySourceVersion[versionKey(in.version)]
		c.add(ev.Action)
		r.sum.BySourceVersion[versionKey(in.version)] = c
		r.completed++
		ev.Completed = r.completed
	}
	switch {
	case ev.Action == "converted" && in.log != nil:
		r.sum.converted[in.log.Conversation] = true
	case ev.Action == "planned":
		r.sum.Planned = append(r.sum.Planned, PlannedItem{InputPath: in.path, Target: ev.Target, TargetBytes: ev.TargetBytes})
		r.sum.PlannedBytes += ev.TargetBytes
	}
	r.emit(ev)
}

// add counts an outcome.
func (c *Counts) add(action string) {
	n := map[string]*int{"converted": &c.Converted, "already-v4": &c.AlreadyV4, "failed": &c.Failed, "skipped": &c.Skipped, "planned": &c.Planned}[action]
	if n != nil {
		*n++
	}
}

func (r *report) fail(in *input, err error, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	item := classify(in.path, err)
	item.version = in.version
	r.failures = append(r.failures, item)
	r.eventLocked(in, Event{MessageType: "error", Action: "failed", Message: item.Message, Seconds: d.Seconds()})
	r.logw.WriteString("  error chain: " + errorChain(err) + "\n")
	r.logw.Flush()
}

// errorChain names the Go types of an error's chain, outermost first.
func errorChain(err error) string {
	var b strings.Builder
	for err != nil {
		if b.Len() > 0 {
			b.WriteString(" > ")
		}
		fmt.Fprintf(&b, "%T", err)
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			var parts []string
			for _, e := range u.Unwrap() {
				parts = append(parts, errorChain(e))
			}
			b.WriteString(" (" + strings.Join(parts, "; ") + ")")
			err = nil
		default:
			err = nil
		}
	}
	return b.String()
}

var (
	unknownEventRe = regexp.MustCompile(`unknown (?:historical )?event type "([^"]+)"`)
	seqGapRe       = regexp.MustCompile(`seq gap \(expected (\d+), got (\d+)\)`)
	memberRe       = regexp.MustCompile(`has unexpected member "([^"]+)"`)
	memberTypeRe   = regexp.MustCompile(`(\S+) \d+ data has unexpected member `)
)

// classify gives a failure the runtime's reason and error name, its message without the path.
func classify(path string, err error) FailureItem {
	it := FailureItem{InputPath: path, Message: termtext.Reason(path, err)}
	var sc *upgrade.SourceChangedError
	if errors.As(err, &sc) && sc.Path == path {
		// Reason would leave the colon that preceded the path.
		it.Message = upgrade.ErrSourceChanged.Error() + ": " + sc.What
	}
	msg := err.Error()
	it.Child = strings.HasPrefix(msg, "child Session ")
	var fe *convlog.FormatError
	var ue *upgrade.Error
	var re *convlog.RuleError
	switch {
	case memberRe.MatchString(msg):
		it.Reason = "unexpected_member"
		it.Member = memberRe.FindStringSubmatch(msg)[1]
		if m := memberTypeRe.FindStringSubmatch(msg); m != nil {
			it.EventType = m[1]
		}
	case unknownEventRe.MatchString(msg):
		it.Reason = "unknown_event"
		it.EventType = unknownEventRe.FindStringSubmatch(msg)[1]
	case seqGapRe.MatchString(msg):
		it.Reason = "sequence_gap"
		m := seqGapRe.FindStringSubmatch(msg)
		e, _ := strconv.ParseInt(m[1], 10, 64)
		a, _ := strconv.ParseInt(m[2], 10, 64)
		it.ExpectedSeq, it.ActualSeq = &e, &a
	case errors.Is(err, upgrade.ErrSourceChanged):
		it.Reason = "source_changed"
	case errors.Is(err, store.ErrLocked), errors.Is(err, dshroot.ErrOwned):
		it.Reason = "write_locked"
	case errors.Is(err, convlog.ErrUnsupported):
		it.Reason = "unsupported_input"
	case errors.Is(err, convlog.ErrCorrupt), errors.Is(err, convlog.ErrIdentity), errors.As(err, &fe), errors.As(err, &ue), errors.As(err, &re):
		it.Reason = "corrupt_log"
	default:
		// A missing root, an unreadable file, the layout's refusals.
		it.Reason = "other"
	}
	it.ErrorName = errorNames[it.Reason]
	return it
}

// errorNames names each reason's failures as the runtime's migration does.
var errorNames = map[string]string{
	"unexpected_member": "SessionPersistenceCorruptionError",
	"unknown_event":     "SessionFormatUnsupportedError",
	"sequence_gap":      "SessionPersistenceCorruptionError",
	"source_changed":    "JsonlGenerationSourceChangedError",
	"write_locked":      "SessionAlreadyOwnedError",
	"unsupported_input": "SessionFormatUnsupportedError",
	"corrupt_log":       "SessionPersistenceCorruptionError",
	"other":             "Error",
}

// interrupted marks the run as stopped before every input was worked on;
// it and finish run once the jobs are done.
func (r *report) interrupted() {
	r.sum.Interrupted = true
	r.line("Interrupted: stopped after %d of %d input(s); the rest were not worked on, and a rerun goes on from what is done", r.completed, r.sum.InputCount)
}

// finish writes the summary lines and summary.json.
func (r *report) finish(opts Options) *Summary {
	r.sum.FinishedAt = opts.Now().UTC().Format(time.RFC3339Nano)
	sort.SliceStable(r.failures, func(i, j int) bool { return r.failures[i].InputPath < r.failures[j].InputPath })
	groups := map[string]*FailureGroup{}
	var keys []string
	for _, f := range r.failures {
		key := fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%s\x00%t", versionKey(f.version), f.Reason, f.ErrorName, f.EventType, f.Member, f.Child)
		g := groups[key]
		if g == nil {
			g = &FailureGroup{Reason: f.Reason, ErrorName: f.ErrorName, EventType: f.EventType, Member: f.Member, Child: f.Child}
			if f.version >= 0 {
				v := f.version
				g.SourceVersion = &v
			}
			groups[key] = g
			keys = append(keys, key)
		}
		g.Count++
		g.Items = append(g.Items, f)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r.sum.FailureGroups = append(r.sum.FailureGroups, *groups[k])
	}
	t := r.sum.Totals
	if r.sum.DryRun {
		r.line("Plan: %d log(s) would be converted, needing about %s", t.Planned, termtext.Size(r.sum.PlannedBytes))
	}
	r.line("Summary: converted=%d, already-V4=%d, failed=%d, skipped=%d", t.Converted, t.AlreadyV4, t.Failed, t.Skipped)
	if len(r.failures) > 0 {
		r.line("Failures (full messages are in the log):")
		for _, it := range r.failures {
			r.line("- %s: %s", termtext.Quote(it.InputPath), it.Message)
		}
	}
	r.line("Full log: %s", r.sum.TextLogPath)
	b, err := json.MarshalIndent(r.sum, "", "  ")
	if err == nil {
		b = append(b, '\n')
		err = writeSummary(r.sum.SummaryPath, b)
	}
	if err != nil {
		r.line("ERROR writing the JSON summary: %v", err)
		r.summaryErr = fmt.Errorf("the JSON summary was not written: %w", err)
	}
	r.line("JSON summary: %s", r.sum.SummaryPath)
	// The log ends with summary.json's bytes, as the runtime's does.
	r.logw.Write(b)
	r.logw.Flush()
	return r.sum
}

// writeSummary creates summary.json, refusing anything in its place (a FIFO would block).
func writeSummary(path string, b []byte) error {
	f, err := durable.CreateExcl(path)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	return errors.Join(err, f.Close())
}

func (r *report) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logw.Flush()
	r.log.Sync()
	r.log.Close()
}
