package upgrade

import "github.com/convkit/convkit/internal/rawjson"

// member is one member of an ordered object; RawKey is nil for one added.
type member = rawjson.Member

// object is a JSON object as an ordered list of members with raw values:
// maps would lose the order, and only changed members are re-encoded.
type object struct {
	m []member
}

func parseObject(b []byte) (*object, error) {
	m, err := rawjson.Members(b, make([]member, 0, 8))
	if err != nil {
		return nil, err
	}
	return &object{m: m}, nil
}

func (o *object) index(key string) int {
	for i := range o.m {
		if string(o.m[i].Key) == key {
			return i
		}
	}
	return -1
}

// get returns the raw value of key, nil when absent.
func (o *object) get(key string) []byte {
	if i := o.index(key); i >= 0 {
		return o.m[i].Value
	}
	return nil
}

func (o *object) has(key string) bool { return o.index(key) >= 0 }

// set replaces the value of key in place, or appends the member.
func (o *object) set(key string, val []byte) {
	if i := o.index(key); i >= 0 {
		o.m[i].Value = val
		return
	}
	o.m = append(o.m, member{Key: []byte(key), Value: val})
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

// encodeBefore and encodeAfter are encode split around member i's value.
func (o *object) encodeBefore(dst []byte, i int) []byte {
	dst = append(dst, '{')
	for k, m := range o.m[:i+1] {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = appendKey(dst, m)
		if k < i {
			dst = append(dst, m.Value...)
		}
	}
	return dst
}

func (o *object) encodeAfter(dst []byte, i int) []byte {
	for _, m := range o.m[i+1:] {
		dst = append(dst, ',')
		dst = append(appendKey(dst, m), m.Value...)
	}
	return append(dst, '}')
}

// appendKey appends m's key as the source wrote it, or encoded, and ':'.
func appendKey(dst []byte, m member) []byte {
	if m.RawKey != nil {
		dst = append(dst, m.RawKey...)
	} else {
		dst = rawjson.AppendString(dst, string(m.Key))
	}
	return append(dst, ':')
}

// bytes encodes the object, compact.
func (o *object) bytes() []byte {
	n := 2
	for _, m := range o.m {
		n += len(m.RawKey) + len(m.Key) + 4 + len(m.Value)
	}
	last := len(o.m) - 1
	if last < 0 {
		return []byte("{}")
	}
	return o.encodeAfter(append(o.encodeBefore(make([]byte, 0, n), last), o.m[last].Value...), last)
}

// isStr, isObj and isArr report the kind of a raw value.
func isStr(raw []byte) bool { return len(raw) >= 2 && raw[0] == '"' }
func isObj(raw []byte) bool { return len(raw) > 0 && raw[0] == '{' }
func isArr(raw []byte) bool { return len(raw) > 0 && raw[0] == '[' }

// count parses a non-negative safe integer.
func count(raw []byte) (int64, bool) {
	v, ok := rawjson.Int(raw)
	return v, ok && v >= 0
}

func jsonString(s string) []byte { return rawjson.AppendString(nil, s) }
