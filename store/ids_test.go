package store

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/convkit/convkit/convlog"
)

func TestEncodeSegment(t *testing.T) {
	tests := []struct {
		id, want string
	}{
		{"abc-XYZ_09", "abc-XYZ_09"},
		{"a.b", "a.b"},
		{".", "~002E"},
		{"..", "~002E~002E"},
		{"...", "..."},
		{".hidden", ".hidden"},
		{"a/b", "a~002Fb"},
		{"~", "~007E"},
		{"a b", "a~0020b"},
		{"\x00", "~0000"},
		{"metadata", "metadata"},
		{"tool/session~名", "tool~002Fsession~007E~540D"},
		{"é", "~00E9"},
		{"😀", "~D83D~DE00"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			got, err := EncodeSegment(tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("EncodeSegment(%q) = %q, want %q", tt.id, got, tt.want)
			}
			back, err := DecodeSegment(got)
			if err != nil {
				t.Fatal(err)
			}
			if back != tt.id {
				t.Fatalf("DecodeSegment(%q) = %q, want %q", got, back, tt.id)
			}
		})
	}
}

func TestEncodeBase(t *testing.T) {
	tests := []struct {
		id, want string
	}{
		{"abc", "abc"},
		{"a.b", "a~002Eb"},
		{".", "~002E"},
		{"..", "~002E~002E"},
		{"s.v4", "s~002Ev4"},
		{"metadata", "~006Detadata"},
		{"Metadata", "Metadata"},
		{"metadata2", "metadata2"},
		{"metadata.v2", "metadata~002Ev2"},
		{"tool/session~名", "tool~002Fsession~007E~540D"},
		{"👩‍💻", "~D83D~DC69~200D~D83D~DCBB"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			got, err := EncodeBase(tt.id)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("EncodeBase(%q) = %q, want %q", tt.id, got, tt.want)
			}
			back, err := DecodeBase(got)
			if err != nil {
				t.Fatal(err)
			}
			if back != tt.id {
				t.Fatalf("DecodeBase(%q) = %q, want %q", got, back, tt.id)
			}
			// A file name built from the base parses back to it, one way.
			for _, v := range []int{0, 3} {
				fn := convlog.FileName(got, v, convlog.Zstd)
				n, ok := convlog.ParseName(fn)
				if !ok || n.Base != got || n.Version != v {
					t.Fatalf("ParseName(%q) = %+v, %v", fn, n, ok)
				}
			}
		})
	}
}

func TestEncodeRefuses(t *testing.T) {
	for _, id := range []string{"", "a\xffb", "\xed\xa0\x80"} {
		if got, err := EncodeSegment(id); err == nil {
			t.Errorf("EncodeSegment(%q) = %q, want an error", id, got)
		}
		if got, err := EncodeBase(id); err == nil {
			t.Errorf("EncodeBase(%q) = %q, want an error", id, got)
		}
	}
	if _, err := EncodeSegment(""); err == nil || err.Error() != "cannot encode an empty path segment" {
		t.Errorf("empty id: %v", err)
	}
	if _, err := EncodeSegment("a\xffb"); err == nil || !strings.Contains(err.Error(), `"a\xffb"`) {
		t.Errorf("invalid UTF-8 error does not quote the id: %v", err)
	}
}

func TestDecodeNoncanonical(t *testing.T) {
	tests := []struct {
		name        string
		segment     bool // refused by DecodeSegment
		base        bool // refused by DecodeBase
		segmentWant string
	}{
		{name: "", segment: true, base: true},
		{name: "a~002fb", segment: true, base: true}, // lowercase hex
		{name: "~002e", segment: true, base: true},
		{name: "~0041", segment: true, base: true},    // 'A' must be literal
		{name: "~002D", segment: true, base: true},    // '-' must be literal
		{name: "a~002Eb", segment: true, base: false}, // '.' is literal in segments only
		{name: "a.b", segment: false, base: true, segmentWant: "a.b"},
		{name: ".", segment: true, base: true},
		{name: "..", segment: true, base: true},
		{name: "~", segment: true, base: true},
		{name: "~12", segment: true, base: true},
		{name: "~12G4", segment: true, base: true},
		{name: "a b", segment: true, base: true}, // should have been escaped
		{name: "a/b", segment: true, base: true},
		{name: "名", segment: true, base: true},
		{name: "~D800", segment: true, base: true},      // lone high surrogate
		{name: "~DE00~D83D", segment: true, base: true}, // surrogates in the wrong order
		{name: "~FFFD", segment: false, base: false, segmentWant: "\uFFFD"},
		{name: "metadata", segment: false, base: true, segmentWant: "metadata"},
		{name: "~006Detadata", segment: true, base: false},
		{name: "a\xffb", segment: true, base: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeSegment(tt.name)
			if tt.segment {
				if err == nil {
					t.Errorf("DecodeSegment(%q) = %q, want an error", tt.name, got)
				} else if want := `noncanonical directory name "`; !strings.HasPrefix(err.Error(), want) {
					t.Errorf("DecodeSegment error %q, want prefix %q", err, want)
				}
			} else if err != nil {
				t.Errorf("DecodeSegment(%q): %v", tt.name, err)
			} else if tt.segmentWant != "" && got != tt.segmentWant {
				t.Errorf("DecodeSegment(%q) = %q, want %q", tt.name, got, tt.segmentWant)
			}
			got, err = DecodeBase(tt.name)
			if tt.base && err == nil {
				t.Errorf("DecodeBase(%q) = %q, want an error", tt.name, got)
			}
			if !tt.base && err != nil {
				t.Errorf("DecodeBase(%q): %v", tt.name, err)
			}
		})
	}
}

