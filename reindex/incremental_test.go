package reindex_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/internal/transfer"
	"github.com/convkit/convkit/reindex"
	"github.com/convkit/convkit/store"
)

// TestIncrementalEqualsRebuildAfterChanges: after rounds of random
// changes to a store (appends to conversation and session logs, torn
// tails, directories moved out, back in and swapped, conversations copied
// in by hand and imported, deletes finished, interrupted and by hand,
// rewrites in place that keep size and modification time), an
// incremental reindex leaves exactly the index a full rebuild writes:
// every row of every table, the search text included; Check finds no
// difference; and the rows of unchanged conversations were kept, not
// replayed. CONVKIT_TEST_SEED repeats a run.
func TestIncrementalEqualsRebuildAfterChanges(t *testing.T) {
	seed := time.Now().UnixNano()
	if v, err := strconv.ParseInt(os.Getenv("CONVKIT_TEST_SEED"), 10, 64); err == nil {
		seed = v
	}
	t.Logf("seed %d (CONVKIT_TEST_SEED=%d repeats it)", seed, seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 1))
	ctx := context.Background()
	base := t.TempDir()
	dir := filepath.Join(base, "data")
	rep, err := fixtures.Generate(dir, fixtures.Options{Seed: seed, Conversations: 30})
	if err != nil {
		t.Fatal(err)
	}
	var sources []string // fork sources, moved out and back
	for _, c := range rep.Conversations {
		sources = append(sources, c.DependsOn...)
	}
	if len(sources) == 0 {
		t.Fatal("the generated store has no fork that depends on its source")
	}
	// Another machine's store: conversations to copy in and import.
	other := filepath.Join(base, "other")
	if _, err := fixtures.Generate(other, fixtures.Options{Seed: seed + 1, Conversations: 25, OrdinaryOnly: true}); err != nil {
		t.Fatal(err)
	}
	otherTree := walkOf(t, other)
	holding := filepath.Join(base, "holding")
	if err := os.Mkdir(holding, 0o700); err != nil {
		t.Fatal(err)
	}
	// The runtime configuration, changed now and then: the rows kept are
	// checked against it again.
	cfg := filepath.Join(base, "config.toml")
	c := &changer{t: t, rng: rng, dir: dir, other: other, otherTree: otherTree, holding: holding, sources: sources, config: cfg}
	c.configure()
	run(t, dir, reindex.Options{Machine: c.machine()}) // the first index: a rebuild

	for round := 1; round <= 16; round++ {
		var did []string
		for n := 1 + rng.IntN(5); n > 0; n-- {
			did = append(did, c.change())
		}
		t.Logf("round %d: %s", round, strings.Join(did, "; "))
		before := walkOf(t, dir)
		res := run(t, dir, reindex.Options{Incremental: true, Machine: c.machine()})
		if !res.Incremental || res.FullReason != "" {
			t.Fatalf("round %d: the incremental run rebuilt in full: %q", round, res.FullReason)
		}
		if res.Kept == 0 || res.Kept+res.Replayed+len(res.DeletionsFinished) > len(before.Conversations) {
			t.Fatalf("round %d: kept %d, replayed %d, deletions %d of %d conversations", round, res.Kept, res.Replayed,
				len(res.DeletionsFinished), len(before.Conversations))
		}
		inc := dump(t, filepath.Join(dir, store.IndexFileName))
		chk, err := reindex.Check(ctx, readOnly(t, dir), reindex.Options{Machine: c.machine()})
		if err != nil {
			t.Fatal(err)
		}
		if chk.Drift() {
			t.Fatalf("round %d: check after the incremental run: %s %+v", round, chk.IndexProblem, chk.Differences)
		}
		// The rebuild, beside it: the incremental index is moved aside
		// (the same file) and put back for the next round.
		db, aside := filepath.Join(dir, store.IndexFileName), filepath.Join(base, "incremental.db")
		if err := os.Rename(db, aside); err != nil {
			t.Fatal(err)
		}
		full := run(t, dir, reindex.Options{Machine: c.machine()})
		rebuilt := dump(t, db)
		if d := diffLines(inc, rebuilt); d != "" {
			t.Fatalf("round %d: the incremental index differs from the rebuild (-incremental +rebuild):\n%s", round, d)
		}
		if res.Indexed != full.Indexed || res.Sessions != full.Sessions || res.Turns != full.Turns || res.Messages != full.Messages ||
			!slices.EqualFunc(res.WillNotOpen, full.WillNotOpen, func(a, b reindex.WillNotOpen) bool {
				return a.ID == b.ID && slices.Equal(a.Reasons, b.Reasons)
			}) || !slices.Equal(skipPaths(res.Skipped), skipPaths(full.Skipped)) {
			t.Fatalf("round %d: results differ:\nincremental %+v\nrebuild     %+v", round, res, full)
		}
		if len(full.DeletionsFinished) > 0 {
			t.Fatalf("round %d: the rebuild finished deletions the incremental run left: %v", round, full.DeletionsFinished)
		}
		if err := errors.Join(os.Remove(db), os.Rename(aside, db)); err != nil {
			t.Fatal(err)
		}
	}
	// Nothing changed: every row kept, none replayed.
	res := run(t, dir, reindex.Options{Incremental: true, Machine: c.machine()})
	if res.Replayed != 0 || res.Removed != 0 || res.Kept != res.Indexed {
		t.Fatalf("a run with nothing changed kept %d, replayed %d, removed %d of %d", res.Kept, res.Replayed, res.Removed, res.Indexed)
	}
}

