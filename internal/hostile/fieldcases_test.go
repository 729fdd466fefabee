package hostile

import (
	"path/filepath"
	"strings"
)

// fieldCases are inputs found by trying convkit as an operator and an
// attacker would: a configuration that nests without end, ...
func fieldCases() []hcase {
	return []hcase{
		{
			name: "config.toml of 20000 dotted key parts: list warns naming its line, lists",
			setup: func(f *fx) []string {
				f.vars["config"] = f.write(filepath.Join(f.data, "config.toml"), []byte("# runtime\n"+strings.Repeat("a.", 19999)+"a = 1\n"))
				return []string{"list", "--all"}
			},
			code:   0,
			stderr: []string{"convkit: warning: runtime configuration: {config}: line 2: nested deeper than 32 levels"},
			stdout: []string{"{basic.id}", "{zstd.id}"},
		},
		{
			name: "config.toml of 20000 nested inline tables: reindex refuses it naming its line",
			setup: func(f *fx) []string {
				f.vars["config"] = f.write(filepath.Join(f.data, "config.toml"), []byte("a = "+strings.Repeat("{b = ", 20000)+"1"+strings.Repeat("}", 20000)+"\n"))
				return []string{"reindex"}
			},
			code:   1,
			stderr: []string{"convkit: error: runtime configuration: {config}: line 1: nested deeper than 32 levels"},
			allow:  []string{lockRecord},
		},
	}
}
