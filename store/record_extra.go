package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
)

// Developer is a developer message of the open step: tools the runtime
// adds to or removes from what the model may call (Added must be tools of
// the step's last Request), with Text to go with them. Source ("":
// tool-registry) says what made it.
type Developer struct {
	ID             string
	Source         convlog.SourceKind
	Text           string
	Added, Removed []string
}

// developerBlock is a block of a developer message.
type developerBlock struct {
	Type     string `json:"type"`
	Text     string `json:"text,omitempty"`
	ToolName string `json:"toolName,omitempty"`
}

// Developer records developer message d in the open step, before the next
// Request.
func (se *Session) Developer(d Developer) error {
	return se.locked("Developer", inStep, func() error {
		r := &se.rec
		if d.Text == "" && len(d.Added)+len(d.Removed) == 0 {
			return se.refuse("Developer", ErrInvalid, "a developer message needs text or a tool added or removed")
		}
		if d.Source == "" {
			d.Source = convlog.SourceToolRegistry
		}
		switch d.Source {
		case convlog.SourcePlugin, convlog.SourceUser, convlog.SourceModel, convlog.SourceTool, convlog.SourceSystemPrompt, convlog.SourceCheckpoint:
			return se.refuse("Developer", ErrInvalid, "source %s is not a developer message's", termtext.Quote(string(d.Source)))
		}
		if err := se.checkNewID("Developer", d.ID); err != nil {
			return err
		}
		var blocks []developerBlock
		if d.Text != "" {
			blocks = append(blocks, developerBlock{Type: convlog.BlockText, Text: d.Text})
		}
		var data convlog.MessageData
		if len(d.Added) > 0 {
			var h convlog.EpochHeader
			if r.header == nil || json.Unmarshal(r.header, &h) != nil {
				return se.refuse("Developer", ErrOrder, "tools are added after the Request that defines them")
			}
			for _, name := range d.Added {
				n, whole := 0, false
				for _, t := range h.Tools {
					if t.Name == name {
						n, whole = n+1, t.Description != "" && t.Parameters != nil
					}
				}
				if n != 1 || !whole {
					return se.refuse("Developer", ErrInvalid, "tool %s is not defined exactly once, with a description and parameters, in the last request", termtext.Quote(name))
				}
				blocks = append(blocks, developerBlock{Type: "tool-addition", ToolName: name})
			}
			seq := r.headerSeq
			data.HeaderSeq = &seq
		}
		for _, name := range d.Removed {
			if name == "" {
				return se.refuse("Developer", ErrInvalid, "a removed tool needs its name")
			}
			blocks = append(blocks, developerBlock{Type: "tool-removal", ToolName: name})
		}
		content, _ := json.Marshal(blocks)
		msg, err := convlog.NewStoredMessage(d.ID, "developer", convlog.Source{Kind: d.Source}, content)
		if err != nil {
			return se.refuse("Developer", ErrInvalid, "%v", err)
		}
		data.Turn, data.Step, data.Message = r.turn, r.step, msg.JSON()
		ev := typed(convlog.TypeDeveloperMessage, data)
		ev.SurfaceOp = &convlog.SurfaceOp{}
		return se.record(ev)
	})
}

// SessionTitle is a title of the session: one the user gave (From empty),
// or one made from the user's own messages From (ids) by title provider
// Provider with its model Route (nil: none said), or by the runtime's
// fallback (Provider "").
type SessionTitle struct {
	Title    string
	From     []string
	Provider string
	Route    *TitleRoute
}

// TitleRoute is the model a title provider called.
type TitleRoute struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// titleSource is session/title's source, and command/run's.
type titleSource struct {
	Kind     string      `json:"kind"`
	Provider string      `json:"provider,omitempty"`
	Model    *TitleRoute `json:"model,omitempty"`
}

// userSeqs are the seqs of the user's own messages ids, for call.
func (se *Session) userSeqs(call string, ids []string) ([]int64, error) {
	seqs := make([]int64, 0, len(ids))
	for i, id := range ids {
		seq, ok := se.rec.surfaceSeq[id]
		if !ok || !se.rec.userMsgs[id] {
			return nil, se.refuse(call, ErrUnknownMessage, "no message %s of the user's was recorded in the session", termtext.Quote(id))
		}
		if seq < se.rec.endSeed { // the format cites only the session's own
			return nil, se.refuse(call, ErrInvalid, "message %s is in the inherited history", termtext.Quote(id))
		}
		if slices.Contains(ids[:i], id) {
			return nil, se.refuse(call, ErrDuplicateID, "message %s is named twice", termtext.Quote(id))
		}
		seqs = append(seqs, seq)
	}
	return seqs, nil
}

