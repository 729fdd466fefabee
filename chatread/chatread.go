// Package chatread is the read-only chat-reading API a deployment may offer
// its agents (the runtime serves its chat-reading tools with it): the chats
// related to the asking chat, a chat's messages (what clients show) and
// history (what its model reads), and a search of them.
//
// It is off unless the runtime configuration's [chat_reading] enabled = true
// (LoadConfig); disabled, every operation answers ErrDisabled. Every answer is
// authorised from the asking chat by one policy (Readable): a chat reads
// itself, its subagents down the session tree, and, as a conversation's root
// session, its fork ancestors as they were up to the fork; nothing else, and a
// chat being deleted by nobody. A chat it may not read is answered exactly as
// one that does not exist (ErrNotReadable), so asking reveals nothing.
//
// Paged answers end with an opaque cursor sealed with the deployment's key
// (cursor.go): it shows no offset, seq or path, and one changed, forged or
// given back for another request is refused (ErrBadCursor), one older than
// Config.CursorTTL expired (ErrCursorExpired). Items carry message ids, never
// seqs or file names.
//
// The transcript (ReadTranscript, ReadTranscriptLog, ReadTranscriptHeld) is
// every message of a session's record in order, those a compaction summarised
// included; a fork made after a compaction reads its older part from its
// source. Logs of every version are read, older ones upgraded in memory.
// Reading changes nothing and takes no lock.
package chatread

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/convlog/upgrade"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/store"
)

// Errors of the API.
var (
	ErrDisabled    = errors.New("chat reading is not enabled in this deployment's configuration ([chat_reading] enabled = true)")
	ErrNotReadable = errors.New("no such chat, or the asking chat may not read it")
	// ErrCursorExpired: the cursor is older than Config.CursorTTL.
	ErrCursorExpired = errors.New("the cursor has expired: ask for the first page again")
)

// Cursor lifetimes; one dated up to cursorSkew ahead (a clock set back) is taken.
const (
	DefaultCursorTTL = 24 * time.Hour
	MaxCursorTTL     = 30 * 24 * time.Hour
	cursorSkew       = time.Minute
)

// Config is the deployment's [chat_reading] configuration.
type Config struct {
	Enabled   bool             // the zero Config is off
	Key       []byte           // seals the cursors: at least MinKeyBytes of secret
	CursorTTL time.Duration    // how long a cursor stays good (0: DefaultCursorTTL)
	Now       func() time.Time // nil: time.Now
}

// LoadConfig reads the [chat_reading] table of the runtime configuration at
// path:
//
//	[chat_reading]
//	enabled = true
//	key_file = "chat-reading.key"   # relative to the configuration's directory
//	cursor_ttl = "1h"               # optional; default 24h, at most 720h
//
// Without the table, or with enabled = false, it is a disabled Config;
// enabled, key_file must name a regular file of at least MinKeyBytes bytes
// (NewKeyFile writes one).
func LoadConfig(path string) (Config, error) {
	f, err := durable.OpenRegular(path, os.O_RDONLY)
	if err != nil {
		return Config{}, err
	}
	var raw struct {
		ChatReading *struct {
			Enabled   *bool  `toml:"enabled"`
			KeyFile   string `toml:"key_file"`
			CursorTTL string `toml:"cursor_ttl"`
		} `toml:"chat_reading"`
	}
	err = store.DecodeRuntimeConfig(path, f, &raw)
	f.Close()
	if err != nil {
		return Config{}, err
	}
	c := raw.ChatReading
	if c == nil || c.Enabled == nil || !*c.Enabled {
		return Config{}, nil
	}
	if c.KeyFile == "" {
		return Config{}, fmt.Errorf("%s: [chat_reading] is enabled but names no key_file (the key that seals its cursors)", path)
	}
	var ttl time.Duration
	if c.CursorTTL != "" {
		d, err := time.ParseDuration(c.CursorTTL)
		if err != nil || d <= 0 || d > MaxCursorTTL {
			return Config{}, fmt.Errorf("%s: [chat_reading] cursor_ttl %q: expected a duration from 1s to %s, such as \"1h\" or \"30m\"", path, c.CursorTTL, MaxCursorTTL)
		}
		ttl = d
	}
	kp := c.KeyFile
	if !filepath.IsAbs(kp) {
		kp = filepath.Join(filepath.Dir(path), kp)
	}
	kf, err := durable.OpenRegular(kp, os.O_RDONLY)
	if err != nil {
		return Config{}, fmt.Errorf("%s: [chat_reading] key_file: %w", path, err)
	}
	key, err := io.ReadAll(io.LimitReader(kf, 4096))
	kf.Close()
	if err != nil {
		return Config{}, err
	}
	if len(key) < MinKeyBytes {
		return Config{}, fmt.Errorf("%s: [chat_reading] key_file %s holds %d bytes; it needs at least %d", path, kp, len(key), MinKeyBytes)
	}
	return Config{Enabled: true, Key: key, CursorTTL: ttl}, nil
}

