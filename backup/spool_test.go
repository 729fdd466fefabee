package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/durable"
	"github.com/convkit/convkit/store"
)

// TestStreamedManifestIsTheWholeEncoding: the manifest put together from
// its spools is byte for byte the encoding of the whole Manifest, as
// builds that held it in memory wrote it (one line of compact JSON, <, >
// and & as they are), so every reader of the format reads it as before;
// its lists are those of the archive, and ToDir leaves no spool behind.
func TestStreamedManifestIsTheWholeEncoding(t *testing.T) {
	dataDir, _ := generate(t, 23, 30, false)
	for i, strict := range []bool{false, true, false, true} {
		opts := Options{Strict: strict}
		if i >= 2 {
			opts.spoolMemory = 300 // the lists go to their files
		}
		dir := t.TempDir()
		r, err := toDir(context.Background(), dataDir, dir, DirOptions{Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if e.Name() != filepath.Base(r.Archive) && e.Name() != filepath.Base(infoPath(r.Archive)) {
				t.Errorf("strict %v: %s left in the backup directory", strict, e.Name())
			}
		}
		f, err := os.Open(r.Archive)
		if err != nil {
			t.Fatal(err)
		}
		x := t.TempDir()
		extracted, err := archive.Extract(context.Background(), f, x, archive.ExtractOptions{})
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(filepath.Join(x, archive.ManifestName))
		if err != nil {
			t.Fatal(err)
		}
		m, err := ReadManifest(filepath.Join(x, archive.ManifestName))
		if err != nil {
			t.Fatal(err)
		}
		var whole bytes.Buffer
		enc := json.NewEncoder(&whole)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw, whole.Bytes()) {
			t.Fatalf("strict %v: the manifest (%d bytes) is not the encoding of what it holds (%d bytes)", strict, len(raw), whole.Len())
		}
		if len(m.Files) != extracted.Len()-1 || len(m.Conversations) < 30 || m.Counts.Files != len(m.Files) ||
			m.Counts.Conversations != len(m.Conversations) {
			t.Fatalf("strict %v: %d files listed (counts %d), %d entries; %d conversations (counts %d)", strict,
				len(m.Files), m.Counts.Files, extracted.Len(), len(m.Conversations), m.Counts.Conversations)
		}
		if mm, err := archive.CheckListing(extracted, m.Listing()); len(mm) > 0 || err != nil {
			t.Fatalf("strict %v: %+v %v", strict, mm, err)
		}
		if strict && m.Counts.Indexed == 0 {
			t.Fatalf("strict: no conversation expected indexed: %+v", m.Counts)
		}
	}
}

// ReadManifest reads and checks a manifest file (never through a symbolic
// link).
func ReadManifest(path string) (*Manifest, error) {
	f, err := durable.OpenRegular(path, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var m Manifest
	if err := json.NewDecoder(f).Decode(&m); err != nil {
		return nil, err
	}
	if err := m.resolve(path); err != nil {
		return nil, err
	}
	for _, f := range m.Files {
		if f.Log != nil {
			_, f.Log.Session = logOf(f.Name)
		}
	}
	return &m, nil
}

// logOf is the conversation and session an entry name holds a log of.
func logOf(name string) (conversation, session string) {
	parts := strings.Split(name, "/")
	conversation, _ = store.DecodeSegment(parts[1])
	if n, ok := convlog.ParseName(parts[2]); ok && n.Base != store.ConversationLogBase {
		session, _ = store.DecodeBase(n.Base)
	}
	return conversation, session
}
