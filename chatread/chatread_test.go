package chatread

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/store"
)

var testKey = []byte("0123456789abcdef0123456789abcdef-test-key")

type sample struct {
	s   *store.Store
	rep *fixtures.Report
	dir string
}

func newSample(t *testing.T) *sample {
	t.Helper()
	dir := t.TempDir()
	rep, err := fixtures.Sample(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Read-only, as the runtime's tools would read beside it.
	s, err := store.Open(context.Background(), dir, store.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return &sample{s: s, rep: rep, dir: dir}
}

func (sm *sample) root(t *testing.T, c fixtures.Case) Chat {
	t.Helper()
	conv := sm.rep.Find(c)
	info, err := sm.s.ReadConversation(conv.ID)
	if err != nil {
		t.Fatal(err)
	}
	return Chat{conv.ID, info.RootSession().ID}
}

// children are the sessions of chat's conversation whose parent is chat.
func (sm *sample) children(t *testing.T, c Chat) []Chat {
	t.Helper()
	info, _ := sm.s.ReadConversation(c.Conversation)
	var out []Chat
	for _, si := range info.Sessions {
		if si.ParentSession == c.Session {
			out = append(out, Chat{c.Conversation, si.ID})
		}
	}
	return out
}

func newReader(t *testing.T, s *store.Store, key []byte) *Reader {
	t.Helper()
	r, err := New(s, Config{Enabled: true, Key: key})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func all(t *testing.T, r *Reader, asker, target Chat) []Message {
	t.Helper()
	p, err := r.Messages(context.Background(), asker, target, Request{Limit: MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	if p.Next != "" {
		t.Fatal("more than one page")
	}
	return p.Items
}

// TestPolicy: a chat reads itself, its subagents (down the tree) and its
// fork ancestors up to the fork, and nothing else; what it may not read
// answers as what does not exist.
func TestPolicy(t *testing.T) {
	sm := newSample(t)
	r := newReader(t, sm.s, testKey)
	ctx := context.Background()
	basic := sm.root(t, fixtures.CaseBasic)
	kids := sm.children(t, basic)
	if len(kids) != 2 {
		t.Fatalf("%d subagents", len(kids))
	}
	var nested, grandchild Chat
	for _, k := range kids {
		if g := sm.children(t, k); len(g) == 1 {
			nested, grandchild = k, g[0]
		}
	}
	rel, err := r.Readable(ctx, basic)
	if err != nil || len(rel) != 4 || rel[0].Relation != RelationSelf || rel[0].Chat != basic {
		t.Fatalf("the root reads %+v, %v", rel, err)
	}
	for _, c := range rel[1:] {
		if c.Relation != RelationSubagent {
			t.Fatalf("%+v", c)
		}
	}
	// A subagent reads itself and its own subagent, not its parent.
	rel, _ = r.Readable(ctx, nested)
	if len(rel) != 2 || rel[1].Chat != grandchild {
		t.Fatalf("the nested subagent reads %+v", rel)
	}
	for _, target := range []Chat{basic, kids[0], kids[1]} {
		if target == nested {
			continue
		}
		if _, err := r.Messages(ctx, nested, target, Request{}); !errors.Is(err, ErrNotReadable) {
			t.Fatalf("a subagent read %v: %v", target, err)
		}
	}
	if _, err := r.Messages(ctx, grandchild, nested, Request{}); !errors.Is(err, ErrNotReadable) {
		t.Fatal("a subagent read its parent")
	}
	// A fork reads its ancestor as it was at the fork, not its subagents,
	// not another conversation.
	fork := sm.root(t, fixtures.CaseFork)
	rel, _ = r.Readable(ctx, fork)
	if len(rel) != 2 || rel[1].Chat != basic || rel[1].Relation != RelationForkAncestor || !rel[1].Partial {
		t.Fatalf("the fork reads %+v", rel)
	}
	upTo, full := all(t, r, fork, basic), all(t, r, basic, basic)
	if len(upTo) == 0 || len(upTo) >= len(full) {
		t.Fatalf("the fork reads %d of its ancestor's %d messages", len(upTo), len(full))
	}
	for i := range upTo {
		if upTo[i].ID != full[i].ID {
			t.Fatalf("message %d: %s, the ancestor's is %s", i, upTo[i].ID, full[i].ID)
		}
	}
	for _, target := range []Chat{kids[0], sm.root(t, fixtures.CaseCompaction), {basic.Conversation, "no-such-session"}} {
		if _, err := r.Messages(ctx, fork, target, Request{}); !errors.Is(err, ErrNotReadable) {
			t.Fatalf("the fork read %v: %v", target, err)
		}
	}
	// The source does not read its fork.
	if _, err := r.History(ctx, basic, fork, Request{}); !errors.Is(err, ErrNotReadable) {
		t.Fatalf("the source read its fork: %v", err)
	}
	// A fork after a compaction: its ancestor's whole record up to the
	// fork, the summarised part included; its history is what its model
	// reads, shorter.
	fac := sm.root(t, fixtures.CaseForkAfterCompaction)
	src := sm.root(t, fixtures.CaseCompaction)
	mine := all(t, r, fac, fac)
	if len(mine) <= len(all(t, r, fac, src)) || !mine[0].Inherited {
		t.Fatalf("fork after compaction: %d messages", len(mine))
	}
	h, err := r.History(ctx, fac, fac, Request{Limit: MaxLimit})
	if err != nil || len(h.Items) == 0 || len(h.Items) >= len(mine) {
		t.Fatalf("history %d, messages %d, %v", len(h.Items), len(mine), err)
	}
	// Nobody reads from an unknown chat.
	for _, asker := range []Chat{{"no-such", "x"}, {basic.Conversation, "no-such"}} {
		if _, err := r.Readable(ctx, asker); !errors.Is(err, ErrNotReadable) {
			t.Fatalf("asker %v: %v", asker, err)
		}
	}
}

// TestPaging: pages through cursors give what one page gives, in order.
func TestPaging(t *testing.T) {
	sm := newSample(t)
	r := newReader(t, sm.s, testKey)
	ctx := context.Background()
	fac := sm.root(t, fixtures.CaseForkAfterCompaction)
	want := all(t, r, fac, fac)
	var got []Message
	req := Request{Limit: 3}
	pages := 0
	for {
		p, err := r.Messages(ctx, fac, fac, req)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Items...)
		pages++
		if p.Next == "" {
			break
		}
		if len(p.Items) != 3 {
			t.Fatalf("page %d of %d items", pages, len(p.Items))
		}
		req.Cursor = p.Next
	}
	if len(got) != len(want) || pages != (len(want)+2)/3 {
		t.Fatalf("%d items in %d pages, want %d", len(got), pages, len(want))
	}
	for i := range got {
		if got[i].ID != want[i].ID {
			t.Fatalf("item %d: %s, want %s", i, got[i].ID, want[i].ID)
		}
	}
}

// TestCursors: a cursor shows nothing of where it points, and is refused
// when forged, cut, changed, sealed with another key, or given back by
// another chat, for another chat, operation or query.
func TestCursors(t *testing.T) {
	sm := newSample(t)
	r := newReader(t, sm.s, testKey)
	ctx := context.Background()
	basic := sm.root(t, fixtures.CaseBasic)
	fork := sm.root(t, fixtures.CaseFork)
	p, err := r.Messages(ctx, basic, basic, Request{Limit: 2})
	if err != nil || p.Next == "" {
		t.Fatalf("first page: %v", err)
	}
	c := p.Next
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{basic.Conversation, basic.Session, "conversations", `"n":`, "messages"} {
		if bytes.Contains(raw, []byte(leak)) {
			t.Fatalf("the cursor shows %q", leak)
		}
	}
	if _, err := r.Messages(ctx, basic, basic, Request{Cursor: c, Limit: 2}); err != nil {
		t.Fatalf("the cursor itself: %v", err)
	}
	flip := []byte(c)
	flip[len(flip)/2] ^= 1
	forged := base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte{7}, len(raw)))
	other, err := New(sm.s, Config{Enabled: true, Key: bytes.Repeat([]byte("k"), 32)})
	if err != nil {
		t.Fatal(err)
	}
	kid := sm.children(t, basic)[0]
	for _, tc := range []struct {
		name string
		run  func() error
	}{
		{"cut", func() error { _, err := r.Messages(ctx, basic, basic, Request{Cursor: c[:len(c)-1]}); return err }},
		{"cut short", func() error { _, err := r.Messages(ctx, basic, basic, Request{Cursor: c[:10]}); return err }},
		{"changed", func() error { _, err := r.Messages(ctx, basic, basic, Request{Cursor: string(flip)}); return err }},
		{"forged", func() error { _, err := r.Messages(ctx, basic, basic, Request{Cursor: forged}); return err }},
		{"not base64", func() error { _, err := r.Messages(ctx, basic, basic, Request{Cursor: "!!"}); return err }},
		{"another key", func() error { _, err := other.Messages(ctx, basic, basic, Request{Cursor: c}); return err }},
		// The fork may read basic too: the cursor is still basic's own.
		{"another asker", func() error { _, err := r.Messages(ctx, fork, basic, Request{Cursor: c}); return err }},
		{"another chat", func() error { _, err := r.Messages(ctx, basic, kid, Request{Cursor: c}); return err }},
		{"another operation", func() error { _, err := r.History(ctx, basic, basic, Request{Cursor: c}); return err }},
		{"another query", func() error { _, err := r.Search(ctx, basic, "the", Request{Cursor: c}); return err }},
	} {
		if err := tc.run(); !errors.Is(err, ErrBadCursor) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// Search cursors are bound to their query.
	sp, err := r.Search(ctx, basic, "the", Request{Limit: 1})
	if err != nil || sp.Next == "" {
		t.Fatalf("search: %v", err)
	}
	if _, err := r.Search(ctx, basic, "a", Request{Cursor: sp.Next}); !errors.Is(err, ErrBadCursor) {
		t.Errorf("search cursor for another query: %v", err)
	}
	if _, err := r.Search(ctx, basic, "the", Request{Cursor: sp.Next}); err != nil {
		t.Errorf("search cursor: %v", err)
	}
}

// TestCursorExpiry: a cursor is good for Config.CursorTTL after its page
// was given, by the caller's clock, and is refused as expired after it,
// when dated too far ahead (a clock set back), or when undated (sealed
// before cursors were dated); the next page's cursor is dated anew.
func TestCursorExpiry(t *testing.T) {
	sm := newSample(t)
	ctx := context.Background()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	r, err := New(sm.s, Config{Enabled: true, Key: testKey, CursorTTL: time.Hour, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	basic := sm.root(t, fixtures.CaseBasic)
	given := now
	p, err := r.Messages(ctx, basic, basic, Request{Limit: 1})
	if err != nil || p.Next == "" {
		t.Fatalf("first page: %v", err)
	}
	c := p.Next
	for _, tc := range []struct {
		name string
		at   time.Time
		want error
	}{
		{"at once", given, nil},
		{"at the end of its hour", given.Add(time.Hour), nil},
		{"a second after", given.Add(time.Hour + time.Second), ErrCursorExpired},
		{"a day after", given.Add(24 * time.Hour), ErrCursorExpired},
		{"the clock set back half a minute", given.Add(-30 * time.Second), nil},
		{"the clock set back two minutes", given.Add(-2 * time.Minute), ErrCursorExpired},
	} {
		now = tc.at
		_, err := r.Messages(ctx, basic, basic, Request{Cursor: c, Limit: 1})
		if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if errors.Is(err, ErrCursorExpired) && errors.Is(err, ErrBadCursor) {
			t.Errorf("%s: an expired cursor is also reported as not this deployment's", tc.name)
		}
	}
	// Paging on: each page's cursor is dated when it is given.
	now = given.Add(50 * time.Minute)
	p2, err := r.Messages(ctx, basic, basic, Request{Cursor: c, Limit: 1})
	if err != nil || p2.Next == "" {
		t.Fatalf("second page: %v", err)
	}
	now = given.Add(100 * time.Minute)
	if _, err := r.Messages(ctx, basic, basic, Request{Cursor: p2.Next, Limit: 1}); err != nil {
		t.Fatalf("the second page's cursor, 50 minutes after it was given: %v", err)
	}
	if _, err := r.Messages(ctx, basic, basic, Request{Cursor: c, Limit: 1}); !errors.Is(err, ErrCursorExpired) {
		t.Fatalf("the first page's cursor, 100 minutes after it was given: %v", err)
	}
	// Sealed without a date, as before cursors were dated, and otherwise
	// good for this request.
	pos, err := r.sl.open(c)
	if err != nil || pos.Issued != given.Unix() {
		t.Fatalf("the first cursor's date: %+v %v", pos, err)
	}
	pos.Issued = 0
	undated, err := r.sl.seal(pos)
	if err != nil {
		t.Fatal(err)
	}
	now = given
	if _, err := r.Messages(ctx, basic, basic, Request{Cursor: undated, Limit: 1}); !errors.Is(err, ErrCursorExpired) {
		t.Fatalf("an undated cursor: %v", err)
	}
	if _, err := New(sm.s, Config{Enabled: true, Key: testKey, CursorTTL: -time.Second}); err == nil {
		t.Fatal("a negative cursor lifetime was taken")
	}
	if _, err := New(sm.s, Config{Enabled: true, Key: testKey, CursorTTL: MaxCursorTTL + time.Second}); err == nil {
		t.Fatal("a cursor lifetime over the maximum was taken")
	}
}

// TestSearch: a search finds what the asker may read, and nothing else.
func TestSearch(t *testing.T) {
	sm := newSample(t)
	r := newReader(t, sm.s, testKey)
	ctx := context.Background()
	basic := sm.root(t, fixtures.CaseBasic)
	kid := sm.children(t, basic)[0]
	// A word of the subagent's task (its first message).
	task := all(t, r, kid, kid)[0].Text
	word := strings.Fields(task)[len(strings.Fields(task))-1]
	p, err := r.Search(ctx, basic, word, Request{Limit: MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, m := range p.Items {
		found = found || m.Chat == kid
		if !strings.Contains(strings.ToLower(m.Text), strings.ToLower(word)) {
			t.Fatalf("hit without %q: %q", word, m.Text)
		}
	}
	if !found {
		t.Fatalf("the root did not find its subagent's %q: %+v", word, p.Items)
	}
	other := sm.root(t, fixtures.CaseOddIDs)
	p, _ = r.Search(ctx, other, word, Request{Limit: MaxLimit})
	for _, m := range p.Items {
		if m.Conversation != other.Conversation {
			t.Fatalf("another conversation's message found: %+v", m)
		}
	}
}

// TestDisabled: off, every operation says so, and New needs no key.
func TestDisabled(t *testing.T) {
	sm := newSample(t)
	r, err := New(sm.s, Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	basic := sm.root(t, fixtures.CaseBasic)
	if _, err := r.Readable(ctx, basic); !errors.Is(err, ErrDisabled) {
		t.Error("Readable:", err)
	}
	if _, err := r.Messages(ctx, basic, basic, Request{}); !errors.Is(err, ErrDisabled) {
		t.Error("Messages:", err)
	}
	if _, err := r.History(ctx, basic, basic, Request{}); !errors.Is(err, ErrDisabled) {
		t.Error("History:", err)
	}
	if _, err := r.Search(ctx, basic, "x", Request{}); !errors.Is(err, ErrDisabled) {
		t.Error("Search:", err)
	}
	if _, err := New(sm.s, Config{Enabled: true, Key: []byte("short")}); err == nil {
		t.Error("a short key was taken")
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o600)
		return p
	}
	if c, err := LoadConfig(write("none.toml", "[agents.coder]\nmodel = \"m\"\n")); err != nil || c.Enabled {
		t.Fatalf("no table: %+v %v", c, err)
	}
	if c, err := LoadConfig(write("off.toml", "[chat_reading]\nenabled = false\nkey_file = \"k\"\n")); err != nil || c.Enabled {
		t.Fatalf("off: %+v %v", c, err)
	}
	if _, err := LoadConfig(write("nokey.toml", "[chat_reading]\nenabled = true\n")); err == nil || !strings.Contains(err.Error(), "no key_file") {
		t.Fatalf("enabled without a key: %v", err)
	}
	if err := NewKeyFile(filepath.Join(dir, "chat.key")); err != nil {
		t.Fatal(err)
	}
	if err := NewKeyFile(filepath.Join(dir, "chat.key")); err == nil {
		t.Fatal("a key file was overwritten")
	}
	if fi, _ := os.Stat(filepath.Join(dir, "chat.key")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", fi.Mode())
	}
	c, err := LoadConfig(write("on.toml", "[chat_reading]\nenabled = true\nkey_file = \"chat.key\"\n"))
	if err != nil || !c.Enabled || len(c.Key) != MinKeyBytes {
		t.Fatalf("on: %+v %v", c, err)
	}
	write("short.key", "tooshort")
	if _, err := LoadConfig(write("short.toml", "[chat_reading]\nenabled = true\nkey_file = \"short.key\"\n")); err == nil {
		t.Fatal("a short key file was taken")
	}
	if c.CursorTTL != 0 {
		t.Fatalf("on: cursor_ttl %v without one in the file", c.CursorTTL)
	}
	c, err = LoadConfig(write("ttl.toml", "[chat_reading]\nenabled = true\nkey_file = \"chat.key\"\ncursor_ttl = \"90m\"\n"))
	if err != nil || c.CursorTTL != 90*time.Minute {
		t.Fatalf("cursor_ttl 90m: %+v %v", c.CursorTTL, err)
	}
	for _, bad := range []string{"0s", "-1h", "an hour", "721h", "3"} {
		p := write("badttl.toml", "[chat_reading]\nenabled = true\nkey_file = \"chat.key\"\ncursor_ttl = \""+bad+"\"\n")
		if _, err := LoadConfig(p); err == nil || !strings.Contains(err.Error(), "cursor_ttl") || !strings.Contains(err.Error(), p) {
			t.Errorf("cursor_ttl %q: %v", bad, err)
		}
	}
	// The runtime configuration's limits hold here too (store.DecodeRuntimeConfig).
	deep := write("deep.toml", "[chat_reading]\nenabled = true\nkey_file = \"chat.key\"\n"+strings.Repeat("a.", 40)+"a = 1\n")
	if _, err := LoadConfig(deep); err == nil || !strings.HasPrefix(err.Error(), deep+": line 4: ") || !strings.Contains(err.Error(), ": nested deeper than ") {
		t.Fatalf("a key 41 levels deep: %v", err)
	}
	os.Symlink(filepath.Join(dir, "chat.key"), filepath.Join(dir, "link.key"))
	if _, err := LoadConfig(write("link.toml", "[chat_reading]\nenabled = true\nkey_file = \"link.key\"\n")); err == nil {
		t.Fatal("a key file through a link was read")
	}
}
