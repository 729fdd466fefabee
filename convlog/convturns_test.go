package convlog

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

func convTurn(typ, session string, turn int64) Event {
	if typ == "turn/started" {
		return ev(typ, fmt.Sprintf(`{"sessionId":%q,"turn":%d}`, session, turn))
	}
	return ev(typ, fmt.Sprintf(`{"sessionId":%q,"turn":%d,"outcome":"completed"}`, session, turn))
}

// TestValidatorConversationTurns: a conversation log records each
// session's turn once; the Validator refuses the event recording one again
// at its line, and nothing else.
func TestValidatorConversationTurns(t *testing.T) {
	const started, ended = "turn/started", "turn/ended"
	type tv struct {
		typ     string
		session string
		turn    int64
	}
	for _, c := range []struct {
		name  string
		turns []tv
		want  string // the last event's refusal; "" none
	}{
		{"turns upward", []tv{{started, "r", 1}, {ended, "r", 1}, {started, "r", 2}, {ended, "r", 2}}, ""},
		{"two sessions, the same numbers", []tv{{started, "r", 1}, {started, "s", 1}, {ended, "s", 1}, {ended, "r", 1}}, ""},
		{"a skipped number, then it", []tv{{started, "r", 1}, {started, "r", 4}, {ended, "r", 4}, {ended, "r", 2}}, ""},
		{"end of an ended turn", []tv{{started, "r", 1}, {ended, "r", 1}, {started, "r", 2}, {ended, "r", 1}},
			`turn 1 of session "r" is recorded already`},
		{"start of a turn again", []tv{{started, "r", 1}, {ended, "r", 1}, {started, "r", 1}},
			`turn 1 of session "r" is recorded already`},
		{"start after an end without it", []tv{{started, "r", 1}, {ended, "r", 1}, {ended, "r", 3}, {started, "r", 3}},
			`turn 3 of session "r" is recorded already`},
		{"a lower number, then it again", []tv{{started, "r", 1}, {ended, "r", 3}, {started, "r", 2}, {started, "r", 2}},
			`turn 2 of session "r" is recorded already`},
		{"inside an earlier run", []tv{{started, "r", 1}, {started, "r", 2}, {started, "r", 7}, {ended, "r", 2}},
			`turn 2 of session "r" is recorded already`},
	} {
		t.Run(c.name, func(t *testing.T) {
			evs := []Event{ev("conversation/created", `{"cwd":"/w","agents":["coder"],"models":["m"]}`),
				ev("session/started", `{"sessionId":"r","agent":"coder","model":"m"}`),
				ev("session/started", `{"sessionId":"s","agent":"coder","model":"m","parentSession":"r"}`)}
			for _, x := range c.turns {
				evs = append(evs, convTurn(x.typ, x.session, x.turn))
			}
			got := ruleProblems(t, convHeader(), evs)
			last := int64(len(evs) - 1)
			if c.want == "" {
				if len(got) != 0 {
					t.Fatalf("problems %v, want none", got)
				}
				return
			}
			err, line := got[last], fmt.Sprintf(": line %d, byte ", last+2)
			want := fmt.Sprintf(": %s at seq %d: %s", evs[last].Type, last, c.want)
			if len(got) != 1 || !errors.Is(err, ErrRelationship) || !strings.Contains(err.Error(), line) || !strings.HasSuffix(err.Error(), want) {
				t.Fatalf("problems %v, want%s…%s", got, line, want)
			}
		})
	}
}

// TestWriterRefusesATurnRecordedTwice: the writer refuses a batch
// recording a turn again, and what the refused batch recorded before it
// is forgotten.
func TestWriterRefusesATurnRecordedTwice(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName("metadata", 4, Plain))
	w, err := Create(path, convHeader(), []Event{ev("conversation/created", `{"cwd":"/w","agents":["coder"],"models":["m"]}`),
		ev("session/started", `{"sessionId":"r","agent":"coder","model":"m"}`),
		convTurn("turn/started", "r", 1), convTurn("turn/ended", "r", 1)}, WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	err = w.Append([]Event{convTurn("turn/started", "r", 2), convTurn("turn/ended", "r", 2), convTurn("turn/started", "r", 1)})
	if !errors.Is(err, ErrRelationship) || !strings.HasSuffix(err.Error(), `turn 1 of session "r" is recorded already`) {
		t.Fatalf("Append = %v", err)
	}
	if err := w.Append([]Event{convTurn("turn/started", "r", 2), convTurn("turn/ended", "r", 2)}); err != nil {
		t.Fatalf("turn 2 after the refused batch: %v", err)
	}
}
