package transfer

import (
	"context"
	"os"
	"reflect"
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
		x, err := newExporter(context.Background(), reader(t, a), ExportOptions{IDs: []string{id}, Now: fixedNow})
		if err != nil {
			t.Fatal(err)
		}
		if err := x.plan(context.Background()); err != nil {
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
		rc := x.read(p)
		if rc.problem != nil {
			t.Fatalf("left out: %+v", rc.problem)
		}
		var conv *openLog
		for _, l := range rc.logs {
			if l.log.IsConversationLog {
				conv = l
			}
		}
		onDisk, err := os.ReadFile(conv.log.Path)
		if err != nil {
			t.Fatal(err)
		}
		if string(conv.data) != string(onDisk) {
			t.Errorf("change %v: the bytes to archive are not the log's", change)
		}
		reused := conv.read.Info == pl.read.Info
		switch {
		case !change && (!reused || rc.c.Title != pl.read.Info.Title || conv.read.Events != pl.read.Events):
			t.Errorf("same bytes: reused %v, title %q, events %d (plan %q, %d)", reused, rc.c.Title, conv.read.Events, pl.read.Info.Title, pl.read.Events)
		case change && (reused || rc.c.Title != "Renamed after the plan" || conv.read.Events != pl.read.Events+1):
			t.Errorf("changed: reused %v, title %q, events %d (plan %d)", reused, rc.c.Title, conv.read.Events, pl.read.Events)
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
	x, err := newExporter(context.Background(), reader(t, a), ExportOptions{IDs: []string{id}, Now: fixedNow})
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
	se, err := w.OpenSession(id, root.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := se.Spawn(late, root.Agent, root.Model); err != nil {
		t.Fatal(err)
	}
	w.Close()
	rc := x.read(p)
	defer rc.close()
	if rc.problem != nil {
		t.Fatalf("left out: %+v", rc.problem)
	}
	var found bool
	for _, l := range rc.logs {
		found = found || l.log.ID == late
	}
	if !found || rc.c.Sessions != len(info.Sessions)+1 {
		t.Errorf("the session started after the plan: its log exported %v, sessions %d (before %d)", found, rc.c.Sessions, len(info.Sessions))
	}
}

// TestPlanExport: the plan holds what the export of the same ids writes:
// the conversations, the fork ancestors added and for whom, every file
// with the committed bytes, events and torn tail archived, and the
// problems; it writes nothing, in the store or beside it.
func TestPlanExport(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	fork := rep.Find(fixtures.CaseForkAfterCompaction)
	torn := rep.Find(fixtures.CaseTornZstd)
	corrupt := rep.Find(fixtures.CaseCorrupt)
	ids := []string{fork.ID, torn.ID, corrupt.ID}
	before := treeHash(t, a)
	var planEvents []store.Item
	plan, err := PlanExport(context.Background(), reader(t, a), ExportOptions{IDs: ids, Now: fixedNow,
		OnEvent: func(ev store.Item) { planEvents = append(planEvents, ev) }})
	if err != nil {
		t.Fatal(err)
	}
	if after := treeHash(t, a); after != before {
		t.Errorf("the plan changed the store:\n%s", listTree(a))
	}
	_, res := exportTo(t, a, ids...)
	pm, em := plan.Manifest, res.Manifest
	if !reflect.DeepEqual(plan.Added, res.Added) || len(plan.Added) == 0 {
		t.Errorf("added %q, the export added %q", plan.Added, res.Added)
	}
	if !reflect.DeepEqual(pm.Conversations, em.Conversations) || !reflect.DeepEqual(pm.Problems, em.Problems) || len(pm.Problems) == 0 {
		t.Errorf("plan conversations %+v problems %+v\nexport %+v %+v", pm.Conversations, pm.Problems, em.Conversations, em.Problems)
	}
	if len(pm.Files) != len(em.Files) {
		t.Fatalf("plan %d files, export %d", len(pm.Files), len(em.Files))
	}
	leftOut := false
	for i, f := range pm.Files {
		e := em.Files[i]
		if f.SHA256 != "" {
			t.Errorf("%s: the plan has a SHA-256", f.Name)
		}
		f.SHA256 = e.SHA256
		if f != e {
			t.Errorf("plan file %+v\nexport   %+v", f, e)
		}
		leftOut = leftOut || f.LeftOut > 0
	}
	if !leftOut {
		t.Error("no file of the plan leaves out a torn tail")
	}
	if len(planEvents) == 0 {
		t.Error("the plan reported no problem as it found it")
	}
	if plan.Archive != "" || plan.Bytes != 0 {
		t.Errorf("archive %q, %d bytes: the plan writes none", plan.Archive, plan.Bytes)
	}
}
