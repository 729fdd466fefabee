// Package inspect reads one log of any version, plain or compressed, and
// describes it: a readable rendering, the events as stored, every format
// problem with its position, sizes by event type, and the derived history.
// It only reads: no file is ever changed.
//
// A Target names the log: Resolve takes a path, Stdin a log piped in,
// StoreTarget a store's log. Show renders it, Validate checks it, Measure
// counts it by event type and History derives what a model reads.
package inspect

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"path"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/convlog/upgrade"
	"github.com/convkit/convkit/internal/contract"
	"github.com/convkit/convkit/internal/termtext"
)

const SchemaVersion = contract.Version

// Filter selects events by type with shell patterns ("tool/*"), or all.
type Filter []string

func (f Filter) Match(typ string) bool {
	if len(f) == 0 {
		return true
	}
	for _, p := range f {
		if ok, _ := path.Match(p, typ); ok || p == typ {
			return true
		}
	}
	return false
}

func (f Filter) Validate() error {
	for _, p := range f {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("bad --type pattern %s: %v", termtext.Quote(p), err)
		}
	}
	return nil
}

// events is a log as stored or upgraded in memory.
type events interface {
	Events() iter.Seq2[*convlog.Event, error]
}

// each streams the events of r through fn, checking ctx every 1024 reads.
func each(ctx context.Context, r events, fn func(*convlog.Event) error) error {
	n := 0
	for e, err := range r.Events() {
		if n&1023 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		n++
		if err != nil {
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if n&1023 == 0 {
		return ctx.Err()
	}
	return nil
}

// ShowOptions choose what Show writes.
type ShowOptions struct {
	Filter  Filter
	JSON    bool           // each event as stored, one JSON object per line
	Upgrade bool           // the events as the log's version 4 successor would hold them
	Warn    func([]string) // the subagent children an upgrade could not read
}

// Show writes the log's events, escaped for the terminal or as JSON Lines;
// upgraded in memory, its subagent catalog completed from the children found.
func Show(ctx context.Context, t *Target, w io.Writer, opts ShowOptions) error {
	if !opts.Upgrade {
		r, err := t.open(convlog.ReaderOptions{})
		if err != nil {
			return err
		}
		defer r.Close()
		if opts.JSON {
			return writeJSONEvents(ctx, r, w, opts.Filter)
		}
		return render(ctx, w, opts.Filter, r.Header(), r.Compression(), "", r, r.Stats)
	}
	r, note, warnings, err := openUpgraded(t)
	if err != nil {
		return err
	}
	defer r.Close()
	if opts.Warn != nil {
		opts.Warn(warnings)
	}
	if opts.JSON {
		return writeJSONEvents(ctx, r, w, opts.Filter)
	}
	return render(ctx, w, opts.Filter, r.Header(), r.Compression(), note, r, r.SourceStats)
}

func render(ctx context.Context, w io.Writer, f Filter, h *convlog.Header, comp convlog.Compression, note string, r events, stats func() convlog.Stats) error {
	if _, err := fmt.Fprintf(w, "%s log %s, format v%d, %s, created %s\n", termtext.Escape(h.Type), termtext.Quote(h.ID), h.Version, comp, msTime(h.CreatedAt)); err != nil {
		return err
	}
	if h.Cwd != "" {
		fmt.Fprintf(w, "  cwd: %s\n", termtext.Escape(h.Cwd))
	}
	if h.ParentSession != "" {
		fmt.Fprintf(w, "  parent session: %s (origin %s, depth %d)\n", termtext.Escape(h.ParentSession), termtext.Escape(cmp.Or(h.Origin, "-")), h.DelegationDepth)
	}
	if h.IsSeeded || h.SeedLength != nil {
		fmt.Fprintf(w, "  seeded: inherits history from its parent\n")
	}
	if note != "" {
		fmt.Fprintf(w, "  %s\n", note)
	}
	err := each(ctx, r, func(e *convlog.Event) error {
		if !f.Match(e.Type) {
			return nil
		}
		flags := ""
		if e.Ignorable {
			flags += " [ignorable]"
		}
		if !e.Known {
			flags += " [unknown]"
		}
		if e.SurfaceOp != nil && e.SurfaceOp.Replace {
			flags += fmt.Sprintf(" [replaces %d..%d]", e.SurfaceOp.StartSeq, e.SurfaceOp.EndSeq)
		}
		seq := fmt.Sprintf("%d", e.Seq)
		if e.Packed > 1 {
			seq = fmt.Sprintf("%d-%d", e.Seq, e.Seq+e.Packed-1)
		}
		_, err := fmt.Fprintf(w, "%6s  %s  %s %s%s\n", seq, msTime(e.Time), termtext.Pad(termtext.Escape(e.Type), 24), termtext.Escape(summarize(e)), flags)
		return err
	})
	if err != nil {
		return err
	}
	st := stats()
	if st.TornTail {
		_, err = fmt.Fprintf(w, "torn tail: %d bytes after byte %d are not committed (left as they are)\n", st.TornBytes, st.CommittedBytes)
	}
	return err
}

func writeJSONEvents(ctx context.Context, r events, w io.Writer, f Filter) error {
	var buf []byte
	return each(ctx, r, func(e *convlog.Event) error {
		if !f.Match(e.Type) {
			return nil
		}
		buf = append(e.AppendJSON(buf[:0]), '\n')
		_, err := w.Write(buf)
		return err
	})
}

// Problem is one format problem found by Validate.
type Problem struct {
	Line   int64 `json:"line,omitempty"`
	Column int64 `json:"column,omitempty"`
	Offset int64 `json:"offset"` // plain-text offset of the line (or frame text)
	Frame  int64 `json:"frame,omitempty"`
	// FrameOffset is the frame's in the file, set whenever Frame is: frame
	// 1's offset 0 is an offset, not an absent one.
	FrameOffset *int64 `json:"frameOffset,omitempty"`
	Kind        string `json:"kind"`
	Rule        string `json:"rule,omitempty"`   // convlog.RuleOf
	Member      string `json:"member,omitempty"` // the event's member it is about
	Message     string `json:"message"`
}

// frameOffset is the FrameOffset of a problem in frame at off.
func frameOffset(frame, off int64) *int64 {
	if frame == 0 {
		return nil
	}
	return &off
}

func (p Problem) Position() convlog.Position {
	pos := convlog.Position{Line: p.Line, Column: p.Column, Offset: p.Offset, Frame: p.Frame}
	if p.FrameOffset != nil {
		pos.FrameOffset = *p.FrameOffset
	}
	return pos
}

// Validation is the result of Validate.
type Validation struct {
	SchemaVersion int       `json:"schemaVersion"`
	Path          string    `json:"path"`
	Valid         bool      `json:"valid"`
	Version       int       `json:"version"`
	Events        int64     `json:"events"`
	TornTail      bool      `json:"tornTail"`
	Problems      []Problem `json:"problems"`
	MaxProblems   int       `json:"maxProblems"`
	MoreProblems  int64     `json:"moreProblems"`        // beyond MaxProblems, up to maxUnlisted
	StoppedAt     *Problem  `json:"stoppedAt,omitempty"` // maxUnlisted past the limit
	Warnings      []Problem `json:"warnings"`            // a zstd framing other than the writer's
}

// ValidateOptions tune Validate.
type ValidateOptions struct {
	MaxProblems int // listed (default DefaultMaxProblems)
}

const (
	DefaultMaxProblems = 100
	// maxUnlisted problems past the limit stop the reading: the outcome is
	// decided long before.
	maxUnlisted = 10000
)

func problemOf(fe *convlog.FormatError) Problem {
	kind := "corrupt"
	if errors.Is(fe, convlog.ErrUnsupported) {
		kind = "unsupported"
	}
	rule, member := convlog.RuleOf(fe)
	return Problem{Line: fe.Pos.Line, Column: fe.Pos.Column, Offset: fe.Pos.Offset, Frame: fe.Pos.Frame,
		FrameOffset: frameOffset(fe.Pos.Frame, fe.Pos.FrameOffset), Kind: kind, Rule: rule, Member: member, Message: fe.Msg}
}

// Validate collects the log's problems and admits its events as a version 4
// reader does; a torn tail is not a problem.
func Validate(ctx context.Context, t *Target, opts ValidateOptions) (*Validation, error) {
	if opts.MaxProblems <= 0 {
		opts.MaxProblems = DefaultMaxProblems
	}
	v := &Validation{SchemaVersion: SchemaVersion, Path: t.Path, Problems: []Problem{}, MaxProblems: opts.MaxProblems, Warnings: []Problem{}}
	var r *convlog.Reader
	add := func(pr Problem) {
		switch {
		case len(v.Problems) < opts.MaxProblems:
			v.Problems = append(v.Problems, pr)
		case v.MoreProblems < maxUnlisted:
			v.MoreProblems++
		default:
			v.StoppedAt = &pr
			if r != nil {
				r.Stop()
			}
		}
	}
	r, err := t.open(convlog.ReaderOptions{OnProblem: func(fe *convlog.FormatError) { add(problemOf(fe)) }})
	var fe *convlog.FormatError
	var ie *convlog.IdentityError
	switch {
	case errors.As(err, &fe):
		add(problemOf(fe))
		return v, nil
	case errors.As(err, &ie):
		// Its header names another log: its events are not read as this
		// log's.
		v.Version = ie.Version
		add(Problem{Line: 1, Kind: "corrupt", Rule: "header", Message: ie.Msg})
		return v, nil
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	v.Version = r.Header().Version
	err = convlog.Admit(ctx, r, r.Header(), convlog.AdmitOptions{Problem: func(err error) bool {
		if errors.As(err, &fe) && v.StoppedAt == nil {
			add(problemOf(fe))
		}
		return true
	}})
	if errors.As(err, &fe) {
		add(problemOf(fe))
	} else if err != nil {
		return nil, err
	}
	st := r.Stats()
	v.Events, v.TornTail = st.Events, st.TornTail
	if f := st.Framing; !f.Canonical() {
		more := ""
		if f.Departures > 1 {
			more = fmt.Sprintf(" (and %d more places)", f.Departures-1)
		}
		v.Warnings = append(v.Warnings, Problem{Frame: f.FirstFrame, FrameOffset: frameOffset(f.FirstFrame, f.FirstOffset), Kind: "framing",
			Message: fmt.Sprintf("zstd framing is not the writer's (frame 1 the header line alone, then one frame per batch, each ending between two lines): %s%s; it is read all the same, and an append adds frames of the writer's", f.First, more)})
	}
	v.Valid = len(v.Problems) == 0
	return v, nil
}

type TypeStats struct {
	Type   string `json:"type"`
	Events int64  `json:"events"`
	Bytes  int64  `json:"bytes"`
}

// Stats is the result of Measure.
type Stats struct {
	SchemaVersion         int         `json:"schemaVersion"`
	Path                  string      `json:"path"`
	LogType               string      `json:"logType"`
	ID                    string      `json:"id"`
	Version               int         `json:"version"`
	Compression           string      `json:"compression"`
	FileBytes             int64       `json:"fileBytes"`
	PlainBytes            int64       `json:"plainBytes"`
	CompressionRatio      float64     `json:"compressionRatio"`
	Events                int64       `json:"events"`
	Frames                int64       `json:"frames"`
	FramesWithoutChecksum int64       `json:"framesWithoutChecksum"`
	TornTail              bool        `json:"tornTail"`
	CommittedBytes        int64       `json:"committedBytes"`
	TornBytes             int64       `json:"tornBytes"`
	RecoveredLines        int64       `json:"recoveredLines"`
	CanonicalFraming      bool        `json:"canonicalFraming"` // FramingNote says how not
	FramingNote           string      `json:"framingNote,omitempty"`
	ByType                []TypeStats `json:"byType"`
}

func Measure(ctx context.Context, t *Target, f Filter) (*Stats, error) {
	r, err := t.open(convlog.ReaderOptions{})
	if err != nil {
		return nil, err
	}
	defer r.Close()
	by := map[string]*TypeStats{}
	err = each(ctx, r, func(e *convlog.Event) error {
		if !f.Match(e.Type) {
			return nil
		}
		ts := by[e.Type]
		if ts == nil {
			ts = &TypeStats{Type: e.Type}
			by[e.Type] = ts
		}
		ts.Events++
		ts.Bytes += int64(len(e.Raw)) + 1
		return nil
	})
	if err != nil {
		return nil, err
	}
	st := r.Stats()
	h := r.Header()
	s := &Stats{SchemaVersion: SchemaVersion, Path: t.Path, LogType: h.Type, ID: h.ID, Version: h.Version,
		Compression: r.Compression().String(), FileBytes: st.FileBytes, PlainBytes: st.PlainBytes,
		Events: st.Events, Frames: st.Frames, FramesWithoutChecksum: st.FramesWithoutChecksum,
		TornTail: st.TornTail, CommittedBytes: st.CommittedBytes, TornBytes: st.TornBytes,
		RecoveredLines: st.RecoveredLines, CanonicalFraming: st.Framing.Canonical(), FramingNote: st.Framing.First, ByType: []TypeStats{}}
	if st.FileBytes > 0 {
		s.CompressionRatio = float64(st.PlainBytes) / float64(st.FileBytes)
	}
	for _, ts := range by {
		s.ByType = append(s.ByType, *ts)
	}
	slices.SortFunc(s.ByType, func(a, b TypeStats) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), strings.Compare(a.Type, b.Type))
	})
	return s, nil
}

