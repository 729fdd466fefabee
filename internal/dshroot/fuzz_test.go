package dshroot

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzProjectDir: for any working directory, the project directory is one
// path segment of the layout's shape: "--<slug>--" (or _no-cwd), ASCII,
// at most 255 bytes, no separator or NUL, never "." or "..", the same
// every time; and a cwd of literal characters alone keeps them.
func FuzzProjectDir(f *testing.F) {
	for _, s := range []string{"", "/", "/home/dev/app", `C:\Users\a b`, "//a//b/", "/a-/b", "/x~y", "/名", "/😀", "\x00", "a\xffb", "-", "---x", strings.Repeat("é", 200)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, cwd string) {
		name := ProjectDir(cwd)
		if name != ProjectDir(cwd) {
			t.Fatal("not deterministic")
		}
		if !IsProjectDirName(name) {
			t.Fatalf("ProjectDir(%q) = %q: not a project directory name", cwd, name)
		}
		if cwd == "" {
			if name != NoCwdDir {
				t.Fatalf("no cwd gives %q", name)
			}
			return
		}
		if len(name) > 255 || strings.ContainsAny(name, "/\\:\x00") || name == "." || name == ".." {
			t.Fatalf("ProjectDir(%q) = %q: not one path segment", cwd, name)
		}
		for i := 0; i < len(name); i++ {
			if c := name[i]; c >= utf8.RuneSelf || !(c == '-' || c == '.' || c == '_' || c == '~' ||
				'0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
				t.Fatalf("ProjectDir(%q) = %q holds %q", cwd, name, c)
			}
		}
		slug := strings.TrimSuffix(strings.TrimPrefix(name, "--"), "--")
		if strings.HasPrefix(slug, "-") || slug == "" {
			t.Fatalf("ProjectDir(%q) = %q: a slug that starts with '-' or is empty", cwd, name)
		}
		literal := strings.TrimLeft(cwd, "-")
		if literal != "" && len(literal) <= maxSlugUnits && strings.Trim(literal, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == "" && slug != literal {
			t.Fatalf("ProjectDir(%q) = %q: literal characters changed", cwd, name)
		}
	})
}

// FuzzGenerationName: a name ParseGeneration accepts is the canonical name
// of what it parsed to, and names of other bases or non-canonical versions
// are refused.
func FuzzGenerationName(f *testing.F) {
	for _, s := range []string{"session.jsonl", "session.v4.jsonl.zstd", "session.v12.jsonl.zst", "session.v0.jsonl", "session.v01.jsonl",
		"session.V1.jsonl", "session.v1.backup.jsonl", "session.v9007199254740992.jsonl", "session.lock", "x.v1.jsonl", "session.v1.jsonl.zstd.tmp"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		n, ok := ParseGeneration(name)
		if !ok {
			return
		}
		if got := GenerationName(n.Version, n.Compression, n.Suffix); got != name {
			t.Fatalf("ParseGeneration(%q) = %+v, whose name is %q", name, n, got)
		}
		if n.Version < 0 || n.Version > 1<<53-1 {
			t.Fatalf("%q: version %d", name, n.Version)
		}
	})
}
