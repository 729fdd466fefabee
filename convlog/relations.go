package convlog

import (
	"errors"
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
)

// The relationships between the events of a version 4 session log beyond
// the turn's path (docs/FORMAT.md); state is a few words per message id,
// request header, command and open retry chain.

// ErrRelationship: an event that disagrees with the events it relates to.
var ErrRelationship = errors.New("event does not agree with the events it relates to")

// idKey is a message id as two 64-bit hashes, so that the ids of a long log
// cost no strings.
type idKey [2]uint64

var idSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func keyOfID(id []byte) idKey {
	return idKey{maphash.Bytes(idSeeds[0], id), maphash.Bytes(idSeeds[1], id)}
}

func contentHash(b []byte) uint64 { return maphash.Bytes(idSeeds[0], b) | 1 }

// idRec is where a message id is used: the surface event holding it (-1:
// none yet), and the hash of a user message's bytes (0: not kept), to
// admit the same message queued and claimed.
type idRec struct {
	seq   int64
	bytes uint64
}

type chainKey struct {
	turn, step         int64
	provider, policyID string
}

// attempt is a retry chain's id and attempt number.
type attempt struct {
	retryID string
	retry   int64
}

type schedRec struct {
	turn, step int64
	started    bool
}

type ptcRec struct {
	root    string
	hash    uint64 // of root, parent, name and arguments
	settled bool
}

// toolDefs are the tools of a request header: how many definitions each
// name has, and whether one has a description and parameters.
type toolDefs map[string]toolDef

type toolDef struct {
	n        int
	complete bool
}

// compaction is the open compaction transaction.
type compaction struct {
	open     bool
	id, cmd  string
	turn     int64 // -1: between turns
	summary  bool
	startSeq int64
}

// relScalars is the part of the state a writer's mark copies whole.
type relScalars struct {
	comp     compaction
	provider string // the latest request/header's config.provider and model
	model    string
	headers  bool // a request/header was seen
	// hdrSum is the hash of the last request/header's header, hdrTools
	// the key of its tools in tools.
	hdrSum, hdrTools uint64
	// head: the surface's first node is a system prompt appended to an
	// empty surface (the protected head).
	head bool
}

type relState struct {
	relScalars
	ids       map[idKey]idRec
	headerSet map[int64]uint64 // request/header seq → its tools' key in tools
	tools     map[uint64]toolDefs
	chains    map[chainKey]attempt
	retryIDs  map[string]chainKey
	scheduled map[attempt]schedRec
	human     map[int64]bool // seqs of user/message events from the user (source kind user)
	commands  map[string]int64
	cmdSeqs   map[int64]bool
	children  map[string]bool
	ptc       map[string]ptcRec
	j         *journal
}

// journal undoes the map writes of a writer's batch when it is refused.
type journal struct {
	on   bool
	undo []func()
}

// set writes (*mp)[k] = v, making the map on its first write (most logs
// need few of them), journaled when j is on.
func set[K comparable, V any](j *journal, mp *map[K]V, k K, v V) {
	if *mp == nil {
		*mp = map[K]V{}
	}
	m := *mp
	if j.on {
		prev, ok := m[k]
		j.undo = append(j.undo, func() {
			if ok {
				m[k] = prev
			} else {
				delete(m, k)
			}
		})
	}
	m[k] = v
}

// end stops journaling; rollback first undoes what was journaled.
func (j *journal) end(rollback bool) {
	for i := len(j.undo) - 1; rollback && i >= 0; i-- {
		j.undo[i]()
	}
	j.on, j.undo = false, j.undo[:0]
}

func relErr(format string, args ...any) *problem {
	return &problem{msg: fmt.Sprintf(format, args...), kind: ErrRelationship}
}

// messageID checks and records the id of a surface event's message: one
// message an id, admitted again only queued then claimed (the same bytes)
// or rewritten by a replacement of its node.
func (v *Validator) messageID(e *Event, id, msg []byte, user bool) *problem {
	r := &v.rel
	k := keyOfID(unquoted(id))
	rec, seen := r.ids[k]
	var h uint64 // the queued message's hash, kept once it is claimed
	switch {
	case !seen:
	case rec.seq < 0 && user && rec.bytes == contentHash(msg):
		// a queued message, claimed
		h = rec.bytes
	case rec.seq >= 0 && e.SurfaceOp != nil && e.SurfaceOp.Replace && v.inSpan(rec.seq, e.SurfaceOp):
		// the same message, rewritten in place
	case rec.seq >= 0:
		return &problem{kind: ErrMessageIdentity, msg: fmt.Sprintf("message id %s is already the id of the message at seq %d: two messages never share an id",
			termtext.Quote(str(id)), rec.seq)}
	default:
		return &problem{kind: ErrMessageIdentity, msg: fmt.Sprintf("message id %s is the id of a different message queued before (agent/inbox/spliced): a queued message is claimed unchanged",
			termtext.Quote(str(id)))}
	}
	set(r.j, &r.ids, k, idRec{seq: e.Seq, bytes: h})
	return nil
}