// TitleRequest is the request a title provider sent to make a title from
// the user's messages From (ids): its route, System prompt and MaxTokens,
// and Prompt, the text of its one user message (ID; "": a new id).
type TitleRequest struct {
	Provider  string
	Route     TitleRoute
	System    string
	MaxTokens int64
	From      []string
	ID        string
	Prompt    string
}

// TitleRequest records the request a title provider sent; Title records
// the title it made.
func (se *Session) TitleRequest(t TitleRequest) error {
	return se.locked("TitleRequest", written, func() error {
		switch {
		case len(t.From) == 0:
			return se.refuse("TitleRequest", ErrInvalid, "a title request names the messages the title is made from")
		case t.Provider == "" || t.Route.Provider == "" || t.Route.Model == "":
			return se.refuse("TitleRequest", ErrInvalid, "a title request needs its title provider and a route with a provider and a model")
		case t.MaxTokens < 0:
			return se.refuse("TitleRequest", ErrInvalid, "a title request's token limit cannot be negative")
		case t.Prompt == "":
			return se.refuse("TitleRequest", ErrInvalid, "a title request needs the prompt it sent")
		}
		seqs, err := se.userSeqs("TitleRequest", t.From)
		if err != nil {
			return err
		}
		if t.ID == "" {
			t.ID = NewMessageID()
		} else if err := se.checkNewID("TitleRequest", t.ID); err != nil {
			return err
		}
		msg, err := convlog.NewMessage(t.ID, "user", convlog.Source{Kind: convlog.SourceTitle}, []convlog.Block{convlog.TextBlock(t.Prompt)})
		if err != nil {
			return se.refuse("TitleRequest", ErrInvalid, "%v", err)
		}
		type asked struct {
			TitleProvider string     `json:"titleProvider"`
			Route         TitleRoute `json:"route"`
		}
		return se.record(typed(convlog.TypeTitleRequest, struct {
			asked
			System      string            `json:"system"`
			MaxTokens   int64             `json:"maxTokens"`
			MessageSeqs []int64           `json:"messageSeqs"`
			Messages    []json.RawMessage `json:"messages"`
		}{asked{t.Provider, t.Route}, t.System, t.MaxTokens, seqs, []json.RawMessage{msg.JSON()}}))
	})
}

// Title records a title of the session; the latest recorded is the
// session's.
func (se *Session) Title(t SessionTitle) error {
	return se.locked("Title", written, func() error {
		src := titleSource{Kind: "user"}
		switch {
		case t.Title == "":
			return se.refuse("Title", ErrInvalid, "the title is empty")
		case len(t.From) == 0 && (t.Provider != "" || t.Route != nil):
			return se.refuse("Title", ErrInvalid, "a title a provider made names the messages it was made from")
		case t.Route != nil && (t.Route.Provider == "" || t.Route.Model == ""):
			return se.refuse("Title", ErrInvalid, "a title's route needs a provider and a model")
		case t.Route != nil && t.Provider == "":
			return se.refuse("Title", ErrInvalid, "a title with a route names the provider that made it")
		case t.Provider != "":
			src = titleSource{Kind: "provider", Provider: t.Provider, Model: t.Route}
		case len(t.From) > 0:
			src.Kind = "fallback"
		}
		seqs, err := se.userSeqs("Title", t.From)
		if err != nil {
			return err
		}
		return se.record(typed(convlog.TypeSessionTitle, struct {
			Title       string      `json:"title"`
			MessageSeqs []int64     `json:"messageSeqs"`
			Source      titleSource `json:"source"`
		}{t.Title, seqs, src}))
	})
}

// RequestContext is where the step's requests go: the route (Provider,
// Model), the model's context window (0: not known), and whether a changed
// system prompt reaches the model inside the history (SystemPromptInHistory)
// rather than as the system message.
type RequestContext struct {
	Provider, Model       string
	ContextWindow         int64
	SystemPromptInHistory bool
}