// NewKeyFile publishes a random key of MinKeyBytes at path, never over a file.
func NewKeyFile(path string) error {
	key := make([]byte, MinKeyBytes)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	return durable.WriteFile(path, key)
}

// Chat names one chat: an agent session of a conversation.
type Chat struct {
	Conversation string `json:"conversation"`
	Session      string `json:"session"`
}

// Relation is how a readable chat relates to the asking one.
type Relation string

// The relations the policy lets a chat read.
const (
	RelationSelf         Relation = "self"
	RelationSubagent     Relation = "subagent"
	RelationForkAncestor Relation = "fork-ancestor"
)

// RelatedChat is a chat the asker may read.
type RelatedChat struct {
	Chat
	Relation Relation `json:"relation"`
	Agent    string   `json:"agent"`
	Model    string   `json:"model"`
	Title    string   `json:"title"`             // its conversation's
	Partial  bool     `json:"partial,omitempty"` // read up to the fork
}

// Message is one item of a page (no seqs, no paths).
type Message struct {
	Chat
	ID     string `json:"id"`
	Role   string `json:"role"`
	Source string `json:"source"`
	Time   int64  `json:"time"` // Unix ms
	Turn   int64  `json:"turn,omitempty"`
	Text   string `json:"text"`
	// Summary, Empty, Interrupted, Inherited: as TranscriptItem's.
	Summary     bool `json:"summary,omitempty"`
	Empty       bool `json:"empty,omitempty"`
	Interrupted bool `json:"interrupted,omitempty"`
	Inherited   bool `json:"inherited,omitempty"`
}

// Page is one page of an answer; Next ("": none) continues it.
type Page struct {
	Items []Message `json:"items"`
	Next  string    `json:"next,omitempty"`
}

// Request asks for one page: Cursor "" for the first; Limit up to MaxLimit.
type Request struct {
	Cursor string
	Limit  int
}

// Page sizes.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// Reader answers the API's operations from a store.
type Reader struct {
	s   *store.Store
	cfg Config
	sl  *sealer
}

// New returns the API over the store s; disabled, it answers ErrDisabled.
func New(s *store.Store, cfg Config) (*Reader, error) {
	r := &Reader{s: s, cfg: cfg}
	if !cfg.Enabled {
		return r, nil
	}
	if cfg.CursorTTL < 0 || cfg.CursorTTL > MaxCursorTTL {
		return nil, fmt.Errorf("the cursor lifetime %s is outside 0 to %s", cfg.CursorTTL, MaxCursorTTL)
	}
	if cfg.CursorTTL == 0 {
		r.cfg.CursorTTL = DefaultCursorTTL
	}
	if cfg.Now == nil {
		r.cfg.Now = time.Now
	}
	sl, err := newSealer(cfg.Key)
	if err != nil {
		return nil, err
	}
	r.sl = sl
	return r, nil
}

// grant is what the policy lets the asker read of one chat.
type grant struct {
	RelatedChat
	through int64     // the last seq readable (-1: all)
	log     store.Log // once begin found it
}

// Readable lists the chats asker may read (see the package doc).
func (r *Reader) Readable(ctx context.Context, asker Chat) ([]RelatedChat, error) {
	if !r.cfg.Enabled {
		return nil, ErrDisabled
	}
	gs, err := r.grants(asker)
	if err != nil {
		return nil, err
	}
	out := make([]RelatedChat, len(gs))
	for i, g := range gs {
		out[i] = g.RelatedChat
	}
	return out, nil
}

