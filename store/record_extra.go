package store

import (
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
