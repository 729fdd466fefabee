package convlog

import (
	"fmt"
	"slices"

	"github.com/convkit/convkit/internal/termtext"
)

// TurnRecords follows the turns a conversation log records (docs/FORMAT.md,
// "Replaying"): turn/started records a turn of its session and opens it;
// turn/ended closes the session's open turn with the same number, or else
// records its turn. A log records each session's turn once. The zero value
// is ready; the Validator keeps one for a conversation log, and a replay
// that does not run the Validator keeps its own.
type TurnRecords struct {
	j        *journal // the writer's, undoing a refused batch; nil: none
	sessions map[string]*sessionTurns
}

// sessionTurns: the writer numbers a session's turns upward, so its
// numbers are a few runs (one, unless turns were skipped); only a number
// not above the last run (damage, or an end kept without its start) goes
// to the set.
type sessionTurns struct {
	open   int64 // the open turn's number, if isOpen
	isOpen bool
	runs   []turnRun
	below  map[int64]bool
}

type turnRun struct{ lo, hi int64 }

// Add takes e, a turn/started or turn/ended of session's turn. It reports
// whether e closes the open turn, or a *RuleError when e records a turn
// the log records already; then nothing changes.
func (t *TurnRecords) Add(e *Event, session string, turn int64) (closes bool, err error) {
	st := t.sessions[session]
	if st == nil {
		if t.sessions == nil {
			t.sessions = map[string]*sessionTurns{}
		}
		st = &sessionTurns{}
		t.sessions[session] = st
		if t.journaled() {
			t.undo(func() { delete(t.sessions, session) })
		}
	}
	started := e.Type == "turn/started"
	if !started && st.isOpen && st.open == turn {
		t.setOpen(st, 0, false)
		return true, nil
	}
	n := len(st.runs)
	switch {
	case n > 0 && turn-1 == st.runs[n-1].hi:
		st.runs[n-1].hi = turn
		if t.journaled() {
			t.undo(func() { st.runs[n-1].hi = turn - 1 })
		}
	case n == 0 || turn > st.runs[n-1].hi:
		st.runs = append(st.runs, turnRun{turn, turn})
		if t.journaled() {
			t.undo(func() { st.runs = st.runs[:n] })
		}
	case st.recorded(turn):
		return false, &RuleError{Seq: e.Seq, Type: e.Type, Kind: ErrRelationship,
			Msg: fmt.Sprintf("turn %d of session %s is recorded already", turn, termtext.Quote(session))}
	default:
		if st.below == nil {
			st.below = map[int64]bool{}
		}
		st.below[turn] = true
		if t.journaled() {
			t.undo(func() { delete(st.below, turn) })
		}
	}
	if started {
		t.setOpen(st, turn, true)
	}
	return false, nil
}

// recorded: turn, not above the last run, is in a run or the set.
func (st *sessionTurns) recorded(turn int64) bool {
	_, found := slices.BinarySearchFunc(st.runs, turn, func(r turnRun, k int64) int {
		switch {
		case r.hi < k:
			return -1
		case r.lo > k:
			return 1
		}
		return 0
	})
	return found || st.below[turn]
}

func (t *TurnRecords) setOpen(st *sessionTurns, turn int64, open bool) {
	prev, was := st.open, st.isOpen
	st.open, st.isOpen = turn, open
	if t.journaled() {
		t.undo(func() { st.open, st.isOpen = prev, was })
	}
}

// journaled: a writer's batch is open. The undo is made only then, as
// making it allocates.
func (t *TurnRecords) journaled() bool { return t.j != nil && t.j.on }

func (t *TurnRecords) undo(f func()) { t.j.undo = append(t.j.undo, f) }
