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
	nodes []historyNode
	// SkipBodies keeps only the structure (which seqs are on the surface),
	// so checking a log's surface costs memory per node, not per byte.
	SkipBodies bool

	members []member
}

type historyNode struct {
	seq int64
	msg *StoredMessage // nil when SkipBodies
	// hidden nodes (empty model answers) take part in replacement spans but
	// are left out of Messages.
	hidden bool
}

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
		if !n.hidden && n.msg != nil {
			out = append(out, HistoryMessage{Seq: n.seq, Message: *n.msg})
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
	msg, err := parseStoredMessage(raw, !h.SkipBodies)
	if err != nil {
		return fmt.Errorf("%s at seq %d: %v", e.Type, e.Seq, err)
	}
	return info.interpret(h, e, msg)
}

// Put carries out a surface event's surfaceOp with msg: append it, or
// replace the span it names. Interpreters (a plugin's too) call it; hidden
// keeps the node out of Messages while it still takes part in spans.
func (h *History) Put(e *Event, msg StoredMessage, hidden bool) error {
	node := historyNode{seq: e.Seq, hidden: hidden}
	if !h.SkipBodies {
		// A copy taken here, so that msg itself stays on the stack when
		// the bodies are skipped (every line of a validation).
		kept := msg
		node.msg = &kept
	}
	if e.SurfaceOp == nil || !e.SurfaceOp.Replace {
		h.nodes = append(h.nodes, node)
		return nil
	}
	start, end := -1, -1
	for i, n := range h.nodes {
		if n.seq == e.SurfaceOp.StartSeq {
			start = i
		}
		if n.seq == e.SurfaceOp.EndSeq {
			end = i
		}
	}
	if start < 0 || end < start {
		return fmt.Errorf("%s at seq %d replaces %d..%d, which is not a span of the current history",
			e.Type, e.Seq, e.SurfaceOp.StartSeq, e.SurfaceOp.EndSeq)
	}
	nodes := append([]historyNode(nil), h.nodes[:start]...)
	nodes = append(nodes, node)
	h.nodes = append(nodes, h.nodes[end+1:]...)
	return nil
}

func requireRole(e *Event, msg StoredMessage, roles ...string) error {
	for _, r := range roles {
		if msg.Role() == r {
			return nil
		}
	}
	return roleError(e, msg, slices.Clone(roles))
}

// roleError is requireRole's error; roles is a copy, so that the variadic
// slice of every call does not escape to the heap.
func roleError(e *Event, msg StoredMessage, roles []string) error {
	return fmt.Errorf("%s at seq %d carries a %s message, expected role %v", e.Type, e.Seq, termtext.Quote(msg.Role()), roles)
}

func interpretRole(role string) interpreter {
	return func(h *History, e *Event, msg StoredMessage) error {
		if err := requireRole(e, msg, role); err != nil {
			return err
		}
		return h.Put(e, msg, false)
	}
}

// interpretAssistant records every model answer; an empty one is kept out of
// what the model reads.
func interpretAssistant(h *History, e *Event, msg StoredMessage) error {
	if err := requireRole(e, msg, "assistant"); err != nil {
		return err
	}
	return h.Put(e, msg, msg.Empty())
}
