package convlog

// Exported pieces of the raw JSON machinery, for packages that rewrite
// events (the upgrade chain) without a second copy of it.

// AppendJSONString appends s as a JSON string the way log lines are
// written: no HTML escaping, U+2028 and U+2029 as they are.
func AppendJSONString(dst []byte, s string) []byte { return appendString(dst, s) }

// SkipJSONSpace returns the offset of the first byte at or after i that is
// not JSON white space.
func SkipJSONSpace(b []byte, i int) int { return skipWS(b, i) }

// SkipJSONValue returns the offset just past the JSON value starting at
// b[i], for bytes already validated (a value from an event a Reader
// returned): strings end at their closing quote, containers at their
// matching bracket.
func SkipJSONValue(b []byte, i int) (int, error) { return skipTrusted(b, i, 0) }

// JSONMember is one member of a JSON object: its key, escapes decoded, and
// its raw value.
type JSONMember struct {
	Key   string
	Value []byte
}

// JSONMembers appends the members of the JSON object b to buf, in order and
// duplicates included, for bytes already validated (an event's data from a
// Reader, or an object within it). ok is false when b is not an object.
func JSONMembers(b []byte, buf []JSONMember) (members []JSONMember, ok bool) {
	members = buf
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return members, false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return members, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return members, false
		}
		ke, err := skipStringTrusted(b, i)
		if err != nil {
			return members, false
		}
		key, err := decodeKey(b[i:ke])
		if err != nil {
			return members, false
		}
		i = skipWS(b, ke)
		if i >= len(b) || b[i] != ':' {
			return members, false
		}
		vs := skipWS(b, i+1)
		ve, err := skipTrusted(b, vs, 0)
		if err != nil {
			return members, false
		}
		members = append(members, JSONMember{Key: key, Value: b[vs:ve]})
		i = skipWS(b, ve)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
			continue
		}
		return members, i < len(b) && b[i] == '}'
	}
}