// RequestContext records c in the open step when it differs from the last
// recorded in the session's log; an unchanged context records nothing.
func (se *Session) RequestContext(c RequestContext) error {
	return se.locked("RequestContext", inStep, func() error {
		switch {
		case c.Provider == "" || c.Model == "":
			return se.refuse("RequestContext", ErrInvalid, "the context needs a provider and a model")
		case c.ContextWindow < 0:
			return se.refuse("RequestContext", ErrInvalid, "a context window cannot be negative")
		}
		update := ""
		if c.SystemPromptInHistory {
			update = "in-history"
		}
		ev := typed(convlog.TypeRequestContext, struct {
			Provider           string `json:"provider"`
			Model              string `json:"model"`
			ContextWindow      int64  `json:"contextWindow,omitempty"`
			SystemPromptUpdate string `json:"systemPromptUpdate,omitempty"`
		}{c.Provider, c.Model, c.ContextWindow, update})
		if bytes.Equal(ev.Data, se.rec.context) {
			return nil
		}
		return se.record(ev)
	})
}

// Command records that the user ran command name (a slash command) with
// args ("": none) and returns the command's new id for CommandDone.
func (se *Session) Command(name, args string) (id string, err error) {
	err = se.locked("Command", written, func() error {
		if name == "" {
			return se.refuse("Command", ErrInvalid, "the command needs its name")
		}
		id = NewMessageID()
		return se.record(typed(convlog.TypeCommandRun, struct {
			CommandID string      `json:"commandId"`
			Name      string      `json:"name"`
			Args      string      `json:"args,omitempty"`
			Source    titleSource `json:"source"`
		}{id, name, args, titleSource{Kind: "user"}}))
	})
	return id, err
}

// CommandResult is how command ID ended: Failed or not, with Text to show
// ("": none) and, for one that succeeded, the id of the message it
// recorded (Message, "": none).
type CommandResult struct {
	ID, Text, Message string
	Failed            bool
}

// CommandDone records that a command Command began has ended.
func (se *Session) CommandDone(c CommandResult) error {
	return se.locked("CommandDone", written, func() error {
		done, ok := se.rec.commands[c.ID]
		switch {
		case !ok:
			return se.refuse("CommandDone", ErrUnknownCall, "no command %s was run in the session (Command)", termtext.Quote(c.ID))
		case done:
			return se.refuse("CommandDone", ErrOrder, "command %s has ended already", termtext.Quote(c.ID))
		case c.Failed && c.Message != "":
			return se.refuse("CommandDone", ErrInvalid, "only a command that succeeded names the message it recorded")
		}
		kind := "success"
		if c.Failed {
			kind = "error"
		}
		var from *int64
		if c.Message != "" {
			seq, ok := se.rec.surfaceSeq[c.Message]
			if !ok {
				return se.refuse("CommandDone", ErrUnknownMessage, "no message %s was recorded in the session", termtext.Quote(c.Message))
			}
			from = &seq
		}
		return se.record(typed(convlog.TypeCommandDone, struct {
			CommandID      string `json:"commandId"`
			Kind           string `json:"kind"`
			Text           string `json:"text,omitempty"`
			SourceEventSeq *int64 `json:"sourceEventSeq,omitempty"`
		}{c.ID, kind, c.Text, from}))
	})
}

// dispatch is a tool call made by code a tool call runs (programmatic
// tool calling): root is that tool call, parent the root or an earlier
// dispatch of it.
type dispatch struct {
	root, parent, name string
	args               json.RawMessage
	turn               int64 // the turn it ran in: a later turn's call may reuse its root's id
	settled            bool
}

func (r *recState) observeDispatch(e *convlog.Event) {
	var d struct {
		RootCallID, ParentCallID, SubCallID, Name string
		Arguments                                 json.RawMessage
	}
	json.Unmarshal(e.Data, &d)
	if c := r.dispatches[d.SubCallID]; c != nil {
		c.settled = true
		return
	}
	r.dispatches[d.SubCallID] = &dispatch{root: d.RootCallID, parent: d.ParentCallID, name: d.Name, args: d.Arguments, turn: r.turn}
}

// dispatchData is tool/ptc-dispatch-start, and with the result
// tool/ptc-dispatch.
type dispatchData struct {
	RootCallID   string          `json:"rootCallId"`
	ParentCallID string          `json:"parentCallId"`
	SubCallID    string          `json:"subCallId"`
	Name         string          `json:"name"`
	Arguments    json.RawMessage `json:"arguments"`
}

