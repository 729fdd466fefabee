package transfer

import (
	"os"
	"testing"

	"github.com/convkit/convkit/fixtures"
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
