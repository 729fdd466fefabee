package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convkit/convkit/convlog"
)

// openCompactions are the logs a crash inside a compaction leaves (the
// start, the model call, then the summary, the checkpoint and the end):
// conversation id → whether a turn is open, the events recorded after
// compaction/start.
var openCompactions = []struct {
	id     string
	inTurn bool
	after  string // "", "summary" or "checkpoint" (summary and checkpoint)
}{
	{"turnstart", true, ""},
	{"turnsummary", true, "summary"},
	{"turncheckpoint", true, "checkpoint"},
	{"idlestart", false, ""},
	{"idlesummary", false, "summary"},
}

// crashInCompaction writes openCompactions into the store in dir, each as
// the crash left it: its compaction open, and its turn when inTurn.
func crashInCompaction(t *testing.T, dir string) {
	t.Helper()
	s := openTestStore(t, dir, convlog.Plain)
	defer s.Close()
	for _, c := range openCompactions {
		se, err := s.NewConversation(NewConversation{ID: c.id, Cwd: "/w", SessionID: "root", Agent: "a", Model: "m"})
		mustNil(t, err)
		_, err = se.BeginTurn(storedMsg(t, "u1", "user", "user", "hello"))
		mustNil(t, err)
		step(t, se, "a1", "hi")
		var turn *int64
		if c.inTurn {
			one := int64(1)
			turn = &one
		} else {
			mustNil(t, se.EndTurn(OutcomeCompleted, nil))
		}
		mustNil(t, se.locked("Append", anytime, func() error {
			nodes := se.rec.hist.Surface()
			seqs, count := shadow(nodes[se.rec.protected(nodes):], 0)
			summary := []convlog.Block{convlog.TextBlock("the story so far")}
			evs := []convlog.Event{typed(convlog.TypeCompactionStart, convlog.CompactionStartData{CompactionID: "k" + c.id, SourceCommandID: "cmd", Turn: turn})}
			if c.after != "" {
				evs = append(evs, typed(convlog.TypeCompactionSummary, convlog.CompactionSummaryData{CompactionID: "k" + c.id, SourceCommandID: "cmd",
					Summary: summary, ShadowedRange: convlog.SeqRange{Start: seqs[0], End: seqs[len(seqs)-1]}, ShadowedSeqs: seqs,
					ShadowedTokenCount: count, Provider: "p", Model: "m"}))
			}
			if c.after == "checkpoint" {
				msg, err := convlog.NewMessage("ck", "user", convlog.CheckpointSource("k"+c.id, "cmd"), summary)
				if err != nil {
					return err
				}
				evs = append(evs, replacement(msg, seqs))
			}
			for i := range evs {
				evs[i].Time = 1
			}
			return se.record(evs...)
		}))
		mustNil(t, se.Close())
	}
}

// closesCompaction checks the session log of conversation id: it passes the
// validator and its last events close the compaction with an error, then
// the turn when one was open.
func closesCompaction(t *testing.T, s *Store, id string, inTurn bool) {
	t.Helper()
	path, err := s.sessionLogFile(id, "root")
	mustNil(t, err)
	if probs := ruleProblems(t, path); len(probs) > 0 {
		t.Fatalf("%s: %v", id, probs)
	}
	_, evs := readEvents(t, path)
	i := len(evs) - 1
	if inTurn {
		for evs[i].Type != convlog.TypeCompactionEnd {
			i--
		}
	}
	end := string(evs[i].Data)
	if evs[i].Type != convlog.TypeCompactionEnd || !strings.Contains(end, `"compactionId":"k`+id+`"`) ||
		!strings.Contains(end, `"sourceCommandId":"cmd"`) || !strings.Contains(end, `"error":"The compaction was interrupted`) {
		t.Fatalf("%s: last events %s %s", id, evs[i].Type, end)
	}
}