func (r *Reader) grants(asker Chat) ([]grant, error) {
	info, err := r.s.ReadConversation(asker.Conversation)
	if err != nil || info.Deleting || info.Session(asker.Session) == nil {
		return nil, ErrNotReadable
	}
	self := info.Session(asker.Session)
	gs := []grant{{RelatedChat: RelatedChat{Chat: asker, Relation: RelationSelf, Agent: self.Agent, Model: self.Model, Title: info.Title}, through: -1}}
	// Subagents, breadth first down the session tree.
	parents := map[string]bool{asker.Session: true}
	for changed := true; changed; {
		changed = false
		for _, si := range info.Sessions {
			if si.ParentSession != "" && parents[si.ParentSession] && !parents[si.ID] {
				parents[si.ID], changed = true, true
				gs = append(gs, grant{RelatedChat: RelatedChat{Chat: Chat{asker.Conversation, si.ID}, Relation: RelationSubagent,
					Agent: si.Agent, Model: si.Model, Title: info.Title}, through: -1})
			}
		}
	}
	// Fork ancestors, of a root session only, each up to its fork.
	seen := map[string]bool{asker.Conversation: true}
	cur, sess := info, self
	for depth := 0; depth < 64 && sess.ParentSession == "" && cur.Fork != nil; depth++ {
		f := cur.Fork
		if f.SessionID != sess.ID || seen[f.SourceConversation] {
			break
		}
		seen[f.SourceConversation] = true
		src, err := r.s.ReadConversation(f.SourceConversation)
		if err != nil || src.Deleting {
			break
		}
		ss := src.Session(f.SourceSession)
		if ss == nil {
			break
		}
		gs = append(gs, grant{RelatedChat: RelatedChat{Chat: Chat{f.SourceConversation, f.SourceSession}, Relation: RelationForkAncestor,
			Agent: ss.Agent, Model: ss.Model, Title: src.Title, Partial: true}, through: f.ThroughSeq})
		cur, sess = src, ss
	}
	return gs, nil
}

// begin authorises the request at: the grants searched, or at.Target's with its log.
func (r *Reader) begin(at position, req Request) ([]grant, *pager, error) {
	if !r.cfg.Enabled {
		return nil, nil, ErrDisabled
	}
	if at.Op == "search" && len(strings.Fields(at.Query)) == 0 {
		return nil, nil, fmt.Errorf("an empty query")
	}
	gs, err := r.grants(at.Asker)
	if err != nil {
		return nil, nil, err
	}
	if at.Op != "search" {
		i := slices.IndexFunc(gs, func(g grant) bool { return g.Chat == at.Target })
		if i < 0 {
			return nil, nil, ErrNotReadable
		}
		if gs[i].log, err = r.s.FindLog(at.Target.Conversation, at.Target.Session); err != nil {
			return nil, nil, ErrNotReadable
		}
		gs, at.Born = gs[i:i+1], headerTime(gs[i].log)
	}
	p, err := r.start(req, at)
	return gs, p, err
}

func headerTime(l store.Log) int64 {
	lr, err := l.Open(convlog.ReaderOptions{})
	if err != nil {
		return 0
	}
	defer lr.Close()
	return lr.Header().CreatedAt
}

// start checks req's cursor against the request at and starts its page.
func (r *Reader) start(req Request, at position) (*pager, error) {
	limit := req.Limit
	switch {
	case limit <= 0:
		limit = DefaultLimit
	case limit > MaxLimit:
		limit = MaxLimit
	}
	pg := &pager{at: at, limit: int64(limit)}
	if req.Cursor == "" {
		return pg, nil
	}
	p, err := r.sl.open(req.Cursor)
	if err != nil {
		return nil, err
	}
	if p.Op != at.Op || p.Asker != at.Asker || p.Target != at.Target || p.Query != at.Query || p.Born != at.Born {
		return nil, ErrBadCursor
	}
	// A cursor sealed before cursors were dated has no date: expired.
	age := r.cfg.Now().Sub(time.Unix(p.Issued, 0))
	if p.Issued <= 0 || age > r.cfg.CursorTTL || age < -cursorSkew {
		return nil, ErrCursorExpired
	}
	pg.skip = p.Next
	return pg, nil
}

// pager collects one page from a stream of items.
type pager struct {
	at          position
	skip, limit int64
	n           int64
	items       []Message
	more        bool
}

var errPageFull = errors.New("page full")