func RenderStats(s *Stats, w io.Writer) error {
	fmt.Fprintf(w, "%s log %s, format v%d, %s\n", termtext.Escape(s.LogType), termtext.Quote(s.ID), s.Version, s.Compression)
	fmt.Fprintf(w, "file bytes:  %d\nplain bytes: %d", s.FileBytes, s.PlainBytes)
	if s.Compression == "zstd" {
		fmt.Fprintf(w, " (ratio %.2f)\nframes:      %d", s.CompressionRatio, s.Frames)
		if s.FramesWithoutChecksum > 0 {
			fmt.Fprintf(w, " (%d without checksum)", s.FramesWithoutChecksum)
		}
		if !s.CanonicalFraming {
			fmt.Fprintf(w, " (not the writer's framing: %s)", termtext.Escape(s.FramingNote))
		}
	}
	fmt.Fprintf(w, "\nevents:      %d\n", s.Events)
	if s.TornTail {
		fmt.Fprintf(w, "torn tail:   %d bytes after byte %d", s.TornBytes, s.CommittedBytes)
		if s.RecoveredLines > 0 {
			fmt.Fprintf(w, " (%d complete lines recovered from the torn frame)", s.RecoveredLines)
		}
		fmt.Fprintln(w)
	} else {
		fmt.Fprintf(w, "torn tail:   none\n")
	}
	fmt.Fprintf(w, "\n%s %10s %14s\n", termtext.Pad("TYPE", 40), "EVENTS", "BYTES")
	for _, t := range s.ByType {
		if _, err := fmt.Fprintf(w, "%s %10d %14d\n", termtext.Pad(termtext.Escape(t.Type), 40), t.Events, t.Bytes); err != nil {
			return err
		}
	}
	return nil
}

