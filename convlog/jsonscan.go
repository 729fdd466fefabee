package convlog

import (
	"iter"

	"github.com/convkit/convkit/internal/rawjson"
)

// Every line is read through rawjson, the module's one raw JSON scanner: it
// checks a whole line's syntax (UTF-8, nesting, duplicate keys at any depth
// included) and hands back the byte spans of its members, so event data can
// stay raw bytes. It is the hot path of every read.

// member is one member of a scanned object.
type member = rawjson.Member

// elements ranges over the elements of the array b and their indexes; it
// stops early, silently, at malformed bytes.
func elements(b []byte) iter.Seq2[int, []byte] {
	return func(yield func(int, []byte) bool) {
		it := rawjson.Array(b)
		for i := 0; ; i++ {
			v, ok := it.Next()
			if !ok || !yield(i, v) {
				return
			}
		}
	}
}
