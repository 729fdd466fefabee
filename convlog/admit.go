package convlog

import (
	"context"
	"errors"
	"iter"
	"strings"
)

// Admission is what a version 4 reader admits of a log, the reference's
// native admission (reference notes §4.2 step 10) with convkit's rules
// beside it: the header's keys, every line's envelope (the Reader), then
// for every event the Validator's checks (schemas.go, rules.go,
// relations.go), and at the end what only the end shows (Finish). One
// function runs it over a whole log: migrate's check of a log already at
// version 4, inspect --validate and --history, and reindex call it; the
// writer and reindex's prereads run the same Validator event by event.

// EventSource gives a log's events in order: a *Reader, or an upgrading
// reader (package upgrade) giving an older log's version 4 events. One
// that has a RuleProblem method (both have) places a refusal in the log;
// a *Reader reports it as a *FormatError at the event's line and byte.
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
// first refusal (or, with opts.Problem, nil once every event was read), a
// reading error of src as it is, or ctx's error. An older log's own
// events (a *Reader of version 0 to 3) are checked for the turn's path
// only (Validator); read through the upgrade, they are admitted as the
// version 4 events of their successor.
func Admit(ctx context.Context, src EventSource, h *Header, opts AdmitOptions) error {
	v := NewValidator(h, nil)
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

// RuleOf names the rule of the format an error of a log reports, and the
// member it is about: a *RuleError's rule (payload, wrong-log, message,
// turn-path, history, relationship) and member, wherever it is wrapped (an
// error of one of their kinds: the rule alone); for
// another *FormatError, header (the header line, or none), framing (a
// problem with a whole zstd frame) or envelope (an event line: its JSON,
// its envelope, its seq, its type); "" for an error that is not a log's.
func RuleOf(err error) (rule, member string) {
	var re *RuleError
	if errors.As(err, &re) {
		return re.Rule(), re.Member
	}
	for _, kind := range []error{ErrPayload, ErrWrongLog, ErrMessageIdentity, ErrTurnPath, ErrHistory, ErrRelationship} {
		if errors.Is(err, kind) {
			return ruleName(kind), ""
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
