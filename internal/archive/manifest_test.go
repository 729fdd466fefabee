package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/store"
)

// testManifest is a manifest type as backup's and export's are: the
// header first, then its own fields.
type testManifest struct {
	ManifestHeader
	Note  string       `json:"note"`
	Files []testListed `json:"files"`
}

type testListed struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

func (m *testManifest) Listing() []Listed {
	return ListFiles(m.Files, func(f *testListed) Listed { return Listed{Name: f.Name, Size: f.Size, SHA256: f.SHA256} })
}

var testFormat = ManifestFormat{Name: "convkit-test", Version: 1, Kind: "test", MaxBytes: 1 << 20}

// writeWithManifest writes entries, then the manifest m lists them in
// (with the sums found), edited by edit; it returns the archive.
func writeWithManifest(t *testing.T, ents []entry, m *testManifest, edit func(*testManifest)) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, WriterOptions{ModTime: m.CreatedAt})
	for _, e := range ents {
		sum, err := writeBytes(w, e.name, e.kind, e.data)
		if err != nil {
			t.Fatal(err)
		}
		m.Files = append(m.Files, testListed{Name: e.name, Size: sum.Size, SHA256: sum.Hex()})
	}
	if edit != nil {
		edit(m)
	}
	if _, err := WriteManifest(w, m); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestManifestHeader: the header opens the manifest's JSON object, member
