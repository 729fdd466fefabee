package transfer

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// reindexed is a copy of the fixtures store of seed with metadata.db built.
func reindexed(t *testing.T, seed int64) (string, *fixtures.Report) {
	t.Helper()
	dir, rep := fixtureStore(t, seed)
	s, err := store.Open(context.Background(), dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := reindex.Run(context.Background(), s, reindex.Options{}); err != nil {
		t.Fatal(err)
	}
	return dir, rep
}

func exportBytes(t *testing.T, dir string, ids []string) ([]byte, *Manifest) {
	t.Helper()
	var buf bytes.Buffer
	res, err := Export(context.Background(), reader(t, dir), &buf, ExportOptions{IDs: ids, Now: fixedNow, ToolVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), res.Manifest
}

// sessionLog is the path in dir of the first session log of c.
func sessionLog(t *testing.T, dir string, rep *fixtures.Report, c *fixtures.Conversation) (string, string) {
	t.Helper()
	root := filepath.Dir(filepath.Dir(filepath.Dir(c.Logs[0].Path))) // <store>/conversations/<dir>/<log>
	for _, l := range c.Logs {
		if l.SessionID != "" {
			rel, err := filepath.Rel(root, l.Path)
			if err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, rel), l.SessionID
		}
	}
	t.Fatalf("conversation %s has no session log", c.ID)
	return "", ""
}

func eventsOf(m *Manifest, conv, session string) int64 {
	for _, f := range m.Files {
		if f.Conversation == conv && f.Session == session {
			return f.Events
		}
	}
	return -1
}

// TestExportTakesWhatTheIndexVouchesFor: with a current metadata.db, the
// archive and manifest are those of a store without one (torn tails
// included); a session log that keeps its fingerprint is not read, its
// event count taken from the index, and one changed since is read again.
func TestExportTakesWhatTheIndexVouchesFor(t *testing.T) {
	dir, rep := reindexed(t, 7)
	var ids []string
	for _, c := range exportable(rep) {
		ids = append(ids, c.ID)
	}
	plain := filepath.Join(t.TempDir(), "plain")
	copyTree(t, dir, plain)
	if err := os.Remove(filepath.Join(plain, store.IndexFileName)); err != nil {
		t.Fatal(err)
	}
	want, wantM := exportBytes(t, plain, ids)
	got, gotM := exportBytes(t, dir, ids)
	if !reflect.DeepEqual(gotM, wantM) || !bytes.Equal(got, want) {
		t.Fatalf("the export with metadata.db differs from the one without:\n%+v\n%+v", gotM.Files, wantM.Files)
	}

	basic := rep.Find(fixtures.CaseBasic)
	p, session := sessionLog(t, dir, rep, basic)
	real := eventsOf(wantM, basic.ID, session)
	db, err := sql.Open("sqlite", filepath.Join(dir, store.IndexFileName))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("UPDATE sessions SET event_count = event_count + 1000 WHERE conversation_id = ? AND id = ?", basic.ID, session); err != nil {
		t.Fatal(err)
	}
	if _, m := exportBytes(t, dir, ids); eventsOf(m, basic.ID, session) != real+1000 {
		t.Fatalf("events %d: the log was read, not taken from the index (%d)", eventsOf(m, basic.ID, session), real+1000)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil { // the same bytes, a new ctime
		t.Fatal(err)
	}
	if _, m := exportBytes(t, dir, ids); eventsOf(m, basic.ID, session) != real {
		t.Fatalf("events %d after the log changed, want %d from its read", eventsOf(m, basic.ID, session), real)
	}
}

// TestExportReadsALogCorruptedAfterReindex: a session log corrupted after
// metadata.db was built changes its fingerprint: its conversation is left
// out for the reason a store without the index gives.
func TestExportReadsALogCorruptedAfterReindex(t *testing.T) {
	dir, rep := reindexed(t, 7)
	basic := rep.Find(fixtures.CaseBasic)
	p, _ := sessionLog(t, dir, rep, basic)
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// The same size: a plain log's envelope broken, a compressed one's frame.
	if i := bytes.LastIndex(data, []byte(`"seq":`)); filepath.Ext(p) != ".zst" && i >= 0 {
		data[i+1] = 'X'
	} else {
		data[len(data)/2] ^= 0xff
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(t.TempDir(), "plain")
	copyTree(t, dir, plain)
	os.Remove(filepath.Join(plain, store.IndexFileName))
	_, got := exportBytes(t, dir, []string{basic.ID})
	_, want := exportBytes(t, plain, []string{basic.ID})
	if len(got.Problems) != 1 || len(got.Conversations) != 0 {
		t.Fatalf("the corrupted conversation was exported: %+v", got)
	}
	g, w := got.Problems[0], want.Problems[0]
	w.Path, w.Reason = strings.ReplaceAll(w.Path, plain, dir), strings.ReplaceAll(w.Reason, plain, dir)
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("problem %+v, without the index %+v", g, w)
	}
}