// HistoryEntry is one message of the derived history.
type HistoryEntry struct {
	Seq     int64           `json:"seq"`
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Source  json.RawMessage `json:"source"`
	Message json.RawMessage `json:"message"`
}

// History derives the messages a model reads from a log upgraded in memory.
func History(ctx context.Context, t *Target) ([]HistoryEntry, error) {
	r, err := t.OpenV4(upgrade.Options{})
	if err != nil {
		return nil, err
	}
	p := t.Path
	defer r.Close()
	if v := r.SourceVersion(); v > convlog.CurrentVersion {
		return nil, fmt.Errorf("%s: format v%d is newer than this build reads (v%d)", p, v, convlog.CurrentVersion)
	}
	h := &convlog.History{}
	err = convlog.Admit(ctx, r, r.Header(), convlog.AdmitOptions{Each: func(e *convlog.Event, _ *convlog.Validator) error {
		if err := h.Apply(e); err != nil {
			return fmt.Errorf("%s: line %d: %w", p, r.SourceStats().Lines, err)
		}
		return nil
	}})
	if err != nil {
		return nil, err
	}
	var out []HistoryEntry
	for _, m := range h.Messages() {
		out = append(out, HistoryEntry{Seq: m.Seq, ID: m.Message.ID(), Role: m.Message.Role(),
			Source: m.Message.Source().Raw, Message: m.Message.JSON()})
	}
	return out, nil
}

