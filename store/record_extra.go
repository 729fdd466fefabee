package store

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/convkit/convkit/convlog"
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
	return se.locked(se.inStep("Developer"), func() error {
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
				if !slices.ContainsFunc(h.Tools, func(t convlog.ToolSchema) bool { return t.Name == name }) {
					return se.refuse("Developer", ErrInvalid, "tool %s is not a tool of the last request", termtext.Quote(name))
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

// Title records a title of the session; the latest recorded is the
// session's.
func (se *Session) Title(t SessionTitle) error {
	return se.locked(se.written("Title"), func() error {
		src := titleSource{Kind: "user"}
		switch {
		case t.Title == "":
			return se.refuse("Title", ErrInvalid, "the title is empty")
		case len(t.From) == 0 && (t.Provider != "" || t.Route != nil):
			return se.refuse("Title", ErrInvalid, "a title a provider made names the messages it was made from")
		case t.Route != nil && (t.Route.Provider == "" || t.Route.Model == ""):
			return se.refuse("Title", ErrInvalid, "a title's route needs a provider and a model")
		case t.Provider != "":
			src = titleSource{Kind: "provider", Provider: t.Provider, Model: t.Route}
		case len(t.From) > 0:
			src.Kind = "fallback"
		}
		seqs := make([]int64, 0, len(t.From))
		for i, id := range t.From {
			seq, ok := se.rec.surfaceSeq[id]
			if !ok || !se.rec.userMsgs[id] {
				return se.refuse("Title", ErrUnknownMessage, "no message %s of the user's was recorded in the session", termtext.Quote(id))
			}
			if slices.Contains(t.From[:i], id) {
				return se.refuse("Title", ErrDuplicateID, "message %s is named twice", termtext.Quote(id))
			}
			seqs = append(seqs, seq)
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
	return se.locked(se.inStep("RequestContext"), func() error {
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
	err = se.locked(se.written("Command"), func() error {
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
	return se.locked(se.written("CommandDone"), func() error {
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
