package transfer

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/convkit/convkit/fixtures"
	"github.com/convkit/convkit/internal/archive"
)

// entry is one tar entry of a hand-made archive.
type entry struct {
	hdr  tar.Header
	body []byte
	// zeros, when set, is the body: that many zero bytes, streamed.
	zeros int64
}

func reg(name string, body []byte) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(body)), Mode: 0o600}, body: body}
}

// makeArchive writes entries as tar inside zstd, the way a hostile tool
// would: archive/tar and klauspost's zstd directly, no checks. trailing
// zero bytes follow the tar stream inside the zstd stream.
func makeArchive(t *testing.T, ents []entry, trailing int64) []byte {
	t.Helper()
	var out bytes.Buffer
	zw, err := zstd.NewWriter(&out, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(zw)
	zero := make([]byte, 1<<20)
	for _, e := range ents {
		h := e.hdr
		h.ModTime = time.Unix(0, 0)
		if e.zeros > 0 {
			h.Size = e.zeros
		}
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if e.zeros > 0 {
			for n := e.zeros; n > 0; n -= int64(len(zero)) {
				if _, err := tw.Write(zero[:min(n, int64(len(zero)))]); err != nil {
					t.Fatal(err)
				}
			}
		} else if len(e.body) > 0 {
			if _, err := tw.Write(e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	for n := trailing; n > 0; n -= int64(len(zero)) {
		zw.Write(zero[:min(n, int64(len(zero)))])
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// claimWindow rewrites the first zstd frame's header to claim a window of
// 2^(10+exp) bytes. The data stays decodable: a larger window than needed
// changes nothing but what a decoder would allocate.
func claimWindow(t *testing.T, d []byte, exp byte) []byte {
	t.Helper()
	fhd := d[4]
	if fhd&0x20 == 0 { // a window descriptor is there already
		out := append([]byte(nil), d...)
		out[5] = exp << 3
		return out
	}
	rest := d[5:]
	if fhd>>6 == 0 {
		rest = rest[1:] // the one-byte content size exists only in single-segment frames
	}
	out := append([]byte(nil), d[:4]...)
	out = append(out, fhd&^0x20, exp<<3)
	return append(out, rest...)
}

// readArchive returns the entries of a real export.
func readArchive(t *testing.T, p string) []entry {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	var out []entry
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{hdr: *h, body: body})
	}
}

// rewriteManifest makes the manifest agree with changed entries (size,
// SHA-256, committed), so that only the deeper checks can refuse them.
func rewriteManifest(t *testing.T, ents []entry) []entry {
	t.Helper()
	last := &ents[len(ents)-1]
	var m Manifest
	if err := json.Unmarshal(last.body, &m); err != nil {
		t.Fatal(err)
	}
	for i := range m.Files {
		for _, e := range ents {
			if e.hdr.Name == m.Files[i].Name {
				sum := sha256.Sum256(e.body)
				m.Files[i].Size, m.Files[i].Committed = int64(len(e.body)), int64(len(e.body))
				m.Files[i].SHA256 = hex.EncodeToString(sum[:])
			}
		}
	}
	data, err := json.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	last.body = data
	last.hdr.Size = int64(len(data))
	return ents
}

// TestHostileArchives: every archive here is refused before the store is
// looked at, and nothing is written anywhere: the existing store is
// byte-identical, a new data directory is not created, nothing appears
// beside them.
func TestHostileArchives(t *testing.T) {
	a, rep := fixtureStore(t, 7)
	basic := rep.Find(fixtures.CaseBasic).ID
	good, _ := exportTo(t, a, basic)
	goodEnts := readArchive(t, good)
	if goodEnts[len(goodEnts)-1].hdr.Name != archive.ManifestName {
		t.Fatal("the export does not end with its manifest")
	}
	var plainLog int // a plain log entry of the export
	for i, e := range goodEnts {
		if strings.HasSuffix(e.hdr.Name, ".jsonl") && len(e.body) > 100 {
			plainLog = i
		}
	}
	clone := func() []entry {
		out := make([]entry, len(goodEnts))
		for i, e := range goodEnts {
			out[i] = e
			out[i].body = append([]byte(nil), e.body...)
		}
		return out
	}
	log := "conversations/" + filepath.Base(filepath.Dir(filepath.Join("x", goodEnts[0].hdr.Name))) + "/"

	cases := []struct {
		name   string
		data   func() []byte
		limits archive.Limits
		want   string
	}{
		{"absolute path", func() []byte {
			return makeArchive(t, []entry{reg("/etc/cron.d/evil", []byte("* * * * * root true\n"))}, 0)
		}, archive.Limits{}, "absolute path"},
		{"dot-dot", func() []byte {
			return makeArchive(t, []entry{reg("conversations/../../../../escape.jsonl", []byte("x\n"))}, 0)
		}, archive.Limits{}, `".."`},
		{"symlink", func() []byte {
			return makeArchive(t, []entry{{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: log + "metadata.v4.jsonl", Linkname: "/etc/passwd"}}}, 0)
		}, archive.Limits{}, "symbolic link"},
		{"hard link", func() []byte {
			return makeArchive(t, []entry{{hdr: tar.Header{Typeflag: tar.TypeLink, Name: log + "metadata.v4.jsonl", Linkname: "/etc/passwd"}}}, 0)
		}, archive.Limits{}, "hard link"},
		{"device", func() []byte {
			return makeArchive(t, []entry{{hdr: tar.Header{Typeflag: tar.TypeChar, Name: log + "metadata.v4.jsonl", Devmajor: 1, Devminor: 3, Mode: 0o666}}}, 0)
		}, archive.Limits{}, "character device"},
		{"fifo", func() []byte {
			return makeArchive(t, []entry{{hdr: tar.Header{Typeflag: tar.TypeFifo, Name: log + "metadata.v4.jsonl", Mode: 0o600}}}, 0)
		}, archive.Limits{}, "FIFO"},
		{"outside the layout", func() []byte {
			return makeArchive(t, []entry{reg("notes.txt", []byte("hi\n"))}, 0)
		}, archive.Limits{}, "outside the store layout"},
		{"not a log in a conversation", func() []byte {
			return makeArchive(t, []entry{reg(log+"run.sh", []byte("#!/bin/sh\n"))}, 0)
		}, archive.Limits{}, "not a canonical log file name"},
		{"an index in an export", func() []byte {
			return makeArchive(t, []entry{reg("metadata.db", []byte("SQLite format 3\x00"))}, 0)
		}, archive.Limits{}, "outside the export layout"},
		{"entry over its limit", func() []byte {
			return makeArchive(t, []entry{{hdr: tar.Header{Typeflag: tar.TypeReg, Name: log + "metadata.v4.jsonl", Mode: 0o600}, zeros: 2 << 20}}, 0)
		}, archive.Limits{MaxEntryBytes: 1 << 20}, "exceeds the limit"},
		{"zstd bomb", func() []byte {
			// 256 MiB of zeros: a few kilobytes compressed.
			return makeArchive(t, []entry{{hdr: tar.Header{Typeflag: tar.TypeReg, Name: log + "metadata.v4.jsonl", Mode: 0o600}, zeros: 256 << 20}}, 0)
		}, archive.Limits{MaxTotalBytes: 16 << 20}, "the entries exceed the limit of 16777216 bytes in all"},
		{"bomb after the tar trailer", func() []byte {
			return makeArchive(t, goodEnts, 64<<20)
		}, archive.Limits{}, "after the end of the tar stream"},
		{"window bomb", func() []byte {
			// The frame header claims a 1 GiB window (descriptor byte:
			// exponent 20, mantissa 0): a decoder that believed it would
			// allocate that much.
			return claimWindow(t, makeArchive(t, goodEnts, 0), 20)
		}, archive.Limits{}, "window"},
		{"not zstd", func() []byte { return []byte("PK\x03\x04 not an archive") }, archive.Limits{}, ""},
		{"truncated", func() []byte {
			d := makeArchive(t, goodEnts, 0)
			return d[:len(d)/2]
		}, archive.Limits{}, ""},
		{"no manifest", func() []byte {
			return makeArchive(t, goodEnts[:len(goodEnts)-1], 0)
		}, archive.Limits{}, "no MANIFEST.json"},
		{"checksum mismatch", func() []byte {
			ents := clone()
			ents[plainLog].body[len(ents[plainLog].body)/2] ^= 0x20
			return makeArchive(t, ents, 0)
		}, archive.Limits{}, "SHA-256"},
		{"torn log", func() []byte {
			ents := clone()
			e := &ents[plainLog]
			e.body = e.body[:len(e.body)-1] // the last line loses its newline
			e.hdr.Size = int64(len(e.body))
			return makeArchive(t, rewriteManifest(t, ents), 0)
		}, archive.Limits{}, "torn tail"},
		{"fewer events than the manifest says", func() []byte {
			ents := clone()
			e := &ents[plainLog]
			// The last line goes whole: the log still reads cleanly.
			e.body = e.body[:bytes.LastIndexByte(e.body[:len(e.body)-1], '\n')+1]
			e.hdr.Size = int64(len(e.body))
			return makeArchive(t, rewriteManifest(t, ents), 0)
		}, archive.Limits{}, "events, the manifest says"},
		{"corrupt log", func() []byte {
			ents := clone()
			e := &ents[plainLog]
			i := bytes.IndexByte(e.body, '\n') + 5 // inside the first event
			e.body[i] = 0
			return makeArchive(t, rewriteManifest(t, ents), 0)
		}, archive.Limits{}, "line 2"},
		{"log not in the manifest", func() []byte {
			ents := clone()
			extra := ents[plainLog]
			extra.hdr.Name = strings.Replace(extra.hdr.Name, ".v4.jsonl", ".v3.jsonl", 1)
			ents = append(ents[:len(ents)-1], extra, ents[len(ents)-1])
			return makeArchive(t, ents, 0)
		}, archive.Limits{}, "not in the manifest"},
		{"duplicate entry", func() []byte {
			ents := clone()
			ents = append(ents[:len(ents)-1], ents[plainLog], ents[len(ents)-1])
			return makeArchive(t, ents, 0)
		}, archive.Limits{}, "duplicate"},
		{"foreign manifest", func() []byte {
			ents := clone()
			last := &ents[len(ents)-1]
			last.body = bytes.Replace(last.body, []byte(manifestFormat.Name), []byte("convkit-backup"), 1)
			last.hdr.Size = int64(len(last.body))
			return makeArchive(t, ents, 0)
		}, archive.Limits{}, "not a convkit export"},
	}
	root := t.TempDir()
	b := filepath.Join(root, "B")
	copyTree(t, a, b)
	before := treeHash(t, root)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := c.data()
			for _, target := range []string{b, filepath.Join(root, "new")} {
				res, err := importBytes(t, data, target, ImportOptions{Limits: c.limits})
				if err == nil {
					t.Fatalf("%s: accepted: %+v", target, res.Counts)
				}
				if !strings.Contains(err.Error(), c.want) {
					t.Fatalf("%s: error %q does not say %q", target, err, c.want)
				}
				var ve *VerifyError
				if !errors.As(err, &ve) && !errors.Is(err, archive.ErrRefused) {
					t.Fatalf("%s: not a verification error: %T %v", target, err, err)
				}
				if h := treeHash(t, root); h != before {
					t.Fatalf("%s: something was written:\n%s", target, listTree(root))
				}
			}
		})
	}
	// The good archive itself imports.
	if _, err := importBytes(t, makeArchive(t, goodEnts, 0), filepath.Join(root, "new"), ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(root, "new", "conversations")); errors.Is(err, fs.ErrNotExist) {
		t.Fatal("nothing imported")
	}
}

