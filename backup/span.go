package backup

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Span is a length of time as restic writes one for --keep-within: years,
// months, days and hours ("1y6m", "7d", "26h", "2d12h"), counted back on
// the calendar (a month before March 31 is March 3 or 2, as time.AddDate
// has it).
type Span struct {
	Years, Months, Days, Hours int
}

// ParseSpan reads a Span: one or more whole numbers each followed by y, m
// (months), d or h, each unit at most once, in that order.
func ParseSpan(s string) (Span, error) {
	var sp Span
	if s == "" {
		return sp, errors.New("empty duration")
	}
	rest, last := s, -1
	for rest != "" {
		i := 0
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			i++
		}
		if i == 0 || i == len(rest) {
			return Span{}, fmt.Errorf("%q: want whole numbers each followed by y, m (months), d or h, as in 1y6m, 7d or 26h", s)
		}
		n, err := strconv.Atoi(rest[:i])
		if err != nil || n > 1_000_000 {
			return Span{}, fmt.Errorf("%q: %s is out of range", s, rest[:i])
		}
		unit := strings.IndexByte("ymdh", rest[i])
		if unit < 0 || unit <= last {
			return Span{}, fmt.Errorf("%q: want whole numbers each followed by y, m (months), d or h, each once and in that order, as in 1y6m or 2d12h", s)
		}
		last = unit
		switch unit {
		case 0:
			sp.Years = n
		case 1:
			sp.Months = n
		case 2:
			sp.Days = n
		case 3:
			sp.Hours = n
		}
		rest = rest[i+1:]
	}
	return sp, nil
}

// Before is the time s before t.
func (s Span) Before(t time.Time) time.Time {
	return t.AddDate(-s.Years, -s.Months, -s.Days).Add(-time.Duration(s.Hours) * time.Hour)
}

// IsZero reports whether s is no time at all.
func (s Span) IsZero() bool { return s == Span{} }

func (s Span) String() string {
	var b strings.Builder
	for _, p := range []struct {
		n    int
		unit string
	}{{s.Years, "y"}, {s.Months, "m"}, {s.Days, "d"}, {s.Hours, "h"}} {
		if p.n > 0 {
			b.WriteString(strconv.Itoa(p.n) + p.unit)
		}
	}
	if b.Len() == 0 {
		return "0h"
	}
	return b.String()
}
