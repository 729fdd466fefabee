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