// queued checks and records the ids of an inbox splice's messages.
func (v *Validator) queued(inserted []byte) *problem {
	r := &v.rel
	for i, m := range elements(inserted) {
		id := rawjson.Get(m, "id")
		k := keyOfID(unquoted(id))
		h := contentHash(m)
		rec, seen := r.ids[k]
		switch {
		case !seen:
			set(r.j, &r.ids, k, idRec{seq: -1, bytes: h})
		case rec.bytes == h:
			// the same message queued again
		default:
			return (&problem{kind: ErrMessageIdentity, msg: fmt.Sprintf("message id %s is already the id of another message", termtext.Quote(str(id)))}).at(i).in("data.inserted")
		}
	}
	return nil
}

// inSpan reports whether seq is a node of the span op replaces.
func (v *Validator) inSpan(seq int64, op *SurfaceOp) bool {
	nodes, _, ok := v.hist.span(op.StartSeq, op.EndSeq)
	return ok && slices.ContainsFunc(nodes, func(n SurfaceNode) bool { return n.Seq == seq })
}

// surfaceRules checks the protected system head, and that a replacement
// cites every node it shadows (the interpreter checks its span).
func (v *Validator) surfaceRules(e *Event) *problem {
	op := e.SurfaceOp
	if op == nil {
		return nil
	}
	hist := func(format string, args ...any) *problem {
		return &problem{msg: fmt.Sprintf(format, args...), kind: ErrHistory}
	}
	if !op.Replace {
		if e.Type == TypeSystemMessage && len(v.hist.nodes) > 0 && !v.rel.head {
			return hist("a system prompt is the history's first message: this one is appended after other messages (replace the system prompt instead)")
		}
		return nil
	}
	nodes, from, ok := v.hist.span(op.StartSeq, op.EndSeq)
	if !ok {
		return nil // the interpreter names it
	}
	if from == 0 && v.rel.head && (e.Type != TypeSystemMessage || len(nodes) != 1) {
		return hist("replaces the system prompt (seq %d): only a system/message replacing it alone may", nodes[0].Seq)
	}
	for _, n := range nodes {
		if !slices.Contains(e.SourceEventSeqs, n.Seq) {
			return hist("replaces seq %d without citing it in sourceEventSeqs: a replacement cites every message it replaces", n.Seq)
		}
	}
	return nil
}