// TestRepairClosesOpenCompaction: repair closes a compaction a crash left
// open with an error end, then its turn; a dry run lists it and writes
// nothing.
func TestRepairClosesOpenCompaction(t *testing.T) {
	dir := t.TempDir()
	crashInCompaction(t, dir)
	before := snapshot(t, dir)
	s := openTestStore(t, dir, convlog.Plain)
	dry, err := s.Repair(context.Background(), RepairOptions{DryRun: true})
	mustNil(t, err)
	for p, b := range snapshot(t, dir) {
		if before[p] != b {
			t.Fatalf("a dry run changed %s", p)
		}
	}
	res, err := s.Repair(context.Background(), RepairOptions{})
	mustNil(t, err)
	for _, r := range []*RepairResult{dry, res} {
		if len(r.Changes) != len(openCompactions) || len(r.Skipped) != 0 {
			t.Fatalf("repair (dry %v) = %+v", r.DryRun, r)
		}
		byConv := map[string]RepairChange{}
		for _, ch := range r.Changes {
			byConv[ch.ID] = ch
		}
		for _, c := range openCompactions {
			ch := byConv[c.id].Turn
			want := "compaction/end"
			if c.inTurn {
				want += " turn/end"
			}
			if byConv[c.id].Kind != ItemTurnClosed || ch.Compaction != "k"+c.id || strings.Join(ch.Appended, " ") != want {
				t.Fatalf("%s (dry %v): %+v", c.id, r.DryRun, ch)
			}
			if !strings.Contains(ch.Describe(), "compaction/end") {
				t.Fatalf("%s: %s", c.id, ch.Describe())
			}
		}
	}
	for _, c := range openCompactions {
		closesCompaction(t, s, c.id, c.inTurn)
		if readInfo(t, dir, c.id).RunningTurn {
			t.Fatalf("%s still running", c.id)
		}
	}
	again, err := s.Repair(context.Background(), RepairOptions{})
	mustNil(t, err)
	if len(again.Changes) != 0 {
		t.Fatalf("a second repair changed %+v", again.Changes)
	}
	for _, c := range openCompactions {
		se, err := s.OpenSession(c.id, "root")
		mustNil(t, err)
		if _, err := se.BeginTurn(storedMsg(t, "u2", "user", "user", "again")); err != nil {
			t.Fatalf("%s: %v", c.id, err)
		}
		mustNil(t, se.Close())
	}
}

// TestOpenSessionClosesOpenCompaction: the runtime's open closes the
// compaction as repair does; the next compaction and turn are recorded.
func TestOpenSessionClosesOpenCompaction(t *testing.T) {
	dir := t.TempDir()
	crashInCompaction(t, dir)
	s := openTestStore(t, dir, convlog.Plain)
	for _, c := range openCompactions {
		se, err := s.OpenSession(c.id, "root")
		mustNil(t, err)
		if r := se.Repaired(); r == nil || r.Compaction != "k"+c.id {
			t.Fatalf("%s: repaired %+v", c.id, r)
		}
		mustNil(t, se.Compact(Compaction{Summary: "again", Provider: "p", Model: "m"}))
		turn, err := se.BeginTurn(storedMsg(t, "u2", "user", "user", "again"))
		if err != nil || turn != 2 {
			t.Fatalf("%s: turn %d, %v", c.id, turn, err)
		}
		mustNil(t, se.EndTurn(OutcomeCompleted, nil))
		mustNil(t, se.Close())
		path, err := s.sessionLogFile(c.id, "root")
		mustNil(t, err)
		if probs := ruleProblems(t, path); len(probs) > 0 {
			t.Fatalf("%s: %v", c.id, probs)
		}
	}
}

// TestForkThroughOpenCompaction: a fork through a compaction a crash left
// open, cut inside it or after repair closed it writes a log the validator
// passes, and leaves its source as it was.
func TestForkThroughOpenCompaction(t *testing.T) {
	dir := t.TempDir()
	crashInCompaction(t, dir)
	s := openTestStore(t, dir, convlog.Plain)
	startSeq := func(path string) int64 {
		_, evs := readEvents(t, path)
		for _, e := range evs {
			if e.Type == convlog.TypeCompactionStart {
				return e.Seq
			}
		}
		t.Fatalf("%s has no compaction/start", path)
		return 0
	}
	for _, repaired := range []bool{false, true} {
		if repaired {
			_, err := s.Repair(context.Background(), RepairOptions{})
			mustNil(t, err)
		}
		for _, c := range openCompactions {
			src, err := s.sessionLogFile(c.id, "root")
			mustNil(t, err)
			orig, err := os.ReadFile(src)
			mustNil(t, err)
			for i, cut := range []int64{-1, startSeq(src)} {
				to := fmt.Sprintf("%s-%v-%d", c.id, repaired, i)
				if _, err := s.fork(c.id, "root", to, "root", cut, -1); err != nil {
					t.Fatalf("fork of %s through %d: %v", c.id, cut, err)
				}
				path, err := s.sessionLogFile(to, "root")
				mustNil(t, err)
				if probs := ruleProblems(t, path); len(probs) > 0 {
					t.Fatalf("fork of %s through %d: %v", c.id, cut, probs)
				}
			}
			if got, _ := os.ReadFile(src); string(got) != string(orig) {
				t.Fatalf("a fork changed %s", src)
			}
		}
	}
}