// TestIncrementalWithoutIndex: without a usable index an incremental run
// rebuilds, saying why.
func TestIncrementalWithoutIndex(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if _, err := fixtures.Generate(dir, fixtures.Options{Seed: 3, Conversations: 12, OrdinaryOnly: true}); err != nil {
		t.Fatal(err)
	}
	res := run(t, dir, reindex.Options{Incremental: true})
	if res.FullReason != "metadata.db does not exist" || res.Indexed != 12 {
		t.Fatalf("no index: reason %q, indexed %d", res.FullReason, res.Indexed)
	}
	if err := os.WriteFile(filepath.Join(dir, store.IndexFileName), []byte("not a database, but long enough to be read as one by SQLite\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res = run(t, dir, reindex.Options{Incremental: true})
	if !strings.HasPrefix(res.FullReason, "metadata.db is not usable") || res.Indexed != 12 {
		t.Fatalf("garbage index: reason %q, indexed %d", res.FullReason, res.Indexed)
	}
	res = run(t, dir, reindex.Options{Incremental: true})
	if res.FullReason != "" || res.Kept != 12 {
		t.Fatalf("rebuilt index: reason %q, kept %d", res.FullReason, res.Kept)
	}
}

// changer makes one random change to the store at a time.
type changer struct {
	t         *testing.T
	rng       *rand.Rand
	dir       string
	other     string
	otherTree *store.Tree
	holding   string
	// sources are fork sources to move out and back; config the runtime
	// configuration's path.
	sources []string
	config  string
	n       int
}

// configure writes a runtime configuration of some of the agents and
// models the generated conversations use.
func (c *changer) configure() string {
	var b strings.Builder
	for _, a := range []string{"coder", "explorer", "reviewer"} {
		if c.rng.IntN(3) > 0 {
			fmt.Fprintf(&b, "[agents.%s]\n", a)
		}
	}
	for _, m := range []string{"deepseek-flash", "deepseek-pro"} {
		if c.rng.IntN(3) > 0 {
			fmt.Fprintf(&b, "[models.%s]\n", m)
		}
	}
	if err := os.WriteFile(c.config, []byte(b.String()), 0o600); err != nil {
		c.t.Fatal(err)
	}
	return "configured " + strings.ReplaceAll(strings.TrimSpace(b.String()), "\n", " ")
}

func (c *changer) machine() *store.Machine {
	m, _, err := store.LoadMachine(c.config, true)
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}

func (c *changer) open() *store.Store {
	s, err := store.Open(context.Background(), c.dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		c.t.Fatal(err)
	}
	return s
}

// pick is a random conversation of the store, ok false when there is
// none.
func (c *changer) pick() (store.ConversationDir, bool) {
	tree := walkOf(c.t, c.dir)
	if len(tree.Conversations) == 0 {
		return store.ConversationDir{}, false
	}
	return tree.Conversations[c.rng.IntN(len(tree.Conversations))], true
}

// sessionLog is a random session log of conv, "" when it has none.
func (c *changer) sessionLog(conv store.ConversationDir) string {
	var logs []string
	for _, l := range conv.Logs {
		if !l.IsConversationLog {
			logs = append(logs, l.Path)
		}
	}
	if len(logs) == 0 {
		return ""
	}
	return logs[c.rng.IntN(len(logs))]
}

// change makes one change and says what it did.
func (c *changer) change() string {
	c.n++
	conv, ok := c.pick()
	if !ok {
		return c.copyIn()
	}
	t := c.t
	switch c.rng.IntN(17) {
	case 15:
		return c.configure()
	case 16:
		// A fork source moved out, or back in.
		id := c.sources[c.rng.IntN(len(c.sources))]
		name, err := store.EncodeSegment(id)
		if err != nil {
			t.Fatal(err)
		}
		in, out := filepath.Join(store.ConversationsDir(c.dir), name), filepath.Join(c.holding, name)
		if os.Rename(in, out) == nil {
			return "moved out the fork source " + id
		}
		if os.Rename(out, in) == nil {
			return "moved back the fork source " + id
		}
		return "the fork source " + id + " is gone"
	case 0:
		s := c.open()
		defer s.Close()
		if err := s.Rename(conv.ID, fmt.Sprintf("renamed %d", c.n)); err != nil {
			return "rename refused: " + err.Error()
		}
		return "renamed " + conv.ID
	case 1:
		s := c.open()
		defer s.Close()
		info, err := s.Conversation(conv.ID)
		if err != nil {
			return "archive: " + err.Error()
		}
		if info.Archived {
			err = s.Unarchive(conv.ID)
		} else {
			err = s.Archive(conv.ID)
		}
		return fmt.Sprintf("archived/unarchived %s (%v)", conv.ID, err)
	case 2:
		s := c.open()
		defer s.Close()
		info, err := s.Conversation(conv.ID)
		if err != nil || len(info.Sessions) == 0 {
			return fmt.Sprintf("no turn in %s (%v)", conv.ID, err)
		}
		se, err := s.OpenSession(conv.ID, info.Sessions[0].ID)
		if err != nil {
			return "session refused: " + err.Error()
		}
		defer se.Close()
		msg, err := convlog.NewUserMessage(fmt.Sprintf("u-%d", c.n), convlog.TextBlock("a turn of the test"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := se.BeginTurn(msg); err != nil {
			return "turn refused: " + err.Error()
		}
		if c.rng.IntN(3) > 0 {
			if err := se.EndTurn(store.OutcomeCompleted, nil); err != nil {
				t.Fatal(err)
			}
			return "a turn in " + conv.ID
		}
		return "a turn left running in " + conv.ID
	case 3:
		p := c.sessionLog(conv)
		if p == "" {
			return "no session log in " + conv.ID
		}
		w, err := convlog.OpenAppend(p, convlog.WriterOptions{})
		if err != nil {
			return "no append to " + p + ": " + err.Error()
		}
		defer w.Close()
		err = w.Append([]convlog.Event{{Type: "test/note", Time: time.Now().UnixMilli(), Data: []byte(`{"n":` + strconv.Itoa(c.n) + `}`), Ignorable: true}})
		if err != nil {
			t.Fatal(err)
		}
		return "an ignorable event appended to " + p
	case 4:
		p := c.sessionLog(conv)
		if p == "" {
			return "no session log in " + conv.ID
		}
		tail := []byte(`{"type":"user/mess`)
		if strings.HasSuffix(p, ".zst") {
			tail = []byte{0x28, 0xb5, 0x2f, 0xfd, 0x24} // a frame's start
		}
		appendBytes(t, p, tail)
		return "a torn tail on " + p
	case 5:
		p := c.sessionLog(conv)
		o := c.otherTree.Conversations[c.rng.IntN(len(c.otherTree.Conversations))]
		for _, l := range o.Logs {
			if !l.IsConversationLog && p != "" {
				cp(t, l.Path, filepath.Join(conv.Path, filepath.Base(l.Path)))
				return "a session log of another store copied into " + conv.ID
			}
		}
		return "no session log copied"
	case 6:
		if err := os.Rename(conv.Path, filepath.Join(c.holding, conv.Name)); err != nil {
			t.Fatal(err)
		}
		return "moved out " + conv.ID
	case 7:
		ents, _ := os.ReadDir(c.holding)
		if len(ents) == 0 {
			return "nothing to move back"
		}
		e := ents[c.rng.IntN(len(ents))]
		to := filepath.Join(store.ConversationsDir(c.dir), e.Name())
		if _, err := os.Lstat(to); err == nil {
			return "not moved back: " + e.Name() + " exists"
		}
		if err := os.Rename(filepath.Join(c.holding, e.Name()), to); err != nil {
			t.Fatal(err)
		}
		return "moved back " + e.Name()
	case 8:
		b, _ := c.pick()
		if b.Path == conv.Path {
			return "no swap"
		}
		tmp := conv.Path + ".swap"
		if err := errors.Join(os.Rename(conv.Path, tmp), os.Rename(b.Path, conv.Path), os.Rename(tmp, b.Path)); err != nil {
			t.Fatal(err)
		}
		return "swapped " + conv.ID + " and " + b.ID
	case 9:
		return c.copyIn()
	case 10:
		return c.importOne()
	case 11:
		s := c.open()
		defer s.Close()
		if err := s.DeleteAll(context.Background(), []string{conv.ID}, store.DeleteOptions{}); err != nil {
			return "delete refused: " + err.Error()
		}
		return "deleted " + conv.ID
	case 12:
		s := c.open()
		defer s.Close()
		if err := s.MarkDeleting(conv.ID); err != nil {
			return "no tombstone: " + err.Error()
		}
		return "a delete interrupted after the tombstone: " + conv.ID
	case 13:
		if c.rng.IntN(2) == 0 {
			if err := os.RemoveAll(conv.Path); err != nil {
				t.Fatal(err)
			}
			return "removed by hand " + conv.ID
		}
		ents, _ := os.ReadDir(conv.Path)
		for _, e := range ents {
			os.RemoveAll(filepath.Join(conv.Path, e.Name()))
		}
		return "emptied by hand " + conv.ID
	default:
		// In place, with size and modification time kept: only the change
		// time tells.
		if len(conv.Logs) == 0 {
			return "no log to change in " + conv.ID
		}
		p := conv.Logs[c.rng.IntN(len(conv.Logs))].Path
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) == 0 {
			return "an empty log " + p
		}
		i := c.rng.IntN(len(data))
		data[i] ^= 0x01
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("byte %d of %s changed in place, size and time kept", i, p)
	}
}

// copyIn copies a conversation of the other store in by hand (cp -a: the
// files keep their times).
func (c *changer) copyIn() string {
	o := c.otherTree.Conversations[c.rng.IntN(len(c.otherTree.Conversations))]
	to := filepath.Join(store.ConversationsDir(c.dir), o.Name)
	if _, err := os.Lstat(to); err == nil {
		return "not copied: " + o.ID + " exists"
	}
	if out, err := exec.Command("cp", "-a", o.Path, to).CombinedOutput(); err != nil {
		c.t.Fatalf("cp -a: %v: %s", err, out)
	}
	return "copied in by hand " + o.ID
}

// importOne exports a conversation of the other store (with its fork
// ancestors) and imports it, replacing one of the same id.
func (c *changer) importOne() string {
	ctx := context.Background()
	o := c.otherTree.Conversations[c.rng.IntN(len(c.otherTree.Conversations))]
	src, err := store.Open(ctx, c.other, store.OpenOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	var buf bytes.Buffer
	_, err = transfer.Export(ctx, src, &buf, transfer.ExportOptions{IDs: []string{o.ID}})
	src.Close()
	if err != nil {
		c.t.Fatal(err)
	}
	// The caller takes the lock; one handle serves the staging and the
	// import.
	s, err := store.Open(ctx, c.dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "test"}})
	if err != nil {
		c.t.Fatal(err)
	}
	defer s.Close()
	sg, err := transfer.Stage(ctx, &buf, s, transfer.ImportOptions{Archive: o.ID, OnConflict: transfer.ConflictReplace})
	if err == nil {
		defer sg.Close()
		_, err = sg.Import(ctx, s)
	}
	if err != nil {
		return "import refused: " + err.Error()
	}
	return "imported " + o.ID
}

func appendBytes(t *testing.T, p string, b []byte) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
}

func cp(t *testing.T, from, to string) {
	if out, err := exec.Command("cp", "-a", from, to).CombinedOutput(); err != nil {
		t.Fatalf("cp -a: %v: %s", err, out)
	}
}

func run(t *testing.T, dir string, opts reindex.Options) *reindex.Result {
	t.Helper()
	s, err := store.Open(context.Background(), dir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := reindex.Run(context.Background(), s, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func readOnly(t *testing.T, dir string) *store.Store {
	s, err := store.Open(context.Background(), dir, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func walkOf(t *testing.T, dir string) *store.Tree {
	s := readOnly(t, dir)
	tree, err := s.Walk()
	if err != nil {
		t.Fatal(err)
	}
	return tree
}

func skipPaths(sk []store.Item) []string {
	var out []string
	for _, s := range sk {
		out = append(out, s.Path+": "+s.Reason)
	}
	return out
}

// dump is every row of every table of the index at path, as sorted
// lines: the search text through message_rows, which must map every
// message to its conversation (no orphans either way).
func dump(t *testing.T, path string) []string {
	t.Helper()
	if _, err := os.Stat(path + "-wal"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("%s-wal remains after the run", path)
	}
	return indexRows(t, path)
}

func indexRows(t *testing.T, path string) []string {
	t.Helper()
	rows, err := fixtures.IndexRows(path)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// diffLines lists the lines only one of a and b holds (both sorted).
func diffLines(a, b []string) string {
	var d strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			fmt.Fprintf(&d, "-%s\n", clipLine(a[i]))
			i++
		case i == len(a) || b[j] < a[i]:
			fmt.Fprintf(&d, "+%s\n", clipLine(b[j]))
			j++
		default:
			i++
			j++
		}
	}
	return d.String()
}

func clipLine(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// TestIncrementalSparseForeignAppends: in a store of more conversations
// than the readers may hold ahead of the writer, a few far apart are
// changed by hand: an event line appended to a compressed session log in
// a frame the zstd tool wrote.
// The incremental run replays exactly those, keeps the rest, and leaves
// the index a full rebuild writes, the appended events counted.
func TestIncrementalSparseForeignAppends(t *testing.T) {
	if _, err := exec.LookPath("zstd"); err != nil {
		t.Skip("zstd tool not installed")
	}
	base := t.TempDir()
	dir := filepath.Join(base, "data")
	if _, err := fixtures.Generate(dir, fixtures.Options{Seed: 5, Conversations: 90, OrdinaryOnly: true, Compression: convlog.Zstd}); err != nil {
		t.Fatal(err)
	}
	run(t, dir, reindex.Options{Jobs: 2})
	orig := dump(t, filepath.Join(dir, store.IndexFileName))
	tree := walkOf(t, dir)
	if len(tree.Conversations) <= 2*16 {
		t.Fatalf("%d conversations: not more than the readers hold ahead", len(tree.Conversations))
	}
	var changed []string
	for i := 3; i < len(tree.Conversations); i += 17 {
		// A compressed version 4 session log of the conversation.
		conv := tree.Conversations[i]
		var p string
		for _, l := range conv.Logs {
			if !l.IsConversationLog && strings.HasSuffix(l.Path, ".v4.jsonl.zst") {
				p = l.Path
			}
		}
		if p == "" {
			continue
		}
		// The seq the log's next event takes: opened for appending and
		// closed without an append, which writes nothing.
		w, err := convlog.OpenAppend(p, convlog.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		seq := w.NextSeq()
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		ev := convlog.Event{Type: "test/note", Seq: seq, Time: time.Now().UnixMilli(), Data: []byte(`{"by":"hand"}`), Ignorable: true}
		cmd := exec.Command("zstd", "-q", "-c")
		cmd.Stdin = bytes.NewReader(append(ev.AppendJSON(nil), '\n'))
		frame, err := cmd.Output()
		if err != nil {
			t.Fatalf("zstd: %v", err)
		}
		appendBytes(t, p, frame)
		changed = append(changed, conv.ID)
	}
	if len(changed) < 3 {
		t.Fatalf("%d conversations changed: want at least 3 far apart", len(changed))
	}

	res := run(t, dir, reindex.Options{Incremental: true, Jobs: 2})
	if res.Replayed != len(changed) || res.Kept != len(tree.Conversations)-len(changed) {
		t.Fatalf("replayed %d and kept %d of %d conversations; want %d replayed", res.Replayed, res.Kept,
			len(tree.Conversations), len(changed))
	}
	inc := dump(t, filepath.Join(dir, store.IndexFileName))
	if chk, err := reindex.Check(context.Background(), readOnly(t, dir), reindex.Options{}); err != nil || chk.Drift() {
		t.Fatalf("check after the incremental run: %v %+v", err, chk)
	}
	db, aside := filepath.Join(dir, store.IndexFileName), filepath.Join(base, "incremental.db")
	if err := os.Rename(db, aside); err != nil {
		t.Fatal(err)
	}
	run(t, dir, reindex.Options{Jobs: 2})
	if d := diffLines(inc, dump(t, db)); d != "" {
		t.Fatalf("the incremental index differs from the rebuild (-incremental +rebuild):\n%s", d)
	}
	// The events appended by hand are in the index: the rows that differ
	// from the index before are those of the changed conversations (their
	// sessions' event counts and sizes), some for each.
	var differ []string // the rows of one index only
	for _, pair := range [][2][]string{{orig, inc}, {inc, orig}} {
		for _, l := range pair[0] {
			if _, found := slices.BinarySearch(pair[1], l); !found {
				differ = append(differ, l)
			}
		}
	}
	for _, id := range changed {
		if !slices.ContainsFunc(differ, func(l string) bool { return strings.Contains(l, id) }) {
			t.Errorf("no row of %s changed", id)
		}
	}
	for _, l := range differ {
		if !slices.ContainsFunc(changed, func(id string) bool { return strings.Contains(l, id) }) {
			t.Errorf("a row of an unchanged conversation differs: %s", clipLine(l))
		}
	}
}
