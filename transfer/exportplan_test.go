package transfer

import (
	"context"
	"os"
	"testing"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/store"
)

// TestExportTakesThePlansReadOnlyOfTheSameBytes: the export's read of a
// conversation log takes the results of the plan's read of it (the
// replay, the event count) when the log holds the bytes the plan checked,
// and reads, checks and replays it again when it changed in between.
func TestExportTakesThePlansReadOnlyOfTheSameBytes(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	id := rep.Find(fixtures.CaseBasic).ID
	for _, change := range []bool{false, true} {
		x, err := newExporter(reader(t, a), ExportOptions{IDs: []string{id}, Now: fixedNow})
		if err != nil {
			t.Fatal(err)
		}
		if err := x.plan(); err != nil {
			t.Fatal(err)
		}
		var p *planned
		for _, o := range x.order {
			if o.id == id {
				p = o
			}
		}
		if p == nil || p.plan == nil {
			t.Fatalf("the plan kept no read of the conversation log: %+v", p)
		}
		pl := p.plan
		if change {
			rename(t, a, id, "Renamed after the plan")
		}
		rc := x.read(p, t.TempDir())
		if rc.problem != nil {
			t.Fatalf("left out: %+v", rc.problem)
		}
		var conv *openLog
		for _, l := range rc.logs {
			if l.isConvLog {
				conv = l
			}
		}
		onDisk, err := os.ReadFile(conv.path)
		if err != nil {
			t.Fatal(err)
		}
		if string(conv.data) != string(onDisk) {
			t.Errorf("change %v: the bytes to archive are not the log's", change)
		}
		reused := conv.info == pl.info
		switch {
		case !change && (!reused || rc.c.Title != pl.info.Title || conv.events != pl.events):
			t.Errorf("same bytes: reused %v, title %q, events %d (plan %q, %d)", reused, rc.c.Title, conv.events, pl.info.Title, pl.events)
		case change && (reused || rc.c.Title != "Renamed after the plan" || conv.events != pl.events+1):
			t.Errorf("changed: reused %v, title %q, events %d (plan %d)", reused, rc.c.Title, conv.events, pl.events)
		}
		rc.close()
	}
}

// TestExportListsAgainForASessionStartedAfterThePlan: the export takes the
// plan's listing of a conversation directory, but a session started after
// it (its log published, then named in the conversation log) is exported
// with its log: a conversation log naming a session the listing misses
// has the directory listed again.
func TestExportListsAgainForASessionStartedAfterThePlan(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	id := rep.Find(fixtures.CaseBasic).ID
	x, err := newExporter(reader(t, a), ExportOptions{IDs: []string{id}, Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	var p *planned
	for _, o := range x.order {
		if o.id == id {
			p = o
		}
	}
	if p == nil || p.listing == nil {
		t.Fatalf("the plan kept no listing of the conversation: %+v", p)
	}
	w, err := store.Open(context.Background(), a, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	info, err := w.ReadConversation(id)
	if err != nil {
		t.Fatal(err)
	}
	root := info.Sessions[0]
	const late = "started-after-the-plan"
	lw, err := w.StartSession(id, late, root.Agent, root.Model, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := lw.Close(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	rc := x.read(p, t.TempDir())
	defer rc.close()
	if rc.problem != nil {
		t.Fatalf("left out: %+v", rc.problem)
	}
	var found bool
	for _, l := range rc.logs {
		found = found || l.session == late
	}
	if !found || rc.c.Sessions != len(info.Sessions)+1 {
		t.Errorf("the session started after the plan: its log exported %v, sessions %d (before %d)", found, rc.c.Sessions, len(info.Sessions))
	}
}
