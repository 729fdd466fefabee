package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/store"
)

// compactionCrash writes conversation id into the store in dir as a crash
// inside a compaction leaves it: compaction/start written through the
// log's writer, no end; inTurn keeps turn 1 open. It returns the session
// log.
func compactionCrash(t *testing.T, dir, id string, inTurn bool) string {
	t.Helper()
	s, err := store.Open(context.Background(), dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "test"},
		Create: store.CreateAlways})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	se, err := s.NewConversation(store.NewConversation{ID: id, Cwd: "/w", SessionID: "root", Agent: "a", Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := convlog.NewStoredMessage("u1", "user", convlog.Source{Kind: convlog.SourceUser}, []byte(`[{"type":"text","text":"hello"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := se.BeginTurn(prompt); err != nil {
		t.Fatal(err)
	}
	var turn *int64
	if inTurn {
		one := int64(1)
		turn = &one
	} else if err := se.EndTurn(store.OutcomeCompleted, nil); err != nil {
		t.Fatal(err)
	}
	if err := se.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := s.FindLog(id, "root")
	if err != nil {
		t.Fatal(err)
	}
	w, err := convlog.OpenAppend(l.Path, convlog.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	data, err := convlog.EncodeData(convlog.CompactionStartData{CompactionID: "k1", SourceCommandID: "cmd", Turn: turn})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append([]convlog.Event{{Type: convlog.TypeCompactionStart, Seq: w.NextSeq(), Time: 1, Data: data}}); err != nil {
		t.Fatal(err)
	}
	return l.Path
}

// TestRepairClosesOpenCompaction: convkit repair lists (dry) and appends
// the error compaction/end a compaction a crash left open needs, before
// the turn's end, and the store then passes inspect --validate and
// reindex --check.
func TestRepairClosesOpenCompaction(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	inTurn := compactionCrash(t, dir, "c1", true)
	idle := compactionCrash(t, dir, "c2", false)
	run := func(want int, args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		code := Main(context.Background(), append([]string{"convkit", "--data-dir", dir}, args...), nil, &out, &errb,
			func(string) string { return "" })
		if code != want {
			t.Fatalf("%v: exit %d, want %d; %s%s", args, code, want, out.String(), errb.String())
		}
		return out.String()
	}
	before, err := os.ReadFile(inTurn)
	if err != nil {
		t.Fatal(err)
	}
	var dry store.RepairResult
	if err := json.Unmarshal([]byte(run(0, "--json", "repair", "--dry-run")), &dry); err != nil {
		t.Fatal(err)
	}
	if len(dry.Changes) != 2 || dry.Changes[0].Turn.Compaction != "k1" || strings.Join(dry.Changes[0].Turn.Appended, " ") != "compaction/end turn/end" ||
		strings.Join(dry.Changes[1].Turn.Appended, " ") != "compaction/end" {
		t.Fatalf("dry run: %+v", dry.Changes)
	}
	wantLines := []string{
		`WOULD CLOSE "c1" session "root" turn 1: would append compaction/end, turn/end (interrupted compaction: k1) to root.v4.jsonl; turn/ended (interrupted) to the conversation log`,
		`WOULD CLOSE "c2" session "root" compaction "k1": would append compaction/end (interrupted compaction: k1) to root.v4.jsonl`,
	}
	out := run(0, "repair", "--dry-run")
	for _, w := range wantLines {
		if !strings.Contains(out, w+"\n") {
			t.Fatalf("repair --dry-run:\n%s\nwant the line %s", out, w)
		}
	}
	if now, _ := os.ReadFile(inTurn); !bytes.Equal(before, now) {
		t.Fatal("a dry run changed the session log")
	}
	out = run(0, "repair")
	for _, w := range wantLines {
		w = strings.ReplaceAll(strings.ReplaceAll(w, "WOULD CLOSE", "CLOSED"), "would append", "appended")
		if !strings.Contains(out, w+"\n") {
			t.Fatalf("repair:\n%s\nwant the line %s", out, w)
		}
	}
	for _, p := range []string{inTurn, idle} {
		b, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(b), `"type":"compaction/end"`) ||
			!strings.Contains(string(b), `"error":"The compaction was interrupted before it ended."`) {
			t.Fatalf("%s after repair (%v):\n%s", p, err, b)
		}
	}
	run(0, "inspect", "--validate", inTurn)
	run(0, "inspect", "--validate", "c2", "root")
	run(0, "reindex")
	run(0, "reindex", "--check")
	if out := run(0, "repair"); strings.Contains(out, "CLOSED") {
		t.Fatalf("a second repair closed more:\n%s", out)
	}
}
