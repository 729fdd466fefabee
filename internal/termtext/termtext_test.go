package termtext

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text, ünïcödé, 中文, emoji 🙂", "plain text, ünïcödé, 中文, emoji 🙂"},
		{"", ""},
		{"a\x1b]52;c;aGVsbG8=\x07b", `a\x1b]52;c;aGVsbG8=\x07b`}, // OSC 52: set the clipboard
		{"\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},                       // clear the screen
		{"over\rwrite", `over\rwrite`},
		{"tab\tnew\nline", `tab\tnew\nline`},
		{"nul\x00del\x7f", `nul\x00del\x7f`},
		{"c1 \u0085 \u009b csi", `c1 \u0085 \u009b csi`},
		{"bidi \u202e evil \u202c", `bidi \u202e evil \u202c`},
		{"\u202a\u202b\u202d \u2066\u2067\u2068\u2069 \u200e\u200f\u061c", `\u202a\u202b\u202d \u2066\u2067\u2068\u2069 \u200e\u200f\u061c`},
		{"line\u2028para\u2029", `line\u2028para\u2029`},
		{"bad \xff\xfe utf-8 \xe4\xb8", `bad \xff\xfe utf-8 \xe4\xb8`},
		{`back\slash \x1b stays`, `back\slash \x1b stays`},
	}
	for _, tt := range tests {
		got := Escape(tt.in)
		if got != tt.want {
			t.Errorf("Escape(%q) = %q, want %q", tt.in, got, tt.want)
		}
		// Nothing a terminal acts on is left.
		for _, r := range got {
			if needsEscape(r) {
				t.Errorf("Escape(%q) = %q keeps %U", tt.in, got, r)
			}
		}
		if !utf8.ValidString(got) {
			t.Errorf("Escape(%q) = %q is not valid UTF-8", tt.in, got)
		}
	}
}

func TestWidthAndClip(t *testing.T) {
	tests := []struct {
		s     string
		width int
	}{
		{"abc", 3}, {"中文字", 6}, {"é", 1}, {"e\u0301", 1}, {"🙂", 2}, {"ｆｕｌｌ", 8}, {"", 0},
	}
	for _, tt := range tests {
		if got := columns(tt.s); got != tt.width {
			t.Errorf("columns(%q) = %d, want %d", tt.s, got, tt.width)
		}
	}
	if got := clip("修复登录页面的重定向问题", 9); got != "修复登录…" || columns(got) > 9 {
		t.Errorf("clip = %q (width %d)", got, columns(got))
	}
	if got := clip("short", 9); got != "short" {
		t.Errorf("clip(short) = %q", got)
	}
	if got := clip("e\u0301e\u0301e\u0301e\u0301", 3); got != "e\u0301e\u0301…" {
		t.Errorf("Clip cuts inside a character: %q", got)
	}
}

func TestClipEscaped(t *testing.T) {
	for _, s := range []string{"", "short", "exactly ten", "修复登录页面的重定向问题修复登录页面", "\x1b]52;c;aGk=\x07 clipboard",
		"e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301", "bad \xff\xfe bytes and \u202e", strings.Repeat("x", 1<<20)} {
		for _, w := range []int{1, 2, 9, 10, 11, 40} {
			if got, want := ClipEscaped(s, w), clip(Escape(s), w); got != want {
				t.Errorf("ClipEscaped(%.20q, %d) = %q, want %q", s, w, got, want)
			}
		}
	}
	// What shows nothing is cut too, the ellipsis kept within the width.
	for _, s := range []string{"ab" + strings.Repeat("\u200b", 1<<20), "ab" + strings.Repeat("\u0301", 1<<20), "abcdefghij" + strings.Repeat("\u200b", 1<<20)} {
		got := ClipEscaped(s, 10)
		if !strings.HasSuffix(got, "…") || columns(got) > 10 || len(got) > 16*10+64+len("…") {
			t.Errorf("ClipEscaped(%.20q…, 10) = %.40q (%d bytes, width %d)", s, got, len(got), columns(got))
		}
	}
}

// TestTableAlignsByDisplayWidth: the column after a CJK title starts at the
// same terminal column as after an ASCII one.
func TestTableAlignsByDisplayWidth(t *testing.T) {
	var buf bytes.Buffer
	tb := NewTable(&buf, "ID", "TITLE", "TURNS")
	tb.Row("a", "Fix the login redirect", "2")
	tb.Row("b", "修复登录页面的重定向问题", "3")
	tb.Row("c", "Ｆｕｌｌ width", "4")
	tb.Row("d", "café e\u0301", "5")
	if err := tb.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("table:\n%s", buf.String())
	}
	col := -1
	for _, l := range lines {
		i := strings.LastIndex(l, "  ")
		c := columns(l[:i+2])
		if col >= 0 && c != col {
			t.Errorf("the last column starts at %d in %q, at %d above:\n%s", c, l, col, buf.String())
		}
		col = c
	}
	if strings.HasSuffix(lines[1], " ") {
		t.Errorf("trailing spaces in %q", lines[1])
	}
}

func TestWriterEscapesEachLine(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.Write([]byte("UNREADABLE conversations/\x1b[31mx: bad\n"))
	w.Write([]byte("ok\n"))
	w.Write([]byte("one\x1b\ntwo\r\n"))
	if got, want := buf.String(), "UNREADABLE conversations/\\x1b[31mx: bad\nok\none\\x1b\ntwo\\r\n"; got != want {
		t.Errorf("Writer wrote %q, want %q", got, want)
	}
}

func FuzzEscape(f *testing.F) {
	for _, s := range []string{"a\x1b]52;c;x\x07", "\u202e", "\xff", "中文", "\r\n\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := Escape(s)
		if !utf8.ValidString(got) {
			t.Fatalf("Escape(%q) = %q: invalid UTF-8", s, got)
		}
		for _, r := range got {
			if needsEscape(r) {
				t.Fatalf("Escape(%q) = %q keeps %U", s, got, r)
			}
		}
		if Escape(got) != got {
			t.Fatalf("Escape is not idempotent on %q", got)
		}
	})
}
