package upgrade

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"

	"github.com/convkit/convkit/convlog"
)

// The upgrade touches only the events a rule names, and of those only the
// members the rule reads. Values are kept as raw JSON byte spans: an object
// is an ordered list of members (Go maps would lose the order, and the
// runtime's readers compare bytes), and only the members a rule changes are
// re-encoded. Everything here works on input the convlog reader has already
// checked to be valid JSON; it still returns errors, never panics, on
// malformed bytes.

var errJSON = errors.New("malformed JSON")

func skipWS(b []byte, i int) int { return convlog.SkipJSONSpace(b, i) }

// skipString returns the offset just past the string starting at b[i].
func skipString(b []byte, i int) (int, error) { return skipValue(b, i) }

// skipValue returns the offset just past the JSON value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	j, err := convlog.SkipJSONValue(b, i)
	if err != nil || j == i {
		return j, errJSON
	}
	return j, nil
}

// eachMember calls fn with each member of the object b: the key (decoded;
// it aliases b unless it held escapes), the key as written (with quotes) and
// the raw value. fn returns false to stop early.
func eachMember(b []byte, fn func(key, rawKey, val []byte) bool) error {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errNotObject
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return errJSON
		}
		ks := i
		var err error
		if i, err = skipString(b, i); err != nil {
			return err
		}
		rawKey := b[ks:i]
		i = skipWS(b, i)
		if i >= len(b) || b[i] != ':' {
			return errJSON
		}
		i = skipWS(b, i+1)
		vs := i
		if i, err = skipValue(b, i); err != nil {
			return err
		}
		if !fn(keyBytes(rawKey), rawKey, b[vs:i]) {
			return nil
		}
		i = skipWS(b, i)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return nil
		}
		return errJSON
	}
}

var (
	errNotObject = errors.New("not a JSON object")
	errNotArray  = errors.New("not a JSON array")
)

// eachElement calls fn with each element of the array b; fn returns false to
// stop early.
func eachElement(b []byte, fn func(i int, val []byte) bool) error {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '[' {
		return errNotArray
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return nil
	}
	for n := 0; ; n++ {
		vs := i
		var err error
		if i, err = skipValue(b, i); err != nil {
			return err
		}
		if !fn(n, b[vs:i]) {
			return nil
		}
		i = skipWS(b, i)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
			continue
		}
		if i < len(b) && b[i] == ']' {
			return nil
		}
		return errJSON
	}
}

// arrayElems returns the raw elements of an array.
func arrayElems(b []byte) ([][]byte, error) {
	var out [][]byte
	err := eachElement(b, func(_ int, v []byte) bool {
		out = append(out, v)
		return true
	})
	return out, err
}

// keyBytes decodes a raw key (with quotes).
func keyBytes(raw []byte) []byte {
	if len(raw) < 2 {
		return nil
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return inner
	}
	return []byte(s)
}

// member is one member of an ordered object.
type member struct {
	rawKey []byte // as written, with quotes; nil for a member added here
	key    []byte // decoded
	val    []byte
}

// object is a JSON object as an ordered list of members with raw values.
type object struct {
	m []member
}

func parseObject(b []byte) (*object, error) {
	o := &object{m: make([]member, 0, 8)}
	err := eachMember(b, func(key, rawKey, val []byte) bool {
		o.m = append(o.m, member{rawKey: rawKey, key: key, val: val})
		return true
	})
	if err != nil {
		return nil, err
	}
	return o, nil
}

func (o *object) index(key string) int {
	for i := range o.m {
		if string(o.m[i].key) == key {
			return i
		}
	}
	return -1
}

// get returns the raw value of key, nil when absent.
func (o *object) get(key string) []byte {
	if i := o.index(key); i >= 0 {
		return o.m[i].val
	}
	return nil
}

func (o *object) has(key string) bool { return o.index(key) >= 0 }