// WriteMessage writes "[seq] role (source kind) id" and flags, then the
// message's readable text (at most 2000 characters) indented and escaped.
func WriteMessage(w io.Writer, seq int64, role, id, flags string, source, message json.RawMessage) error {
	var src struct {
		Kind string `json:"kind"`
	}
	json.Unmarshal(source, &src)
	if _, err := fmt.Fprintf(w, "[%d] %s (%s) %s%s\n", seq, termtext.Escape(role), termtext.Escape(src.Kind), termtext.Escape(id), flags); err != nil {
		return err
	}
	for _, line := range strings.Split(clip(convlog.ReadableText(message), 2000), "\n") {
		if _, err := fmt.Fprintf(w, "    %s\n", termtext.Escape(line)); err != nil {
			return err
		}
	}
	return nil
}

func summarize(e *convlog.Event) string {
	var d map[string]json.RawMessage
	if json.Unmarshal(e.Data, &d) == nil {
		msg := d["message"]
		if e.Type == convlog.TypeUserMessage {
			msg = e.Data
		}
		if msg != nil {
			var m struct {
				Role string `json:"role"`
			}
			json.Unmarshal(msg, &m)
			text := strings.ReplaceAll(clip(convlog.ReadableText(msg), 100), "\n", " ")
			return fmt.Sprintf("%s: %s", m.Role, text)
		}
	}
	return clip(string(e.Data), 100)
}

func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

func msTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z")
}
