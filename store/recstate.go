package store

import (
	"bytes"
	"encoding/json"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/rawjson"
)

// recState is what a Session knows of its log (turn, inbox, messages, history,
// last request header, retry chains); every event written or read on opening
// passes through observe, so the typed calls check against the log as it is.
type recState struct {
	next int64 // the seq of the next event

	turnOpen, stepOpen bool
	turn, lastTurn     int64
	step, lastStep     int64
	// calls are the open turn's tool calls, by id, in callOrder.
	calls     map[string]*toolCallState
	callOrder []string

	// inbox: messages admitted (agent/inbox/spliced) and not yet recorded
	// as a user/message; they are taken, in order, by the next request.
	inbox []convlog.StoredMessage
	// ids are every message id the log holds; surfaceSeq the seq of the
	// surface event that first recorded each.
	ids        map[string]bool
	surfaceSeq map[string]int64
	hist       convlog.History
	// interrupted are the seqs of answers and tool results an interrupt
	// or a crash cut off.
	interrupted map[int64]bool
	// head is the seq of the system message at the head of the surface (-1:
	// none); system its content.
	head   int64
	system []byte

	// header is the last request/header's header (as written); headerRun
	// is set once this session wrote one; series after a surface
	// replacement since the last header.
	header            []byte
	provider, model   string
	headerRun, series bool
	retryChains       map[retryKey]*retryChain
	pendingRetry      *retryChain
	compactions       map[string]bool
}

type toolCallState struct {
	name, args string
	step       int64
	startSeq   int64 // the tool/call, -1 before it
	resolved   bool
}

type retryKey struct {
	turn, step       int64
	provider, policy string
}

type retryChain struct {
	id   string
	n    int64
	turn int64
	step int64
	// started: llm/retry-started was recorded for retry n.
	started bool
}

func newRecState() recState {
	return recState{calls: map[string]*toolCallState{}, ids: map[string]bool{}, surfaceSeq: map[string]int64{},
		interrupted: map[int64]bool{}, head: -1, retryChains: map[retryKey]*retryChain{}, compactions: map[string]bool{}}
}

// scanLog takes every event of the log at path into a new state.
func scanLog(path string) (recState, error) {
	st := newRecState()
	r, err := openLog(path, convlog.ReaderOptions{})
	if err != nil {
		return st, err
	}
	defer r.Close()
	for e, err := range r.Events() {
		if err != nil {
			return st, err
		}
		c := e.Clone()
		c.Known = true
		st.observe(&c)
	}
	return st, nil
}

// observe takes one event, already written or queued with its seq.
func (r *recState) observe(e *convlog.Event) {
	r.next = e.Seq + 1
	info := convlog.DefaultRegistry.Lookup(e.Type)
	if info != nil && info.Surface {
		r.observeSurface(e)
	}
	switch e.Type {
	case convlog.TypeTurnStart:
		var d convlog.TurnStartData
		json.Unmarshal(e.Data, &d)
		r.turnOpen, r.turn, r.lastTurn = true, d.Turn, d.Turn
		r.stepOpen, r.step, r.lastStep = false, 0, 0
		r.calls, r.callOrder, r.pendingRetry = map[string]*toolCallState{}, nil, nil
		clear(r.retryChains)
	case convlog.TypeTurnEnd:
		r.turnOpen, r.stepOpen = false, false
		r.calls, r.callOrder, r.pendingRetry = map[string]*toolCallState{}, nil, nil
	case convlog.TypeStepStart:
		var d convlog.TurnStep
		json.Unmarshal(e.Data, &d)
		r.stepOpen, r.step, r.lastStep = true, d.Step, d.Step
	case convlog.TypeStepEnd:
		r.stepOpen = false
	case convlog.TypeToolCall:
		var d convlog.ToolCallData
		json.Unmarshal(e.Data, &d)
		c := r.calls[d.CallID]
		if c == nil {
			c = &toolCallState{name: d.Name, args: d.Arguments, step: r.step}
			r.calls[d.CallID] = c
			r.callOrder = append(r.callOrder, d.CallID)
		}
		c.startSeq = e.Seq
	case convlog.TypeRequestHeader:
		var d struct {
			Header json.RawMessage `json:"header"`
		}
		json.Unmarshal(e.Data, &d)
		r.header = bytes.Clone(d.Header)
		var h convlog.EpochHeader
		json.Unmarshal(d.Header, &h)
		r.provider, r.model, r.series = h.Config.Provider, h.Config.Model, false
	case convlog.TypeInboxSpliced:
		var d convlog.InboxSplicedData
		json.Unmarshal(e.Data, &d)
		for _, raw := range d.Inserted {
			if m, err := convlog.ParseStoredMessage(raw); err == nil {
				if !r.ids[m.ID()] {
					r.ids[m.ID()] = true
					r.inbox = append(r.inbox, m)
				}
			}
		}
	case convlog.TypeRetry:
		var d convlog.RetryData
		json.Unmarshal(e.Data, &d)
		k := retryKey{d.Turn, d.Step, d.Provider, d.PolicyKey}
		c := r.retryChains[k]
		if c == nil || c.id != d.RetryID {
			c = &retryChain{id: d.RetryID, turn: d.Turn, step: d.Step}
			r.retryChains[k] = c
		}
		c.n, c.started = d.Retry, false
		r.pendingRetry = c
	case convlog.TypeRetryStarted:
		if r.pendingRetry != nil {
			r.pendingRetry.started = true
		}
		r.pendingRetry = nil
	case convlog.TypeCompactionStart:
		var d convlog.CompactionStartData
		json.Unmarshal(e.Data, &d)
		r.compactions[d.CompactionID] = true
	case convlog.TypeEndSeed:
		// Turn numbers start afresh after inherited history.
		r.turnOpen, r.stepOpen, r.turn, r.lastTurn, r.step, r.lastStep = false, false, 0, 0, 0, 0
		r.calls, r.callOrder = map[string]*toolCallState{}, nil
	}
}

