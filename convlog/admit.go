package convlog

import (
	"context"
	"errors"
	"iter"
	"strings"
)

// Admission is what a version 4 reader admits of a log: the header, every
// line's envelope (the Reader), every event's Validator checks, and what
// only the end shows (Finish). Admit is the one function that runs it over
// a whole log, for migrate, inspect and reindex alike.

// EventSource gives a log's events in order: a *Reader, or an upgrading
// reader giving an older log's version 4 events. A RuleProblem method, if
// it has one, places a refusal in the log.
type EventSource interface {
	Events() iter.Seq2[*Event, error]
}

type ruleLocator interface {
	RuleProblem(error) error
}

// AdmitOptions tune Admit.
type AdmitOptions struct {
	// Each, when set, is called with every event admitted, and the
	// validator that admitted it (its Message is the event's stored
	// message); an error it returns ends Admit with that error.
	Each func(e *Event, v *Validator) error
	// Problem, when set, is given each refusal (as Admit would return
	// it) and the read goes on while it returns true; without it Admit
	// returns the first.
	Problem func(err error) bool
}

// Admit reads the events src has left, a log of header h, and checks each
// as a version 4 reader admits it, then the log's end. It returns the
// first refusal (with opts.Problem, nil once every event was read), a
// reading error of src as it is, or ctx's error.
func Admit(ctx context.Context, src EventSource, h *Header, opts AdmitOptions) error {
	v := NewValidator(h)
	loc, _ := src.(ruleLocator)
	place := func(err error) error {
		if loc != nil {
			return loc.RuleProblem(err)
		}
		return err
	}
	// ctx is checked at every 1024th read, the first included, whether it
	// gives an event, an error or the end.
	n := 0
	for e, err := range src.Events() {
		if n%1024 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		n++
		if err != nil {
			return err
		}
		if err := v.Check(e); err != nil {
			err = place(err)
			if opts.Problem == nil || !opts.Problem(err) {
				return err
			}
			continue
		}
		if opts.Each != nil {
			if err := opts.Each(e, v); err != nil {
				return err
			}
		}
	}
	if n%1024 == 0 && ctx.Err() != nil {
		return ctx.Err()
	}
	if err := v.Finish(); err != nil {
		// What the end shows is the header's: its line.
		if r, ok := src.(*Reader); ok {
			err = &FormatError{Path: r.path, Pos: Position{Line: 1}, Msg: err.Error(), Kind: ErrCorrupt, cause: err}
		}
		if opts.Problem == nil || !opts.Problem(err) {
			return err
		}
	}
	return nil
}

// RuleOf names the rule an error of a log reports, and its member: a
// *RuleError's (RuleError.Rule), wherever wrapped; for another
// *FormatError header, framing or envelope; "" for an error not a log's.
func RuleOf(err error) (rule, member string) {
	var re *RuleError
	if errors.As(err, &re) {
		return re.Rule(), re.Member
	}
	for _, r := range ruleNames {
		if errors.Is(err, r.kind) {
			return r.name, ""
		}
	}
	var fe *FormatError
	if !errors.As(err, &fe) {
		return "", ""
	}
	switch {
	case fe.Pos.Line == 1 || strings.HasPrefix(fe.Msg, "empty or header-less"):
		return "header", ""
	case fe.Pos.Line > 1:
		return "envelope", ""
	case fe.Pos.Frame > 0:
		return "framing", ""
	}
	return "file", ""
}