// TestRepairOpenCompactionAndConversationOnlyTurn: a compaction open
// between turns, and a turn the conversation log started that the session
// log could not (a BeginTurn the open compaction refused): repair ends the
// compaction, then records the turn started and interrupted.
func TestRepairOpenCompactionAndConversationOnlyTurn(t *testing.T) {
	dir := t.TempDir()
	crashInCompaction(t, dir)
	s := openTestStore(t, dir, convlog.Plain)
	mustNil(t, s.BeginTurn("idlestart", "root", 2, "again"))
	res, err := s.Repair(context.Background(), RepairOptions{})
	mustNil(t, err)
	found := false
	for _, ch := range res.Changes {
		if ch.ID == "idlestart" {
			found = true
			if strings.Join(ch.Turn.Appended, " ") != "compaction/end turn/start turn/end" || ch.Turn.Turn != 2 || ch.Turn.Outcome != OutcomeInterrupted {
				t.Fatalf("closed %+v", ch.Turn)
			}
		}
	}
	if !found {
		t.Fatalf("repair left idlestart: %+v", res.Changes)
	}
	closesCompaction(t, s, "idlestart", true)
	if info := readInfo(t, dir, "idlestart"); info.RunningTurn || len(info.Turns) != 2 {
		t.Fatalf("running %v, turns %+v", info.RunningTurn, info.Turns)
	}
}

// TestRepairClosesV3OpenCompaction: a v3 log's open compaction, in a turn
// and between turns, is found by a dry run as the real run closes it in
// the successor.
func TestRepairClosesV3OpenCompaction(t *testing.T) {
	dir := t.TempDir()
	s := openTestStore(t, dir, convlog.Plain)
	h := &convlog.Header{Type: convlog.SessionLog, Version: 3, ID: "root", CreatedAt: 1, Cwd: "/w"}
	logs := map[string][][]byte{
		"v3turn": {[]byte(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`),
			[]byte(`{"type":"compaction/start","seq":1,"time":2,"data":{"compactionId":"kv3turn","sourceCommandId":"cmd","turn":1}}`)},
		"v3idle": {[]byte(`{"type":"compaction/start","seq":0,"time":2,"data":{"compactionId":"kv3idle","sourceCommandId":"cmd","turn":null}}`)},
	}
	for id, lines := range logs {
		mustNil(t, s.CreateConversation(id, "/w", []string{"a"}, []string{"m"}))
		mustNil(t, s.RegisterSession(id, "root", "a", "m", ""))
		if id == "v3turn" {
			mustNil(t, s.BeginTurn(id, "root", 1, "hello"))
		}
		mustNil(t, os.WriteFile(filepath.Join(dir, "conversations", id, "root.v3.jsonl"), plainLog(h, lines), 0o600))
	}
	want := map[string]string{"v3turn": "compaction/end turn/end", "v3idle": "compaction/end"}
	for _, dry := range []bool{true, false} {
		r, err := s.Repair(context.Background(), RepairOptions{DryRun: dry})
		mustNil(t, err)
		if len(r.Changes) != len(want) {
			t.Fatalf("repair (dry %v) = %+v", dry, r)
		}
		for _, ch := range r.Changes {
			if got := strings.Join(ch.Turn.Appended, " "); got != want[ch.ID] || ch.Turn.Compaction != "k"+ch.ID {
				t.Fatalf("%s (dry %v): appended %q, compaction %q", ch.ID, dry, got, ch.Turn.Compaction)
			}
		}
	}
	for id := range want {
		closesCompaction(t, s, id, id == "v3turn")
	}
}