// set replaces the value of key in place, or appends the member.
func (o *object) set(key string, val []byte) {
	if i := o.index(key); i >= 0 {
		o.m[i].val = val
		return
	}
	o.m = append(o.m, member{key: []byte(key), val: val})
}

// remove deletes key; it reports whether it was there.
func (o *object) remove(key string) bool {
	i := o.index(key)
	if i < 0 {
		return false
	}
	o.m = append(o.m[:i], o.m[i+1:]...)
	return true
}

// encode appends the object, compact.
func (o *object) encode(dst []byte) []byte {
	dst = append(dst, '{')
	for i, m := range o.m {
		if i > 0 {
			dst = append(dst, ',')
		}
		if m.rawKey != nil {
			dst = append(dst, m.rawKey...)
		} else {
			dst = appendString(dst, string(m.key))
		}
		dst = append(dst, ':')
		dst = append(dst, m.val...)
	}
	return append(dst, '}')
}

func (o *object) bytes() []byte {
	n := 2
	for _, m := range o.m {
		n += len(m.rawKey) + len(m.key) + 4 + len(m.val)
	}
	return o.encode(make([]byte, 0, n))
}

// encodeArray appends a JSON array of raw elements.
func encodeArray(dst []byte, elems [][]byte) []byte {
	dst = append(dst, '[')
	for i, e := range elems {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, e...)
	}
	return append(dst, ']')
}

// str decodes a raw JSON string value.
func str(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// strIs reports whether raw is the JSON string s.
func strIs(raw []byte, s string) bool {
	if len(raw) == len(s)+2 && raw[0] == '"' && string(raw[1:len(raw)-1]) == s {
		return true
	}
	if len(raw) < 2 || raw[0] != '"' || bytes.IndexByte(raw, '\\') < 0 {
		return false
	}
	v, ok := str(raw)
	return ok && v == s
}

// isStr reports whether raw is a JSON string.
func isStr(raw []byte) bool { return len(raw) >= 2 && raw[0] == '"' }

// isObj and isArr report the kind of a raw value.
func isObj(raw []byte) bool { return len(raw) > 0 && raw[0] == '{' }
func isArr(raw []byte) bool { return len(raw) > 0 && raw[0] == '[' }

// intVal parses a raw JSON integer literal within the safe range.
func intVal(raw []byte) (int64, bool) {
	if len(raw) == 0 || len(raw) > 17 {
		return 0, false
	}
	d := raw
	neg := raw[0] == '-'
	if neg {
		d = raw[1:]
	}
	if len(d) == 0 || d[0] == '0' && (len(d) > 1 || neg) {
		return 0, false
	}
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || v > 1<<53-1 || v < -(1<<53-1) {
		return 0, false
	}
	return v, true
}

// count parses a non-negative safe integer.
func count(raw []byte) (int64, bool) {
	v, ok := intVal(raw)
	return v, ok && v >= 0
}

func appendInt(dst []byte, v int64) []byte { return strconv.AppendInt(dst, v, 10) }

// appendString writes s as a JSON string the way the runtime does.
func appendString(dst []byte, s string) []byte { return convlog.AppendJSONString(dst, s) }

func jsonString(s string) []byte { return appendString(nil, s) }

// emptyArr reports whether raw is [].
func emptyArr(raw []byte) bool {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return false
	}
	i = skipWS(raw, i+1)
	return i < len(raw) && raw[i] == ']'
}

// emptyObj reports whether raw is {}.
func emptyObj(raw []byte) bool {
	i := skipWS(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return false
	}
	i = skipWS(raw, i+1)
	return i < len(raw) && raw[i] == '}'
}

// memberOf returns the raw value of key in object b (nil when absent or b is
// not an object) without building the object.
func memberOf(b []byte, key string) []byte {
	var out []byte
	eachMember(b, func(k, _, v []byte) bool {
		if string(k) == key {
			out = v
			return false
		}
		return true
	})
	return out
}