func TestEncodingInjective(t *testing.T) {
	ids := []string{
		".", "..", "...", "~002E", "~", "~007E", "a.b", "a~002Eb", "a/b", "a~002Fb",
		"metadata", "~006Detadata", "Metadata", "meta data", "a b", "a\tb", "a\x00b",
		"名", "~540D", "😀", "\uFFFD", "é", "e\u0301", "A", "a", "-", "_", "tool/session~名",
	}
	seg := map[string]string{}
	base := map[string]string{}
	for _, id := range ids {
		s, err := EncodeSegment(id)
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := seg[s]; dup {
			t.Errorf("EncodeSegment(%q) = EncodeSegment(%q) = %q", id, prev, s)
		}
		seg[s] = id
		b, err := EncodeBase(id)
		if err != nil {
			t.Fatal(err)
		}
		if prev, dup := base[b]; dup {
			t.Errorf("EncodeBase(%q) = EncodeBase(%q) = %q", id, prev, b)
		}
		if b == ConversationLogBase {
			t.Errorf("EncodeBase(%q) is the conversation log base", id)
		}
		base[b] = id
	}
}

// checkName asserts that an encoded name is a safe single path component.
func checkName(t *testing.T, name string, dotLiteral bool) {
	t.Helper()
	if name == "" || name == "." || name == ".." {
		t.Fatalf("encoded name %q is not a file name", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' ||
			c == '-' || c == '_' || c == '~' || (dotLiteral && c == '.')
		if !ok {
			t.Fatalf("encoded name %q holds %q", name, c)
		}
	}
}

func FuzzSegmentRoundTrip(f *testing.F) {
	for _, s := range []string{"a", ".", "..", "a.b", "metadata", "tool/session~名", "😀", "~D800", "~002e", "\x00", "a\xffb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// The fast paths of literal bytes agree with the unit by unit ones,
		// which a non-literal suffix forces.
		if utf8.ValidString(s) {
			for _, dot := range []bool{false, true} {
				if got, want := escape(s, dot)+"~00E9", escape(s+"é", dot); got != want {
					t.Fatalf("escape(%q, %v)+~00E9 = %q, unit by unit %q", s, dot, got, want)
				}
			}
		}
		got, ok := unescape(s)
		if want, wok := unescape(s + "~00E9"); ok != wok || (ok && got+"é" != want) {
			t.Fatalf("unescape(%q) = %q, %v; unit by unit %q, %v", s, got, ok, want, wok)
		}
		// Any string as an id.
		if s != "" && utf8.ValidString(s) {
			seg, err := EncodeSegment(s)
			if err != nil {
				t.Fatal(err)
			}
			checkName(t, seg, true)
			if back, err := DecodeSegment(seg); err != nil || back != s {
				t.Fatalf("DecodeSegment(EncodeSegment(%q)) = %q, %v", s, back, err)
			}
			base, err := EncodeBase(s)
			if err != nil {
				t.Fatal(err)
			}
			checkName(t, base, false)
			if back, err := DecodeBase(base); err != nil || back != s {
				t.Fatalf("DecodeBase(EncodeBase(%q)) = %q, %v", s, back, err)
			}
		} else if _, err := EncodeSegment(s); err == nil {
			t.Fatalf("EncodeSegment(%q) accepted", s)
		}
		// Any string as a name: only canonical names decode.
		if id, err := DecodeSegment(s); err == nil {
			if enc, _ := EncodeSegment(id); enc != s {
				t.Fatalf("DecodeSegment(%q) = %q, which encodes to %q", s, id, enc)
			}
		}
		if id, err := DecodeBase(s); err == nil {
			if enc, _ := EncodeBase(id); enc != s {
				t.Fatalf("DecodeBase(%q) = %q, which encodes to %q", s, id, enc)
			}
		}
	})
}