// Dispatch records that code run by tool call parent (a started tool call
// of the turn without its result, or a Dispatch of one) calls tool name
// with args, a JSON value; it returns the new call's id,
// "<parent>:ptc:<n>", for DispatchResult.
func (se *Session) Dispatch(parent, name string, args json.RawMessage) (id string, err error) {
	err = se.locked("Dispatch", inTurn, func() error {
		r := &se.rec
		root := parent
		d := r.dispatches[parent]
		if d != nil {
			root = d.root
		}
		switch c := r.calls[root]; {
		case d != nil && d.turn != r.turn:
			return se.refuse("Dispatch", ErrOrder, "dispatched call %s ran in turn %d, not this one", termtext.Quote(parent), d.turn)
		case name == "":
			return se.refuse("Dispatch", ErrInvalid, "the dispatched call needs its tool's name")
		case !json.Valid(args):
			return se.refuse("Dispatch", ErrInvalid, "the arguments are not one JSON value")
		case c == nil:
			return se.refuse("Dispatch", ErrUnknownCall, "no answer of turn %d asked for tool call %s", r.turn, termtext.Quote(parent))
		case c.startSeq < 0 || c.resolved:
			return se.refuse("Dispatch", ErrOrder, "tool call %s is not running (ToolCall, before its ToolResult)", termtext.Quote(root))
		}
		for n := 1; id == "" || r.dispatches[id] != nil; n++ {
			id = fmt.Sprintf("%s:ptc:%d", parent, n)
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, args); err != nil {
			return se.refuse("Dispatch", ErrInvalid, "%v", err)
		}
		return se.record(typed(convlog.TypePTCStart, dispatchData{root, parent, id, name, buf.Bytes()}))
	})
	if err != nil {
		id = ""
	}
	return id, err
}

// DispatchResult is what dispatched call ID returned: Content, and for a
// failure IsError and the Error (nil: none said).
type DispatchResult struct {
	ID      string
	IsError bool
	Error   *convlog.ToolError
	Content []convlog.Block
}

// DispatchResult records the result of a call Dispatch began.
func (se *Session) DispatchResult(res DispatchResult) error {
	return se.locked("DispatchResult", inTurn, func() error {
		d := se.rec.dispatches[res.ID]
		switch {
		case d == nil:
			return se.refuse("DispatchResult", ErrUnknownCall, "no call %s was dispatched (Dispatch)", termtext.Quote(res.ID))
		case d.settled:
			return se.refuse("DispatchResult", ErrOrder, "dispatched call %s has its result already", termtext.Quote(res.ID))
		case d.turn != se.rec.turn:
			return se.refuse("DispatchResult", ErrOrder, "dispatched call %s ran in turn %d, not this one", termtext.Quote(res.ID), d.turn)
		case res.Error != nil && !res.IsError:
			return se.refuse("DispatchResult", ErrInvalid, "an error is carried only by a result marked IsError")
		case res.Error != nil && (res.Error.Name == "" || res.Error.Code == ""):
			return se.refuse("DispatchResult", ErrInvalid, "a tool error needs a name and a code")
		}
		content, err := convlog.BlocksJSON(res.Content)
		if err != nil {
			return se.refuse("DispatchResult", ErrInvalid, "%v", err)
		}
		return se.record(typed(convlog.TypePTC, struct {
			dispatchData
			IsError bool               `json:"isError"`
			Error   *convlog.ToolError `json:"error,omitempty"`
			Content json.RawMessage    `json:"content"`
		}{dispatchData{d.root, d.parent, res.ID, d.name, d.args}, res.IsError, res.Error, content}))
	})
}

// Prune is a replacement of the history the model reads that no model
// wrote: messages From through To (ids, in the order the model reads them,
// after the system prompt) give way to a user message ID ("": a new id)
// holding Content. TokenCount is what they held (0: bytes / 4).
type Prune struct {
	From, To, ID string
	Content      []convlog.Block
	TokenCount   int64
}