// relations checks e (its payload valid) against earlier events, and
// records what later ones relate to.
func (v *Validator) relations(e *Event, f *eventFields, bi *blockInfo, mf *messageFields) *problem {
	r := &v.rel
	get := e.dataMember
	switch e.Type {
	case "turn/start", TypeTurnEnd:
		if r.comp.open {
			return relErr("%s crosses the open compaction %s (started at seq %d): a compaction does not span a turn's start or end", e.Type, termtext.Quote(r.comp.id), r.comp.startSeq)
		}
	case "request/header":
		hdr := get("header")
		if sum := contentHash(hdr); sum != r.hdrSum {
			// A header that repeats the one before changes nothing here.
			cfg, _, tools := headerMembers(hdr)
			provider, model := rawjson.Get(cfg, "provider"), rawjson.Get(cfg, "model")
			if r.provider != string(unquoted(provider)) || r.model != string(unquoted(model)) {
				r.provider, r.model = str(provider), str(model)
			}
			r.hdrSum, r.hdrTools = sum, contentHash(tools)
			if _, ok := r.tools[r.hdrTools]; !ok {
				set(r.j, &r.tools, r.hdrTools, toolsOf(tools))
			}
		}
		r.headers = true
		set(r.j, &r.headerSet, e.Seq, r.hdrTools)
	case TypeDeveloperMessage:
		hs := get("headerSeq")
		if (hs != nil) != (len(bi.additions) > 0) {
			if hs == nil {
				return relErr("adds tools without a headerSeq naming the request/header that defines them").in("data.headerSeq")
			}
			return relErr("must be absent: the message adds no tool").in("data.headerSeq")
		}
		if hs == nil {
			return nil
		}
		seq, _ := rawjson.Int(hs)
		key, ok := r.headerSet[seq]
		if !ok {
			return relErr("names seq %d, which is not an earlier request/header", seq).in("data.headerSeq")
		}
		defs := r.tools[key]
		for i, name := range bi.additions {
			d := defs[str(name)]
			if d.n != 1 || !d.complete {
				return relErr("tool %s must be defined exactly once, with a description and parameters, in the request/header at seq %d", termtext.Quote(str(name)), seq).in(fmt.Sprintf("data.message.content (addition %d)", i+1))
			}
		}
	case TypeUserMessage:
		if mf.source != nil && rawjson.StringIs(mf.kind, string(SourceUser)) && (e.SurfaceOp == nil || !e.SurfaceOp.Replace) {
			set(r.j, &r.human, e.Seq, true)
		}
		if rawjson.StringIs(mf.kind, string(SourceCheckpoint)) && e.SurfaceOp != nil && e.SurfaceOp.Replace {
			id, cmd := str(rawjson.Get(mf.source, "compactionId")), str(rawjson.Get(mf.source, "sourceCommandId"))
			if !r.comp.open || r.comp.id != id || r.comp.cmd != cmd {
				return relErr("a checkpoint of compaction %s replaces history outside that compaction's transaction", termtext.Quote(id))
			}
		}
	case "agent/inbox/spliced":
		return v.queued(get("inserted"))
	case "compaction/start":
		if r.comp.open {
			return relErr("compaction/start overlaps the open compaction %s (started at seq %d)", termtext.Quote(r.comp.id), r.comp.startSeq)
		}
		turn := ownerTurn(get("turn"))
		if want := v.openTurn(); turn != want {
			return relErr("compaction/start names turn %s, but %s", turnName(turn), openTurnName(want)).in("data.turn")
		}
		r.comp = compaction{open: true, id: str(get("compactionId")), cmd: str(get("sourceCommandId")), turn: turn, startSeq: e.Seq}
	case "compaction/summary", "compaction/end":
		if !r.comp.open || r.comp.id != str(get("compactionId")) || r.comp.cmd != str(get("sourceCommandId")) {
			return relErr("%s has no matching compaction/start (compactionId %s)", e.Type, termtext.Quote(str(get("compactionId"))))
		}
		if e.Type == "compaction/end" {
			if ownerTurn(get("turn")) != r.comp.turn {
				return relErr("compaction/end changes its owner turn (started in %s)", turnName(r.comp.turn)).in("data.turn")
			}
			if get("error") == nil && !r.comp.summary {
				return relErr("a successful compaction/end requires its compaction/summary")
			}
			r.comp = compaction{}
			return nil
		}
		if v.openTurn() != r.comp.turn {
			return relErr("compaction/summary is outside its compaction's turn")
		}
		if r.comp.summary {
			return relErr("compaction/summary repeats: one summary per compaction")
		}
		if pr := v.shadowSpan(get); pr != nil {
			return pr
		}
		r.comp.summary = true
	case "compaction/prune":
		return v.shadowSpan(get)
	case "llm/retry":
		return v.retry(e, f, get)
	case "llm/retry-started":
		k := attempt{str(get("retryId")), f.asInt(get("retry"))}
		s, ok := r.scheduled[k]
		switch {
		case !ok:
			return relErr("llm/retry-started pairs no earlier llm/retry %s attempt %d", termtext.Quote(k.retryID), k.retry)
		case s.turn != f.turn || s.step != f.step:
			return relErr("llm/retry-started changes the scheduled attempt's turn and step (turn %d step %d)", s.turn, s.step)
		case s.started:
			return relErr("llm/retry-started repeats one scheduled attempt")
		}
		s.started = true
		set(r.j, &r.scheduled, k, s)
	case "session/title":
		seqs := get("messageSeqs")
		user := rawjson.StringIs(rawjson.Get(get("source"), "kind"), "user")
		if rawjson.EmptyArray(seqs) != user {
			return relErr("messageSeqs must be empty exactly for a title the user gave (source kind user)").in("data.messageSeqs")
		}
		return v.citesUser(e, seqs)
	case "session/title-llm-request":
		seqs := get("messageSeqs")
		if rawjson.EmptyArray(seqs) {
			return relErr("must name the messages the title is asked from").in("data.messageSeqs")
		}
		if pr := v.citesUser(e, seqs); pr != nil {
			return pr
		}
		return titleRequestMessages(get("messages"))
	case "command/run":
		id := str(get("commandId"))
		if _, ok := r.commands[id]; ok {
			return relErr("command/run repeats commandId %s", termtext.Quote(id))
		}
		set(r.j, &r.commands, id, e.Seq)
		set(r.j, &r.cmdSeqs, e.Seq, true)
	case "command/done":
		id := str(get("commandId"))
		if _, ok := r.commands[id]; !ok {
			return relErr("command/done has no earlier command/run %s", termtext.Quote(id))
		}
		if s := get("sourceEventSeq"); s != nil {
			n, _ := rawjson.Int(s)
			switch {
			case n >= e.Seq:
				return relErr("must name an earlier event").in("data.sourceEventSeq")
			case str(get("kind")) != "success":
				return relErr("only a successful command names its source event").in("data.sourceEventSeq")
			case r.cmdSeqs[n]:
				return relErr("names a command event (seq %d)", n).in("data.sourceEventSeq")
			}
		}
		set(r.j, &r.cmdSeqs, e.Seq, true)
	case "subagent/catalog":
		id := str(get("childId"))
		if r.children[id] {
			return relErr("duplicate catalog child %s", termtext.Quote(id))
		}
		set(r.j, &r.children, id, true)
	case "session-log-deepseek/delivery-accepted":
		if ver, _ := rawjson.Int(get("sessionFormatVersion")); ver != CurrentVersion {
			return nil
		}
		if through, _ := rawjson.Int(get("throughSeq")); through >= e.Seq {
			return relErr("must name an earlier event").in("data.throughSeq")
		}
		if id := str(get("sessionId")); id != v.id {
			return relErr("current-generation delivery marker names the wrong session %s (this log is %s)", termtext.Quote(id), termtext.Quote(v.id)).in("data.sessionId")
		}
	case "tool/ptc-dispatch-start", "tool/ptc-dispatch":
		return v.ptcDispatch(e, get)
	}
	return nil
}

