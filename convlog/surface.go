package convlog

// SurfaceNode is one node of the current surface: its event's seq, its
// message (nil when bodies are skipped), and Hidden for an empty answer.
type SurfaceNode struct {
	Seq     int64
	Message *StoredMessage
	Hidden  bool
}

// Surface returns the current surface in order, hidden nodes included: the
// span a replacement names (a compaction's shadowed seqs) counts every
// node, where Messages gives only what the model reads.
func (h *History) Surface() []SurfaceNode {
	out := make([]SurfaceNode, len(h.nodes))
	for i, n := range h.nodes {
		out[i] = SurfaceNode{Seq: n.seq, Message: n.msg, Hidden: n.hidden}
	}
	return out
}

// Len is the number of nodes on the current surface, hidden ones included.
func (h *History) Len() int { return len(h.nodes) }