// Prune records compaction/prune and, next in one durable batch, the
// replacement (source compact-basic).
func (se *Session) Prune(p Prune) error {
	return se.replacing("Prune", func(r *recState) error {
		switch {
		case p.From == "" || p.To == "":
			return se.refuse("Prune", ErrEmptyID, "a prune names the first and the last message it replaces")
		case len(p.Content) == 0:
			return se.refuse("Prune", ErrInvalid, "the replacement needs content")
		case p.TokenCount < 0:
			return se.refuse("Prune", ErrInvalid, "a token count cannot be negative")
		}
		nodes := r.hist.Surface()
		i, j := surfaceAt(nodes, p.From), surfaceAt(nodes, p.To)
		missing := p.From
		if i >= 0 {
			missing = p.To
		}
		switch {
		case i < 0 || j < 0:
			return se.refuse("Prune", ErrUnknownMessage, "message %s is not in the history the model reads", termtext.Quote(missing))
		case i < r.protected(nodes):
			return se.refuse("Prune", ErrInvalid, "message %s is the system prompt, which no compaction replaces", termtext.Quote(p.From))
		case j < i:
			return se.refuse("Prune", ErrOrder, "message %s comes before message %s in the history", termtext.Quote(p.To), termtext.Quote(p.From))
		}
		if p.ID == "" {
			p.ID = NewMessageID()
		} else if err := se.checkNewID("Prune", p.ID); err != nil {
			return err
		}
		msg, err := convlog.NewMessage(p.ID, "user", convlog.Source{Kind: convlog.SourceCompaction}, p.Content)
		if err != nil {
			return se.refuse("Prune", ErrInvalid, "%v", err)
		}
		seqs, count := shadow(nodes[i:j+1], p.TokenCount)
		defer se.indexPoint(false)
		return se.record(typed(convlog.TypeCompactionPrune, struct {
			ShadowedRange      convlog.SeqRange `json:"shadowedRange"`
			ShadowedSeqs       []int64          `json:"shadowedSeqs"`
			ShadowedTokenCount int64            `json:"shadowedTokenCount"`
		}{convlog.SeqRange{Start: seqs[0], End: seqs[len(seqs)-1]}, seqs, count}), replacement(msg, seqs))
	})
}

// Offload names the images of message Message (a user message or a tool
// result the model reads) that the model no longer reads: Images, indexes
// of the message's image blocks counted from 0, offloaded ones included,
// in increasing order.
type Offload struct {
	Message string
	Images  []int
}

// offloadTarget is an image/offload target.
type offloadTarget struct {
	Seq          int64 `json:"seq"`
	ImageIndexes []int `json:"imageIndexes"`
}

// Offload records image/offload for targets, one per message. The log
// keeps the images: History still returns them.
func (se *Session) Offload(targets ...Offload) error {
	return se.locked("Offload", written, func() error {
		if se.call != nil {
			return se.refuse("Offload", ErrOrder, "a model call is in flight")
		}
		if len(targets) == 0 {
			return se.refuse("Offload", ErrInvalid, "an offload names the messages whose images it offloads")
		}
		nodes := se.rec.hist.Surface()
		out := make([]offloadTarget, len(targets))
		for k, t := range targets {
			i := surfaceAt(nodes, t.Message)
			switch {
			case i < 0:
				return se.refuse("Offload", ErrUnknownMessage, "message %s is not in the history the model reads", termtext.Quote(t.Message))
			case slices.ContainsFunc(targets[:k], func(o Offload) bool { return o.Message == t.Message }):
				return se.refuse("Offload", ErrDuplicateID, "message %s is named twice", termtext.Quote(t.Message))
			case nodes[i].Message.Role() != "user" && nodes[i].Message.Role() != "tool":
				return se.refuse("Offload", ErrInvalid, "message %s is no user message or tool result", termtext.Quote(t.Message))
			case len(t.Images) == 0:
				return se.refuse("Offload", ErrInvalid, "message %s: an offload names at least one image", termtext.Quote(t.Message))
			}
			n := images(nodes[i].Message.JSON())
			for x, img := range t.Images {
				if img < 0 || img >= n || x > 0 && img <= t.Images[x-1] {
					return se.refuse("Offload", ErrInvalid, "message %s: image %d is not one of its %d images in increasing order", termtext.Quote(t.Message), img, n)
				}
			}
			out[k] = offloadTarget{nodes[i].Seq, t.Images}
		}
		return se.record(typed(convlog.TypeImageOffload, struct {
			Targets []offloadTarget `json:"targets"`
		}{out}))
	})
}

// images counts the image blocks of a stored message's content.
func images(msg []byte) int {
	n := 0
	blocks, _ := rawjson.Elements(rawjson.Get(msg, "content"), nil)
	for _, b := range blocks {
		if str(rawjson.Get(b, "type")) == convlog.BlockImage {
			n++
		}
	}
	return n
}
