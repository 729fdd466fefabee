package upgrade

import (
	"errors"
	"strings"
	"testing"
)

// TestRemapRefs: after an insertion the seqs a step's events cite move, in
// every member the format declares, and a malformed member is named.
func TestRemapRefs(t *testing.T) {
	var m seqMap
	m.add(0, 0)
	m.add(1, 2) // an event inserted before source seq 1
	m.add(2, 3)
	missing := func(int64) error { return errors.New("missing") }
	for _, c := range []struct{ typ, data, want, err string }{
		{"command/done", `{"sourceEventSeq":1,"x":true}`, `{"sourceEventSeq":2,"x":true}`, ""},
		{"compaction/summary", `{"shadowedRange":{"start":0,"end":2},"shadowedSeqs":[1,2]}`, `{"shadowedRange":{"start":0,"end":3},"shadowedSeqs":[2,3]}`, ""},
		{"session/title", `{"title":"t","messageSeqs":[]}`, `{"title":"t","messageSeqs":[]}`, ""},
		{"image/offload", `{"targets":[{"seq":2,"i":0},{"seq":1}]}`, `{"targets":[{"seq":3,"i":0},{"seq":2}]}`, ""},
		{"turn/end", `{"turn":1}`, `{"turn":1}`, ""},
		{"command/done", `[]`, "", "command/done at seq 3: data is not an object"},
		{"compaction/prune", `{"shadowedRange":5}`, "", "compaction/prune at seq 3: shadowedRange is not an object"},
		{"compaction/prune", `{"shadowedSeqs":5}`, "", "compaction/prune at seq 3 has seq references that are not an array"},
		{"image/offload", `{"targets":5}`, "", "image/offload at seq 3: targets must be an array"},
		{"image/offload", `{"targets":[{"seq":1},5]}`, "", "image/offload at seq 3: targets[1] is not an object"},
		{"image/offload", `{"targets":[{"seq":"x"}]}`, "", "image/offload at seq 3 has a reference that is not a seq"},
		{"session/title", `{"messageSeqs":[3]}`, "", "session/title at seq 3 references seq 3, which is not an earlier event"},
	} {
		e := &event{typ: c.typ, seq: 3, data: []byte(c.data)}
		err := remapRefs(e, &m, missing)
		if c.err != "" {
			if err == nil || !strings.HasSuffix(err.Error(), c.err) {
				t.Errorf("%s %s: error %v, want %q", c.typ, c.data, err, c.err)
			}
			continue
		}
		if err != nil || string(e.data) != c.want {
			t.Errorf("%s %s: %v, %s; want %s", c.typ, c.data, err, e.data, c.want)
		}
	}
}
