package convlog

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Name
	}{
		{"s.jsonl", Name{Base: "s", Version: 0, Compression: Plain}},
		{"s.jsonl.zst", Name{Base: "s", Version: 0, Compression: Zstd, Suffix: ZstSuffix}},
		{"s.v1.jsonl", Name{Base: "s", Version: 1, Compression: Plain}},
		{"s.v4.jsonl", Name{Base: "s", Version: 4, Compression: Plain}},
		{"s.v4.jsonl.zst", Name{Base: "s", Version: 4, Compression: Zstd, Suffix: ZstSuffix}},
		{"s.v12.jsonl.zstd", Name{Base: "s", Version: 12, Compression: Zstd, Suffix: ZstdSuffix}},
		{"metadata.v4.jsonl.zst", Name{Base: "metadata", Version: 4, Compression: Zstd, Suffix: ZstSuffix}},
		{"tool~002Fsession~007E~540D.v3.jsonl", Name{Base: "tool~002Fsession~007E~540D", Version: 3}},
		{"s.v9007199254740991.jsonl", Name{Base: "s", Version: 9007199254740991}},
	} {
		got, ok := ParseName(tc.name)
		if !ok || got != tc.want {
			t.Errorf("ParseName(%q) = %+v, %v; want %+v", tc.name, got, ok, tc.want)
			continue
		}
		if s := got.String(); s != tc.name {
			t.Errorf("ParseName(%q).String() = %q", tc.name, s)
		}
		if tc.want.Suffix != ZstdSuffix {
			if s := FileName(got.Base, got.Version, got.Compression); s != tc.name {
				t.Errorf("FileName(%q, %d, %v) = %q, want %q", got.Base, got.Version, got.Compression, s, tc.name)
			}
		}
	}
	for _, name := range []string{
		"s.v0.jsonl", "s.v01.jsonl", "s.V1.jsonl", "s.v1.backup.jsonl", "s.1.jsonl", "s.v.jsonl", "s.v-1.jsonl",
		"s.v+1.jsonl", "s.v1e3.jsonl", "s.v 1.jsonl",
		"s.v9007199254740992.jsonl", "s.v99999999999999999999.jsonl",
		"s.migration.deadbeef.tmp.jsonl", "s.v4.jsonl.tmp", ".s.v4.jsonl.zst.123456", ".jsonl", ".v4.jsonl", ".jsonl.zst",
		"s.v4.jsonl.gz", "s.v4.json", "s.v4.jsonl.zst.zst", "s.v4.JSONL", "s", "", "s.lock", "s..jsonl", "s.v4..jsonl",
	} {
		if got, ok := ParseName(name); ok {
			t.Errorf("ParseName(%q) = %+v, want refused", name, got)
		}
	}
}

func TestFileNameNew(t *testing.T) {
	if got := FileName("s", 4, Zstd); got != "s.v4.jsonl.zst" {
		t.Errorf("FileName zstd = %q", got)
	}
	if got := FileName("s", 4, Plain); got != "s.v4.jsonl" {
		t.Errorf("FileName plain = %q", got)
	}
	if got := FileName("s", 0, Plain); got != "s.jsonl" {
		t.Errorf("FileName v0 = %q", got)
	}
}

// TestOpenTakesVersionFromName: Open takes the version from a generation
// name and from the header for other names.
func TestOpenTakesVersionFromName(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"s1.v4.jsonl", true},
		{"s1.log", true},
		{"s1.v4.jsonl.backup", true},
		{"s1.jsonl", false}, // v0 by name, v4 by header
		{"s1.v2.jsonl", false},
	} {
		path := writeFileT(t, dir, tc.name, plainLog(hdrV4, lTurnStart(0)))
		_, _, _, err := readLogStrict(path, ReaderOptions{})
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

func writeFileT(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