// ownerTurn is a compaction's turn member: the turn, or -1 for null.
func ownerTurn(raw []byte) int64 {
	if n, ok := rawjson.Int(raw); ok {
		return n
	}
	return -1
}

func turnName(t int64) string {
	if t < 0 {
		return "null (between turns)"
	}
	return fmt.Sprintf("%d", t)
}

func openTurnName(t int64) string {
	if t < 0 {
		return "no turn is open"
	}
	return fmt.Sprintf("turn %d is open", t)
}

// openTurn is the open turn, -1 when none is.
func (v *Validator) openTurn() int64 {
	if v.path.open {
		return v.path.turn
	}
	return -1
}

func (f *eventFields) asInt(raw []byte) int64 {
	n, _ := rawjson.Int(raw)
	return n
}

// shadowSpan checks a compaction's span: shadowedRange names two nodes of
// the current surface in order, shadowedSeqs is exactly the nodes between
// them, and the protected system head is not among them.
func (v *Validator) shadowSpan(get func(string) []byte) *problem {
	rg := get("shadowedRange")
	start, _ := rawjson.Int(rawjson.Get(rg, "start"))
	end, _ := rawjson.Int(rawjson.Get(rg, "end"))
	nodes, from, ok := v.hist.span(start, end)
	if !ok {
		return relErr("shadowedRange %d..%d is not a span of the current history", start, end).in("data.shadowedRange")
	}
	if from == 0 && v.rel.head {
		return relErr("a compaction cannot shadow the system prompt (seq %d)", nodes[0].Seq).in("data.shadowedRange")
	}
	k := 0
	exact := true
	for _, s := range elements(get("shadowedSeqs")) {
		n, _ := rawjson.Int(s)
		if k >= len(nodes) || nodes[k].Seq != n {
			exact = false
			break
		}
		k++
	}
	if !exact || k != len(nodes) {
		return relErr("shadowedSeqs do not name exactly the current history from seq %d to seq %d", start, end).in("data.shadowedSeqs")
	}
	return nil
}

// retry checks llm/retry: the open step, the latest request/header's
// provider, and per chain (turn, step, provider, policyKey) retries 1, 2,
// ... under one retryId of its own.
func (v *Validator) retry(e *Event, f *eventFields, get func(string) []byte) *problem {
	r, p := &v.rel, &v.path
	if !p.open || f.turn != p.turn || f.step != p.step || f.step < 1 {
		return relErr("llm/retry does not match the current turn and step (turn %d step %d; %s)", f.turn, f.step, v.pathName())
	}
	provider := str(get("provider"))
	if !r.headers || provider != r.provider {
		return relErr("llm/retry provider %s does not match the open request/header's", termtext.Quote(provider)).in("data.provider")
	}
	k := chainKey{f.turn, f.step, provider, str(get("policyKey"))}
	id, n := str(get("retryId")), f.asInt(get("retry"))
	c, ok := r.chains[k]
	if !ok {
		c = attempt{retryID: id}
	}
	if n != c.retry+1 {
		return relErr("llm/retry skips its policy attempt sequence (retry %d after %d)", n, c.retry).in("data.retry")
	}
	if c.retryID != id {
		return relErr("llm/retry must keep one retryId per policy chain (%s, then %s)", termtext.Quote(c.retryID), termtext.Quote(id)).in("data.retryId")
	}
	if other, used := r.retryIDs[id]; used && other != k {
		return relErr("retryId %s belongs to another policy chain", termtext.Quote(id)).in("data.retryId")
	}
	c.retry = n
	set(r.j, &r.chains, k, c)
	set(r.j, &r.retryIDs, id, k)
	set(r.j, &r.scheduled, attempt{id, n}, schedRec{turn: f.turn, step: f.step})
	return nil
}

