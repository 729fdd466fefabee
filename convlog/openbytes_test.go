package convlog

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNewReader of Bytes reads logs held in memory as Open reads their files: the
// version and compression from the name, the same events and stats, the
// same refusal of a header that names another log.
func TestReadBytes(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"s1.v4.jsonl", "s1.v4.jsonl.zst"} {
		comp := Plain
		if filepath.Ext(name) == ".zst" {
			comp = Zstd
		}
		path := writeLog(t, dir, name, comp, sampleTurn(1), sampleTurn(2))
		data := mustRead(t, path)
		for _, want := range []string{"s1", "s2"} {
			opts := ReaderOptions{WantID: want}
			evs, st, _, err := readLogStrict(path, opts)
			r, herr := NewReader(Bytes(data), int64(len(data)), path, opts)
			var hEvs []Event
			var hSt Stats
			if herr == nil {
				hEvs, hSt, herr = drain(r)
				r.Close()
			}
			if (err == nil) != (herr == nil) || err != nil && err.Error() != herr.Error() {
				t.Fatalf("%s, want %s: Open %v; NewReader of Bytes %v", name, want, err, herr)
			}
			if len(hEvs) != len(evs) || hSt != st {
				t.Fatalf("%s: NewReader of Bytes %d events %+v; Open %d events %+v", name, len(hEvs), hSt, len(evs), st)
			}
			if err == nil && (len(evs) != 14 || r.Compression() != comp) {
				t.Fatalf("%s: %d events, %v", name, len(evs), r.Compression())
			}
		}
	}
	// A v3 name is read as v3 from the name, as Open reads it.
	v3 := filepath.Join(dir, "s1.v3.jsonl")
	if err := os.WriteFile(v3, mustRead(t, filepath.Join(dir, "s1.v4.jsonl")), 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, _, err := readLogStrict(v3, ReaderOptions{})
	_, herr := NewReader(Bytes(mustRead(t, v3)), int64(len(mustRead(t, v3))), v3, ReaderOptions{})
	if err == nil || herr == nil || err.Error() != herr.Error() {
		t.Fatalf("a v4 header under a v3 name: Open %v; NewReader of Bytes %v", err, herr)
	}
}
