package convlog

import (
	"fmt"
	"slices"

	"github.com/convkit/convkit/internal/rawjson"
	"github.com/convkit/convkit/internal/termtext"
)

// History is the message sequence a model reads, derived from surface
// events. Each surface type changes it through its own interpreter.
type History struct {
	nodes []SurfaceNode
	// skipBodies keeps only which seqs are on the surface, so that checking
	// a log's surface costs memory per node, not per byte.
	skipBodies bool

	members []member
}

// SurfaceNode is one node of the current surface: its event's seq, its
// message (nil when bodies are skipped), and Hidden for an empty answer,
// which takes part in replacement spans but is left out of Messages.
type SurfaceNode struct {
	Seq     int64
	Message *StoredMessage
	Hidden  bool
}

// Surface returns the current surface in order, hidden nodes included.
func (h *History) Surface() []SurfaceNode { return slices.Clone(h.nodes) }

// Len is the number of nodes on the current surface, hidden ones included.
func (h *History) Len() int { return len(h.nodes) }

// HistoryMessage is one message of the derived history with the seq of the
// event that produced it.
type HistoryMessage struct {
	Seq     int64
	Message StoredMessage
}

// Messages returns the history a model reads.
func (h *History) Messages() []HistoryMessage {
	out := make([]HistoryMessage, 0, len(h.nodes))
	for _, n := range h.nodes {
		if !n.Hidden && n.Message != nil {
			out = append(out, HistoryMessage{Seq: n.Seq, Message: *n.Message})
		}
	}
	return out
}

// Apply interprets one event. Log-only and unknown ignorable events leave
// the history unchanged.
func (h *History) Apply(e *Event) error {
	info := eventTypes[e.Type]
	// Known is false on a read event only for an opaque ignorable one; an
	// event built in memory leaves it unset and is interpreted by its type.
	if info == nil || !info.surface || (!e.Known && e.Ignorable) {
		return nil
	}
	raw := e.Data
	if info.msgPath != "" {
		var err error
		h.members, err = rawjson.Members(e.Data, h.members)
		if err != nil {
			return fmt.Errorf("%s at seq %d: data is not an object", e.Type, e.Seq)
		}
		if raw = memberValue(h.members, info.msgPath); raw == nil {
			return fmt.Errorf("%s at seq %d: data has no %s", e.Type, e.Seq, termtext.Quote(info.msgPath))
		}
	}
	msg, err := parseStoredMessage(raw, !h.skipBodies)
	if err != nil {
		return fmt.Errorf("%s at seq %d: %v", e.Type, e.Seq, err)
	}
	if err := info.interpret(h, e, msg); err != nil {
		return fmt.Errorf("%s at seq %d %w", e.Type, e.Seq, err)
	}
	return nil
}

// put carries out a surface event's surfaceOp with msg: append it, or
// replace the span it names.
func (h *History) put(e *Event, msg StoredMessage, hidden bool) error {
	node := SurfaceNode{Seq: e.Seq, Hidden: hidden}
	if !h.skipBodies {
		// A copy taken here, so that msg itself stays on the stack when
		// the bodies are skipped (every line of a validation).
		kept := msg
		node.Message = &kept
	}
	if e.SurfaceOp == nil || !e.SurfaceOp.Replace {
		h.nodes = append(h.nodes, node)
		return nil
	}
	span, start, ok := h.span(e.SurfaceOp.StartSeq, e.SurfaceOp.EndSeq)
	if !ok {
		return fmt.Errorf("replaces %d..%d, which is not a span of the current history", e.SurfaceOp.StartSeq, e.SurfaceOp.EndSeq)
	}
	nodes := append([]SurfaceNode(nil), h.nodes[:start]...)
	nodes = append(nodes, node)
	h.nodes = append(nodes, h.nodes[start+len(span):]...)
	return nil
}

// span returns the nodes of the current surface from start to end
// inclusive; ok false when they are not a span of it.
func (h *History) span(start, end int64) (nodes []SurfaceNode, from int, ok bool) {
	i, j := -1, -1
	for k, n := range h.nodes {
		if n.Seq == start && i < 0 {
			i = k
		}
		if n.Seq == end {
			j = k
		}
	}
	if i < 0 || j < i {
		return nil, -1, false
	}
	return h.nodes[i : j+1], i, true
}

func requireRole(e *Event, msg StoredMessage, role string) error {
	if msg.Role() == role {
		return nil
	}
	return fmt.Errorf("carries a %s message, expected role %v", termtext.Quote(msg.Role()), []string{role})
}

func interpretRole(role string) interpreter {
	return func(h *History, e *Event, msg StoredMessage) error {
		if err := requireRole(e, msg, role); err != nil {
			return err
		}
		return h.put(e, msg, false)
	}
}

// interpretAssistant records every model answer; an empty one is kept out of
// what the model reads.
func interpretAssistant(h *History, e *Event, msg StoredMessage) error {
	if err := requireRole(e, msg, "assistant"); err != nil {
		return err
	}
	return h.put(e, msg, msg.Empty())
}