func (p *pager) add(m Message) error {
	if p.n < p.skip {
		p.n++
		return nil
	}
	if int64(len(p.items)) == p.limit {
		p.more = true
		return errPageFull
	}
	p.items = append(p.items, m)
	p.n++
	return nil
}

func (r *Reader) finish(p *pager) (*Page, error) {
	page := &Page{Items: p.items}
	if page.Items == nil {
		page.Items = []Message{}
	}
	if p.more {
		at := p.at
		at.Next, at.Issued = p.n, r.cfg.Now().Unix()
		c, err := r.sl.seal(at)
		if err != nil {
			return nil, err
		}
		page.Next = c
	}
	return page, nil
}

// transcriptOf streams the messages of g (what clients show) to its cut.
func (r *Reader) transcriptOf(ctx context.Context, g grant, fn func(Message) error) error {
	return ReadTranscript(ctx, r.s, g.Conversation, g.Session, func(it *TranscriptItem) error {
		if it.ID == "" {
			return nil // a turn's end: not a message
		}
		if g.through >= 0 && !it.Inherited && it.Seq > g.through {
			return io.EOF
		}
		var src struct {
			Kind string `json:"kind"`
		}
		json.Unmarshal(it.Source, &src)
		return fn(Message{Chat: Chat{it.Conversation, it.Session}, ID: it.ID, Role: it.Role, Source: src.Kind, Time: it.Time, Turn: it.Turn,
			Text: convlog.ReadableText(it.Message), Summary: it.Summary, Empty: it.Empty, Interrupted: it.Interrupted, Inherited: it.Inherited})
	})
}

// Messages is one page of what clients show of target, inherited part included.
func (r *Reader) Messages(ctx context.Context, asker, target Chat, req Request) (*Page, error) {
	gs, p, err := r.begin(position{Op: "messages", Asker: asker, Target: target}, req)
	if err != nil {
		return nil, err
	}
	err = r.transcriptOf(ctx, gs[0], p.add)
	if err != nil && err != errPageFull && err != io.EOF {
		return nil, err
	}
	return r.finish(p)
}

// History is one page of what target's model reads, as it is now.
func (r *Reader) History(ctx context.Context, asker, target Chat, req Request) (*Page, error) {
	gs, p, err := r.begin(position{Op: "history", Asker: asker, Target: target}, req)
	if err != nil {
		return nil, err
	}
	g := gs[0]
	lr, err := upgrade.Open(g.log.Path, upgrade.Options{WantType: convlog.SessionLog, WantID: g.log.ID})
	if err != nil {
		return nil, err
	}
	defer lr.Close()
	var h convlog.History
	times := map[int64]int64{}
	for e, err := range events(ctx, lr) {
		if err != nil {
			return nil, err
		}
		if g.through >= 0 && e.Seq > g.through {
			break
		}
		if err := h.Apply(e); err != nil {
			return nil, err
		}
		if e.SurfaceOp != nil {
			times[e.Seq] = e.Time
		}
	}
	for _, m := range h.Messages() {
		msg := Message{Chat: target, ID: m.Message.ID(), Role: m.Message.Role(), Source: string(m.Message.Source().Kind),
			Time: times[m.Seq], Text: convlog.ReadableText(m.Message.JSON()), Summary: m.Message.Source().Kind == convlog.SourceCheckpoint}
		if p.add(msg) == errPageFull {
			break
		}
	}
	return r.finish(p)
}

// Search is one page of the readable messages holding every word of query
// (case-folded), in the order of Readable.
func (r *Reader) Search(ctx context.Context, asker Chat, query string, req Request) (*Page, error) {
	gs, p, err := r.begin(position{Op: "search", Asker: asker, Target: asker, Query: query}, req)
	if err != nil {
		return nil, err
	}
	words := strings.Fields(strings.ToLower(query))
	for _, g := range gs {
		err := r.transcriptOf(ctx, g, func(m Message) error {
			if m.Inherited {
				// A fork's inherited part is its ancestor's, searched
				// there (up to the fork).
				return nil
			}
			text := strings.ToLower(m.Text)
			for _, w := range words {
				if !strings.Contains(text, w) {
					return nil
				}
			}
			return p.add(m)
		})
		if err == errPageFull {
			break
		}
		if err != nil && err != io.EOF && !errors.Is(err, ErrMissingSource) {
			return nil, err
		}
	}
	return r.finish(p)
}