// stagingWatch reads an archive held in memory, as a file is read, and
// notes whether an import's staging directory was in dataDir at any read.
type stagingWatch struct {
	*bytes.Reader
	dataDir string
	staged  bool
}

func (w *stagingWatch) Read(p []byte) (int, error) {
	if ents, _ := os.ReadDir(w.dataDir); len(ents) > 0 {
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".conversations.import-") {
				w.staged = true
			}
		}
	}
	return w.Reader.Read(p)
}

// TestImportRefusesEntryLimitUnstaged: an import, a dry run or not, of an
// archive it can read twice (a file) refuses one over the entry limit at
// that limit, having made no staging directory and no file of an entry;
// read from a pipe, it refuses it at the same entry after extracting.
func TestImportRefusesEntryLimitUnstaged(t *testing.T) {
	ents := make([]entry, 201)
	for i := range ents {
		ents[i] = reg(fmt.Sprintf("conversations/c/s%04d.v4.jsonl", i), nil)
	}
	data := makeArchive(t, ents, 0)
	dataDir := t.TempDir()
	const want = `many.tar.zst: entry 201 "conversations/c/s0200.v4.jsonl" (tar byte 102400): more than 200 entries`
	for _, dry := range []bool{true, false} {
		opts := ImportOptions{Archive: "many.tar.zst", DryRun: dry, Limits: archive.Limits{MaxEntries: 200}}
		w := &stagingWatch{Reader: bytes.NewReader(data), dataDir: dataDir}
		_, err := importInto(context.Background(), w, dataDir, opts)
		var ve *VerifyError
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), want) {
			t.Fatalf("dry run %v: %v, want a *VerifyError saying %q", dry, err, want)
		}
		if w.staged {
			t.Errorf("dry run %v: a staging directory was made before the archive was refused", dry)
		}
		_, err = importInto(context.Background(), io.MultiReader(bytes.NewReader(data)), dataDir, opts)
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), want) {
			t.Fatalf("dry run %v, from a pipe: %v", dry, err)
		}
	}
	if ents, _ := os.ReadDir(dataDir); len(ents) != 0 {
		t.Fatalf("left in the data directory: %v", ents)
	}
}
