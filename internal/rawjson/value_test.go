package rawjson

import "testing"

func TestEmpty(t *testing.T) {
	for _, tc := range []struct {
		in       string
		arr, obj bool
	}{
		{"[]", true, false}, {" [ \n] ", true, false}, {"{}", false, true}, {"\t{ }", false, true},
		{"[1]", false, false}, {"{\"a\":1}", false, false}, {"", false, false}, {"[", false, false}, {"null", false, false},
	} {
		if a, o := EmptyArray([]byte(tc.in)), EmptyObject([]byte(tc.in)); a != tc.arr || o != tc.obj {
			t.Errorf("%q: empty array %v, empty object %v", tc.in, a, o)
		}
	}
}