func (r *recState) observeSurface(e *convlog.Event) {
	before := r.hist.Len()
	if err := r.hist.Apply(convlog.DefaultRegistry, e); err != nil {
		return // a log the writer accepted applies; one that does not is left as it reads
	}
	if e.SurfaceOp != nil && e.SurfaceOp.Replace {
		r.series = true
	}
	raw := e.Data
	if e.Type != convlog.TypeUserMessage {
		raw = rawjson.Get(e.Data, "message")
	}
	m, err := convlog.ParseStoredMessage(raw)
	if err != nil {
		return
	}
	id := m.ID()
	if _, ok := r.surfaceSeq[id]; !ok {
		r.surfaceSeq[id] = e.Seq
	}
	r.ids[id] = true
	switch e.Type {
	case convlog.TypeSystemMessage:
		if before == 0 || (e.SurfaceOp != nil && e.SurfaceOp.Replace && e.SurfaceOp.StartSeq == r.head) {
			r.head = e.Seq
			r.system = bytes.Clone(rawjson.Get(m.JSON(), "content"))
		}
	case convlog.TypeUserMessage:
		for i, w := range r.inbox {
			if w.ID() == id {
				r.inbox = append(r.inbox[:i:i], r.inbox[i+1:]...)
				break
			}
		}
	case convlog.TypeAssistantMessage:
		if string(rawjson.Get(e.Data, "interrupted")) == "true" {
			r.interrupted[e.Seq] = true
		}
		r.pendingRetry = nil
		var content []convlog.Block
		json.Unmarshal(rawjson.Get(m.JSON(), "content"), &blockList{&content})
		for _, b := range content {
			if b.Type == convlog.BlockToolCall && b.ID != "" && r.calls[b.ID] == nil {
				r.calls[b.ID] = &toolCallState{name: b.Name, args: b.Arguments, step: r.step, startSeq: -1}
				r.callOrder = append(r.callOrder, b.ID)
			}
		}
	case convlog.TypeToolResult:
		if c := r.calls[str(rawjson.Get(m.JSON(), "toolCallId"))]; c != nil {
			c.resolved = true
		}
		switch str(rawjson.Get(rawjson.Get(e.Data, "error"), "code")) {
		case convlog.CodeToolNotStarted, convlog.CodeToolInterrupted:
			r.interrupted[e.Seq] = true
		}
	}
}

// unresolved lists the open turn's tool calls without a result.
func (r *recState) unresolved() []string {
	var out []string
	for _, id := range r.callOrder {
		if c := r.calls[id]; c != nil && !c.resolved {
			out = append(out, id)
		}
	}
	return out
}

// blockList decodes the tool-call blocks of a content array (the rest are
// kept by type only).
type blockList struct{ out *[]convlog.Block }

func (l *blockList) UnmarshalJSON(b []byte) error {
	var raw []struct {
		Type      string `json:"type"`
		ID        string `json:"id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	for _, x := range raw {
		*l.out = append(*l.out, convlog.Block{Type: x.Type, ID: x.ID, Name: x.Name, Arguments: x.Arguments})
	}
	return nil
}

// str is a JSON string's value ("" for anything else).
func str(raw []byte) string {
	s, _ := rawjson.String(raw)
	return s
}
