package convlog

import "github.com/convkit/convkit/internal/rawjson"

// Every line is read through rawjson, the module's one raw JSON scanner: it
// checks a whole line's syntax (UTF-8, nesting, duplicate keys at any depth
// included) and hands back the byte spans of its members, so event data can
// stay raw bytes. It is the hot path of every read.

// member is one member of a scanned object.
type member = rawjson.Member

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}
