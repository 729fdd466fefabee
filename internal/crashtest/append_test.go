//go:build unix

package crashtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/store"
)

// TestSIGKILLAppendAfterTornTail gives the log an appending command writes
// to a torn tail (a frame or line cut at a random byte, a partial frame or
// line after it, or NUL padding: what a crash in an earlier append left),
// then kills the command at a random moment and runs it again. After the
// rerun the log reads strictly with every rule holding, every event read
// from the torn log is in it once and unchanged, and the command's change
// is there; reindex and reindex --check agree.
func TestSIGKILLAppendAfterTornTail(t *testing.T) {
	kills, seed := killPlan(t, "per command")
	h := &harness{env: childEnv(t.TempDir())}
	base := t.TempDir()
	gen := filepath.Join(base, "gen")
	rep := generate(t, gen, 17, 24)

	// A plain conversation whose conversation log is version 4, one
	// compressed and one plain when the store has both.
	var plain []fixtures.Conversation
	for _, c := range rep.Conversations {
		if c.Deleting || c.ForkedFrom != "" || len(c.DependsOn) > 0 || hasCase(c, fixtures.CaseRunningTurn) || hasCase(c, fixtures.CaseArchived) {
			continue
		}
		for _, l := range c.Logs {
			if l.SessionID == "" && l.Version == convlog.CurrentVersion {
				plain = append(plain, c)
			}
		}
	}
	if len(plain) == 0 {
		t.Fatal("the generated store has no version 4 conversation log to append to")
	}
	convLog := func(c fixtures.Conversation) string {
		for _, l := range c.Logs {
			if l.SessionID == "" && l.Version == convlog.CurrentVersion {
				return l.Path
			}
		}
		return ""
	}
	// The session logs repair appends to: those of the turns a crash left
	// open.
	var open []string
	o := h.must(t, 0, "--data-dir", gen, "--json", "repair", "--dry-run")
	var dry struct {
		Changes []struct {
			Kind, Path string
			Turn       struct{ Appended []string }
		}
	}
	if err := json.Unmarshal([]byte(o.stdout), &dry); err != nil {
		t.Fatal(err)
	}
	for _, c := range dry.Changes {
		if n, ok := convlog.ParseName(filepath.Base(c.Path)); c.Kind == "turn-closed" && len(c.Turn.Appended) > 0 && ok && n.Version == convlog.CurrentVersion {
			open = append(open, c.Path)
		}
	}
	if len(open) == 0 {
		t.Fatal("the generated store has no open turn in a version 4 session log")
	}
	opened := map[string]func(t *testing.T, data string){}
	rel := func(p string) string { r, _ := filepath.Rel(gen, p); return r }

	type command struct {
		name string
		args []string
		log  string // relative to the data dir
		// prepare changes the fresh copy before its log is torn.
		prepare func(t *testing.T, data string)
		// pending, when set, reports whether the torn copy still needs
		// the change (a cut may have taken what it changes away).
		pending func(t *testing.T, data string) bool
		// done checks the command's change after the rerun.
		done func(t *testing.T, at, data string)
	}
	listed := func(t *testing.T, data, id string) map[string]any {
		out := h.must(t, 0, "--data-dir", data, "--json", "list", "--all").stdout
		var l struct{ Conversations []map[string]any }
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatal(err)
		}
		for _, c := range l.Conversations {
			if c["id"] == id {
				return c
			}
		}
		t.Fatalf("list does not show %s:\n%s", id, out)
		return nil
	}
	// One conversation log of each compression.
	var picked []fixtures.Conversation
	for _, zst := range []bool{false, true} {
		for _, c := range plain {
			if strings.HasSuffix(convLog(c), ".zst") == zst {
				picked = append(picked, c)
				break
			}
		}
	}
	var cmds []command
	for i, c := range picked {
		title := fmt.Sprintf("Renamed after a torn tail %d", i)
		cmds = append(cmds,
			command{name: "rename " + filepath.Base(convLog(c)), args: []string{"rename", c.ID, title}, log: rel(convLog(c)),
				done: func(t *testing.T, at, data string) {
					if got := listed(t, data, c.ID)["title"]; got != title {
						t.Fatalf("%s: title %q, want %q", at, got, title)
					}
				}},
			command{name: "archive " + filepath.Base(convLog(c)), args: []string{"archive", c.ID}, log: rel(convLog(c)),
				done: func(t *testing.T, at, data string) {
					if got := listed(t, data, c.ID)["archived"]; got != true {
						t.Fatalf("%s: archived %v", at, got)
					}
				}},
			command{name: "unarchive " + filepath.Base(convLog(c)), args: []string{"unarchive", c.ID}, log: rel(convLog(c)),
				prepare: func(t *testing.T, data string) {
					edit(t, data, func(s *store.Store) error { return s.Archive(c.ID) })
				},
				pending: func(t *testing.T, data string) bool { return listed(t, data, c.ID)["archived"] == true },
				done: func(t *testing.T, at, data string) {
					if got := listed(t, data, c.ID)["archived"]; got != false {
						t.Fatalf("%s: archived %v", at, got)
					}
				}})
	}
	// A compressed session log with an open turn, written through the
	// store API.
	var root string
	for _, c := range plain {
		for _, l := range c.Logs {
			if l.SessionID != "" && l.Version == convlog.CurrentVersion && strings.HasSuffix(l.Path, ".zst") && root == "" {
				root = l.Path
				sid := l.SessionID
				open = append(open, root)
				opened[root] = func(t *testing.T, data string) {
					// A turn begun and never ended: the runtime died.
					edit(t, data, func(s *store.Store) error {
						se, err := s.OpenSession(c.ID, sid)
						if err != nil {
							return err
						}
						msg, err := convlog.NewStoredMessage("crash-prompt", "user", convlog.Source{Kind: convlog.SourceUser},
							[]byte(`[{"type":"text","text":"a turn the runtime never finished"}]`))
						if err != nil {
							return err
						}
						_, err = se.BeginTurn(msg)
						return err
					})
				}
			}
		}
	}
	if root == "" {
		t.Fatal("the generated store has no compressed version 4 session log to open a turn in")
	}
	for _, p := range open {
		cmds = append(cmds, command{name: "repair " + filepath.Base(p), args: []string{"repair"}, log: rel(p), prepare: opened[p],
			pending: func(t *testing.T, data string) bool {
				// Something to append to this log, not only the
				// conversation log's turn/ended.
				o := h.must(t, 0, "--data-dir", data, "--json", "repair", "--dry-run")
				var dry struct {
					Changes []struct {
						Kind, Path string
						Turn       struct{ Appended []string }
					}
				}
				if err := json.Unmarshal([]byte(o.stdout), &dry); err != nil {
					t.Fatal(err)
				}
				for _, c := range dry.Changes {
					if c.Kind == "turn-closed" && filepath.Base(c.Path) == filepath.Base(p) && len(c.Turn.Appended) > 0 {
						return true
					}
				}
				return false
			},
			done: func(t *testing.T, at, data string) {
				o := h.must(t, 0, "--data-dir", data, "--json", "repair", "--dry-run")
				if strings.Contains(o.stdout, `"turn-closed"`) {
					t.Fatalf("%s: a turn is still open after the rerun:\n%s", at, o.stdout)
				}
			}})
	}

	start := time.Now()
	var total, midway, appended int
	for i, cmd := range cmds {
		t.Run(cmd.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			fresh := func(dir string) (string, []string) {
				data := filepath.Join(dir, "data")
				copyTree(t, gen, data)
				if cmd.prepare != nil {
					cmd.prepare(t, data)
				}
				path := filepath.Join(data, cmd.log)
				tear(t, path, rng)
				return data, rawEvents(t, path)
			}
			// The uninterrupted run's time bounds the kill moments.
			ref := filepath.Join(base, fmt.Sprintf("ref%d", i))
			data, _ := fresh(ref)
			took := h.must(t, 0, append([]string{"--data-dir", data}, cmd.args...)...).took
			os.RemoveAll(ref)
			for k := range int(kills) {
				dir := filepath.Join(base, fmt.Sprintf("c%d-k%d", i, k))
				data, before := fresh(dir)
				appends := cmd.pending == nil || cmd.pending(t, data)
				args := append([]string{"--data-dir", data}, cmd.args...)
				delay := time.Duration(rng.Int64N(int64(took) + 1))
				at := fmt.Sprintf("%s, kill %d at %s", cmd.log, k, delay.Round(time.Microsecond))
				if killed, _ := h.kill(t, delay, args...); killed {
					midway++
				}
				total++
				h.unlocked(t, data, at)
				h.must(t, 0, args...)
				path := filepath.Join(data, cmd.log)
				h.must(t, 0, "--data-dir", data, "inspect", "--validate", path)
				after := rawEvents(t, path)
				if appends {
					appended++
				}
				if appends && len(after) <= len(before) {
					t.Fatalf("%s: %d events after the rerun, %d before: nothing appended", at, len(after), len(before))
				}
				for j := range before {
					if after[j] != before[j] {
						t.Fatalf("%s: event %d changed:\n%s\nwas\n%s", at, j, after[j], before[j])
					}
				}
				cmd.done(t, at, data)
				h.must(t, 0, "--data-dir", data, "-q", "reindex")
				h.must(t, 0, "--data-dir", data, "-q", "reindex", "--check")
				os.RemoveAll(dir)
			}
		})
	}
	t.Logf("%d kills, %d mid-way, %d with a change to append after the tear, in %s", total, midway, appended, time.Since(start).Round(time.Second))
	if appended < total/2 {
		t.Fatalf("only %d of %d trials appended after the tear", appended, total)
	}
}