// by member as earlier builds wrote it, then the manifest's own fields;
// text is written as it is (no \u003c for <).
func TestManifestHeader(t *testing.T) {
	created := time.Date(2026, 12, 1, 9, 29, 56, 987654321, time.FixedZone("x", 3600))
	m := &testManifest{ManifestHeader: testFormat.Header("v9 <dev>", created), Note: "a & b"}
	m.Online, m.Holder = true, &store.Holder{PID: 7, Host: "h", Command: "c", StartedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	data := writeWithManifest(t, nil, m, nil)
	r, err := NewReader(bytes.NewReader(data), ReaderOptions{CheckName: func(string) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if h, err := r.Next(); err != nil || h.Name != ManifestName {
		t.Fatalf("%v %v", h, err)
	}
	var body bytes.Buffer
	body.ReadFrom(r)
	want := `{"format":"convkit-test","formatVersion":1,"tool":"convkit","toolVersion":"v9 <dev>","logFormatVersion":` +
		jsonInt(convlog.CurrentVersion) + `,"createdAt":"2026-12-01T08:29:56Z","online":true,` +
		`"holder":{"pid":7,"host":"h","command":"c","startedAt":"2026-01-02T03:04:05Z"},"note":"a & b","files":null}` + "\n"
	if body.String() != want {
		t.Fatalf("manifest\n%s\nwant\n%s", body.String(), want)
	}
	var back testManifest
	if err := testFormat.Decode(bytes.NewReader(body.Bytes()), ManifestName, &back); err != nil {
		t.Fatal(err)
	}
	if back.ManifestHeader.Holder == nil || *back.Holder != *m.Holder || back.ManifestHeader.CreatedAt != m.CreatedAt || back.Note != m.Note {
		t.Fatalf("decoded %+v", back)
	}
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestManifestDecodeRefuses: another format, a version this build does
// not read, a manifest too large or not JSON is refused, naming the
// manifest and saying what was expected.
func TestManifestDecodeRefuses(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{`{"format":"convkit-backup","formatVersion":1}`, `M: not a convkit test (manifest format "convkit-backup", want "convkit-test")`},
		{`{"format":"convkit-test","formatVersion":2}`, `M: test manifest format version 2; this build reads version 1`},
		{`{"format":"convkit-test","formatVersion":0}`, `M: test manifest format version 0; this build reads version 1`},
		{`{"format":"convkit-test","formatVersion":1,"note":"` + strings.Repeat("x", 1<<20) + `"}`, `M: the manifest is larger than 1048576 bytes`},
		{`{"format":`, `M: not a valid manifest: unexpected EOF`},
		{`[1]`, `M: not a valid manifest: json: cannot unmarshal array`},
	} {
		var m testManifest
		err := testFormat.Decode(strings.NewReader(c.body), "M", &m)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%.40s: %v, want %s", c.body, err, c.want)
		}
	}
	two := testFormat
	two.Version = 2
	var m testManifest
	if err := two.Decode(strings.NewReader(`{"format":"convkit-test","formatVersion":1}`), "M", &m); err != nil {
		t.Errorf("a build that writes version 2 reads version 1: %v", err)
	}
	if err := two.Decode(strings.NewReader(`{"format":"convkit-test","formatVersion":3}`), "M", &m); err == nil ||
		!strings.Contains(err.Error(), "this build reads versions 1 to 2") {
		t.Errorf("version 3: %v", err)
	}
}

// TestManifestVerify: the manifest must be the last entry and of this
// format; then every entry is compared with what the manifest lists, both
// ways, and each disagreement is reported in order.
func TestManifestVerify(t *testing.T) {
	ents := []entry{
		{"conversations/a/metadata.v4.jsonl", Text, []byte("a\n")},
		{"conversations/b/metadata.v4.jsonl", Text, []byte("b\n")},
		{"conversations/c/metadata.v4.jsonl", Text, []byte("c\n")},
	}
	fresh := func() *testManifest { return &testManifest{ManifestHeader: testFormat.Header("t", time.Unix(0, 0))} }
	extract := func(data []byte) (string, *ExtractedList) {
		dir := t.TempDir()
		got, err := Extract(context.Background(), bytes.NewReader(data), dir, ExtractOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return dir, got
	}
	verify := func(data []byte) ([]store.Item, error) {
		dir, got := extract(data)
		var m testManifest
		return testFormat.Verify("A.tar.zst", dir, got, &m)
	}

	mm, err := verify(writeWithManifest(t, ents, fresh(), nil))
	if err != nil || len(mm) != 0 {
		t.Fatalf("a good archive: %v %v", mm, err)
	}

	other := sha256.Sum256([]byte("other"))
	mm, err = verify(writeWithManifest(t, ents, fresh(), func(m *testManifest) {
		m.Files[0].SHA256 = hex.EncodeToString(other[:])                                              // entry 1: another SHA-256
		m.Files[1].Size = 5                                                                           // entry 2: another size
		m.Files = append(m.Files[:2], testListed{Name: "conversations/d/metadata.v4.jsonl", Size: 1}) // entry 3 unlisted, d missing
		m.Files = append(m.Files, m.Files[0])                                                         // a twice
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := []store.Item{
		{Kind: store.ItemMismatch, Path: "conversations/a/metadata.v4.jsonl", Reason: "listed twice in the manifest"},
		{Kind: store.ItemMismatch, Path: "conversations/a/metadata.v4.jsonl", Reason: "SHA-256 87428fc522803d31065e7bce3cf03fe475096631e5e07bbd7a0fde60c4cf25c7, the manifest says " + hex.EncodeToString(other[:])},
		{Kind: store.ItemMismatch, Path: "conversations/b/metadata.v4.jsonl", Reason: "size 2, the manifest says 5"},
		{Kind: store.ItemMismatch, Path: "conversations/c/metadata.v4.jsonl", Reason: "in the archive but not in the manifest"},
		{Kind: store.ItemMismatch, Path: "conversations/d/metadata.v4.jsonl", Reason: "in the manifest but not in the archive"},
	}
	if len(mm) != len(want) {
		t.Fatalf("got %v", mm)
	}
	for i := range want {
		if mm[i] != want[i] {
			t.Errorf("mismatch %d: %+v, want %+v", i, mm[i], want[i])
		}
	}

	// No manifest last: the archive is incomplete, or another tool's.
	var buf bytes.Buffer
	w := NewWriter(&buf, WriterOptions{})
	writeBytes(w, ents[0].name, Text, ents[0].data)
	w.Close()
	_, err = verify(buf.Bytes())
	var ae *Error
	if !errors.As(err, &ae) || err.Error() != "A.tar.zst: no MANIFEST.json as the last entry: an incomplete archive, or not a convkit test" {
		t.Fatalf("no manifest: %v", err)
	}

	// Another format's manifest: named by its entry and tar byte.
	data := writeWithManifest(t, ents, fresh(), func(m *testManifest) { m.Format = "convkit-export" })
	dir, got := extract(data)
	var m testManifest
	_, err = testFormat.Verify("A.tar.zst", dir, got, &m)
	last := got.Last()
	if !errors.As(err, &ae) || ae.Entry != 4 || ae.Name != ManifestName || ae.Offset != last.Offset || last.Offset == 0 ||
		!strings.HasSuffix(err.Error(), `: not a convkit test (manifest format "convkit-export", want "convkit-test")`) {
		t.Fatalf("foreign manifest: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, ManifestName)); err != nil {
		t.Fatal(err)
	}
}

// FuzzManifestDecode: Decode never panics, and what it accepts has this
// format's header, which a manifest written from it repeats.
func FuzzManifestDecode(f *testing.F) {
	f.Add([]byte(`{"format":"convkit-test","formatVersion":1,"tool":"convkit","toolVersion":"v","logFormatVersion":4,"createdAt":"2026-12-01T09:29:56Z","online":true,"holder":{"pid":7,"host":"h","command":"c","startedAt":"2026-01-02T03:04:05Z"},"note":"x","files":[{"name":"a","size":1,"sha256":"00"}]}`))
	f.Add([]byte(`{"format":"convkit-test","formatVersion":2}`))
	f.Add([]byte(`{"format":"convkit-backup","formatVersion":1}`))
	f.Add([]byte(`{"format":"convkit-test","formatVersion":1,"holder":null,"files":null}` + "\n" + `{}`))
	f.Add([]byte(`[{"format":"convkit-test"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m testManifest
		if err := testFormat.Decode(bytes.NewReader(data), ManifestName, &m); err != nil {
			if !strings.HasPrefix(err.Error(), ManifestName+": ") {
				t.Fatalf("the error does not name the manifest: %v", err)
			}
			return
		}
		if m.Format != testFormat.Name || m.FormatVersion < 1 || m.FormatVersion > testFormat.Version {
			t.Fatalf("accepted header %+v", m.ManifestHeader)
		}
		var buf bytes.Buffer
		w := NewWriter(&buf, WriterOptions{})
		if _, err := WriteManifest(w, &m); err != nil {
			t.Fatal(err)
		}
		w.Close()
		dir := t.TempDir()
		ents, err := Extract(context.Background(), bytes.NewReader(buf.Bytes()), dir, ExtractOptions{ReaderOptions: ReaderOptions{CheckName: func(string) error { return nil }}})
		if err != nil {
			t.Fatal(err)
		}
		var back testManifest
		if _, err := testFormat.Verify("A", dir, ents, &back); err != nil {
			t.Fatalf("a manifest written from an accepted one: %v", err)
		}
		if back.Format != m.Format || back.FormatVersion != m.FormatVersion || back.ToolVersion != m.ToolVersion ||
			!back.CreatedAt.Equal(m.CreatedAt) || (back.Holder == nil) != (m.Holder == nil) {
			t.Fatalf("header %+v, written back %+v", m.ManifestHeader, back.ManifestHeader)
		}
	})
}

// Decode reads a manifest of this format from r into m and checks it.
func (f ManifestFormat) Decode(r io.Reader, name string, m Manifest) error {
	if err := f.decode(r, m); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