func (v *Validator) pathName() string {
	p := &v.path
	switch {
	case !p.open:
		return "no turn is open"
	case p.stepOpen:
		return fmt.Sprintf("step %d of turn %d is open", p.step, p.turn)
	}
	return fmt.Sprintf("turn %d has no open step", p.turn)
}

// citesUser checks that seqs names distinct earlier messages of the user.
func (v *Validator) citesUser(e *Event, seqs []byte) *problem {
	seen := map[int64]bool{}
	for _, s := range elements(seqs) {
		n, _ := rawjson.Int(s)
		if n >= e.Seq || seen[n] || !v.rel.human[n] {
			return relErr("messageSeqs must cite distinct earlier user/message events from the user (seq %d is not one)", n).in("data.messageSeqs")
		}
		seen[n] = true
	}
	return nil
}

// titleRequestMessages: one user message, of source kind
// dsh-session-title-llm, holding one text block.
func titleRequestMessages(msgs []byte) *problem {
	n := 0
	for i, m := range elements(msgs) {
		src := rawjson.Get(m, "source")
		content := rawjson.Get(m, "content")
		blocks := 0
		text := false
		for _, b := range elements(content) {
			text = rawjson.StringIs(rawjson.Get(b, "type"), "text")
			blocks++
		}
		if !rawjson.StringIs(rawjson.Get(src, "kind"), string(SourceTitle)) || blocks != 1 || !text {
			return relErr("the title request's message is one user message of source kind %s holding one text block", termtext.Quote(string(SourceTitle))).at(i).in("data.messages")
		}
		n++
	}
	if n != 1 {
		return relErr("the title request holds exactly one message, not %d", n).in("data.messages")
	}
	return nil
}

// ptcDispatch checks a PTC sub-dispatch: a start names a new subCallId; a
// dispatch settles exactly one start, repeating its ids, name and arguments.
func (v *Validator) ptcDispatch(e *Event, get func(string) []byte) *problem {
	r := &v.rel
	if !v.path.open {
		return relErr("%s is outside an open turn", e.Type)
	}
	root, parent, sub := str(get("rootCallId")), str(get("parentCallId")), str(get("subCallId"))
	h := maphash.Hash{}
	h.SetSeed(idSeeds[1])
	for _, k := range []string{"rootCallId", "parentCallId", "name", "arguments"} {
		h.Write(get(k))
		h.WriteByte(0)
	}
	sum := h.Sum64()
	rec, ok := r.ptc[sub]
	if e.Type == "tool/ptc-dispatch-start" {
		if ok {
			return relErr("PTC dispatch repeats subCallId %s", termtext.Quote(sub))
		}
		if parent != root {
			if pr, ok := r.ptc[parent]; !ok || pr.root != root {
				return relErr("PTC parentCallId %s does not belong to rootCallId %s", termtext.Quote(parent), termtext.Quote(root))
			}
		}
		set(r.j, &r.ptc, sub, ptcRec{root: root, hash: sum})
		return nil
	}
	switch {
	case !ok || rec.settled:
		return relErr("PTC dispatch %s has no unique unsettled start", termtext.Quote(sub))
	case rec.hash != sum:
		return relErr("PTC dispatch %s does not match its start", termtext.Quote(sub))
	}
	rec.settled = true
	set(r.j, &r.ptc, sub, rec)
	return nil
}

// toolsOf reads the tool definitions of a request header.
func toolsOf(tools []byte) toolDefs {
	defs := toolDefs{}
	for _, t := range elements(tools) {
		name := str(rawjson.Get(t, "name"))
		d := defs[name]
		d.n++
		desc, params := rawjson.Get(t, "description"), rawjson.Get(t, "parameters")
		d.complete = isString(desc) && len(params) > 0 && params[0] == '{'
		defs[name] = d
	}
	return defs
}