func hasCase(c fixtures.Conversation, k fixtures.Case) bool {
	for _, x := range c.Cases {
		if x == k {
			return true
		}
	}
	return false
}

// tear leaves the log at path as a crash in an append would: its last
// frame or line cut at a random byte, a frame or line that never finished
// after it, or NUL padding.
func tear(t *testing.T, path string, rng *rand.Rand) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zst := strings.HasSuffix(path, ".zst")
	next := []byte(`{"type":"conversation/renamed","seq":999,"time":1790000000000,"data":{"title":"never written"}}` + "\n")
	mode := rng.IntN(3)
	if tornAlready(t, path) {
		mode = 0 // bytes after a torn tail are not what a crash leaves
	}
	switch mode {
	case 0: // the last batch cut at a random byte
		last := lastBatch(t, b, zst)
		if n := len(b) - last; n > 1 {
			b = b[:last+1+rng.IntN(n-1)]
		}
	case 1: // a batch that never finished
		if zst {
			enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true))
			if err != nil {
				t.Fatal(err)
			}
			// Cut before its last block ends: a frame torn only in
			// its checksum would yield the line (convlog's table
			// test covers that case).
			next = enc.EncodeAll(next, nil)
			next = next[:len(next)-4]
		}
		b = append(b, next[:1+rng.IntN(len(next)-1)]...)
	default:
		b = append(b, make([]byte, 1+rng.IntN(8192))...)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// tornAlready reports whether the log at path ends in a torn tail.
func tornAlready(t *testing.T, path string) bool {
	t.Helper()
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, err := range r.Events() {
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
	}
	return r.Stats().TornTail
}

// lastBatch is the offset of the log's last frame, or of its last line.
func lastBatch(t *testing.T, b []byte, zst bool) int {
	if !zst {
		return bytes.LastIndexByte(b[:len(b)-1], '\n') + 1
	}
	sc := convlog.NewFrameScanner(convlog.Bytes(b), int64(len(b)))
	last := 0
	for f, err := range sc.Frames() {
		if err != nil {
			t.Fatal(err)
		}
		last = int(f.Offset)
	}
	return last
}

// rawEvents reads the log's events as a reader returns them.
func rawEvents(t *testing.T, path string) []string {
	t.Helper()
	r, err := convlog.Open(path, convlog.ReaderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var evs []string
	for e, err := range r.Events() {
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		evs = append(evs, string(e.Raw))
	}
	return evs
}
