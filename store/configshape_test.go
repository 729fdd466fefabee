package store

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

func TestConfigLimits(t *testing.T) {
	dotted := func(n int) string { return strings.Repeat("a.", n-1) + "a = 1\n" }
	// Four lines before the case, one of them inside a multi-line string,
	// so the line named is the case's own.
	const lead = "# runtime\nprompt = \"\"\"\nhello\n\"\"\"\n"
	for _, c := range []struct {
		name, text string
		line       int // 0: accepted
	}{
		{"dotted key at the limit", dotted(maxRuntimeConfigDepth), 0},
		{"dotted key one deeper", dotted(maxRuntimeConfigDepth + 1), 5},
		{"twenty thousand dotted parts", dotted(20000), 5},
		{"inline tables", "a = " + strings.Repeat("{b = ", 20000) + "1" + strings.Repeat("}", 20000) + "\n", 5},
		{"inline tables at the limit", "a = " + strings.Repeat("{b = ", maxRuntimeConfigDepth-1) + "1" + strings.Repeat("}", maxRuntimeConfigDepth-1) + "\n", 0},
		{"arrays", "a = " + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + "\n", 5},
		{"arrays at the limit", "a = " + strings.Repeat("[", maxRuntimeConfigDepth-1) + "1" + strings.Repeat("]", maxRuntimeConfigDepth-1) + "\n", 0},
		{"array one deeper, over lines", "a = [\n[\n" + strings.Repeat("[", maxRuntimeConfigDepth-2) + "1" + strings.Repeat("]", maxRuntimeConfigDepth) + "\n", 7},
		{"table header", "[" + strings.Repeat("t.", maxRuntimeConfigDepth) + "t]\n", 5},
		{"array of tables header", "[[" + strings.Repeat("t.", maxRuntimeConfigDepth) + "t]]\n", 5},
		{"array of tables at the limit", "[[" + strings.Repeat("t.", maxRuntimeConfigDepth-1) + "t]]\n", 0},
		{"header and key together", "[" + strings.Repeat("t.", 19) + "t]\nok = 1\n" + strings.Repeat("k.", 12) + "k = 1\n", 7},
		{"inline table's dotted keys", "a = {b = {" + strings.Repeat("c.", maxRuntimeConfigDepth-2) + "c = 1}}\n", 5},
		{"key path at the limit", "[" + strings.Repeat("k", maxRuntimeConfigKeyBytes-1) + "]\nx = 1\n", 0},
		{"key path one longer", "[" + strings.Repeat("k", maxRuntimeConfigKeyBytes-1) + "]\nxy = 1\n", 6},
		{"quoted key path", `"` + strings.Repeat("q", maxRuntimeConfigKeyBytes) + `" = 1` + "\n", 5},
		{"dots in strings are no levels", "\"" + strings.Repeat(".", 100) + "\" = '" + strings.Repeat("[{", 100) + "'\n[\"x.y.z\"]\n", 0},
		{"too large", "x = \"" + strings.Repeat("a", maxRuntimeConfigBytes) + "\"\n", 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "config.toml")
			if err := os.WriteFile(p, []byte(lead+c.text), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := loadRuntimeConfig(p)
			if c.line == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var le *configLimitError
			if !errors.As(err, &le) || le.Line != c.line || !strings.HasPrefix(err.Error(), p+": line ") {
				t.Fatalf("got %v, want a configLimitError at line %d naming %s", err, c.line, p)
			}
		})
	}
}

// A configuration within the limits reads the same as before the check:
// the chat-reading table goes through the same door.
func TestDecodeConfigWithinLimits(t *testing.T) {
	var v map[string]any
	err := DecodeRuntimeConfig("c.toml", strings.NewReader("[agents.\"a.b\"]\nmodel = \"m\"\nx = [[1, 2], {y.z = 3}]\n"), &v)
	if err != nil {
		t.Fatal(err)
	}
	if got := treeDepth(v, 0); got != 6 {
		t.Fatalf("depth %d, want 6 (agents, a.b, x, its second element, y, z)", got)
	}
}

// treeDepth is the depth of the deepest value of a decoded document: the
// number of key parts and array indexes on its path, where a table of an
// array of tables ([[name]]) is at the array's level. md tells those
// arrays from arrays of inline tables; nil: there are none.
func treeDepth(v any, d int) int { return depthOf(nil, nil, v, d) }

func depthOf(md *toml.MetaData, path []string, v any, d int) int {
	deepest := d
	switch v := v.(type) {
	case map[string]any:
		for k, c := range v {
			deepest = max(deepest, depthOf(md, append(path[:len(path):len(path)], k), c, d+1))
		}
	case []map[string]any:
		step := 1
		if md != nil && md.Type(path...) == "ArrayHash" {
			step = 0
		}
		for _, c := range v {
			deepest = max(deepest, depthOf(md, path, c, d+step))
		}
	case []any:
		for _, c := range v {
			deepest = max(deepest, depthOf(md, path, c, d+1))
		}
	}
	return deepest
}

// FuzzConfigShape: the scan ends on any input, and whenever the decoder
// accepts a document, the scan measured exactly the decoded depth, so the
// limit it enforces is the decoder's.
func FuzzConfigShape(f *testing.F) {
	for _, s := range []string{
		"a.b.c = 1\n",
		"[x.y]\nz = {a = [1, {b.c = 2}]}\n",
		"[[t]]\n[[t.u]]\nv = 1\n",
		"s = \"\"\"a\n\\\"\"\"\"\"\"\nk = 'x'\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := shapeScanner{b: b, maxDepth: 1 << 30, maxKey: 1 << 30}
		if err := s.scan(); err != nil {
			t.Fatalf("refused without limits: %v", err)
		}
		var v map[string]any
		md, err := toml.Decode(string(b), &v)
		if err != nil {
			return
		}
		if got := depthOf(&md, nil, v, 0); got != s.deepest {
			t.Fatalf("%q: decoded depth %d, scanned %d", b, got, s.deepest)
		}
	})
}

func TestFuzzSeedCorpora(t *testing.T) {
	ents, err := os.ReadDir(filepath.Join("testdata", "fuzz", "FuzzConfigShape"))
	if err != nil || len(ents) < 8 {
		t.Fatalf("FuzzConfigShape: %d seed files, %v", len(ents), err)
	}
}
