package hostile

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/convkit/convkit/store"
)

// evil writes a hand-made archive to root/evil.tar.zst: a good log entry
// first, then bad (so the refusal is of entry 2, at a tar byte past 0).
func (f *fx) evil(bad tarEntry) string {
	f.t.Helper()
	good := regEntry("conversations/"+filepath.Base(f.vars["basic"])+"/metadata.v4.jsonl", []byte("{}\n"))
	p := f.write(filepath.Join(f.root, "evil.tar.zst"), tarZst(f.t, []tarEntry{good, bad}))
	f.vars["archive"] = p
	return p
}

// rewrite writes entries as root/name and records it as {archive}.
func (f *fx) rewrite(name string, ents []tarEntry) string {
	p := f.write(filepath.Join(f.root, name), tarZst(f.t, ents))
	f.vars["archive"] = p
	return p
}

// rename renames a conversation through the store API (one appended event).
func rename(f *fx, dataDir, id, title string) {
	f.t.Helper()
	s, err := store.Open(context.Background(), dataDir, store.OpenOptions{Lock: store.LockOptions{Mode: store.LockExclusive, Command: "hostile setup"}})
	if err != nil {
		f.t.Fatal(err)
	}
	defer s.Close()
	if err := s.Rename(id, title); err != nil {
		f.t.Fatal(err)
	}
}

func archiveCases() []hcase {
	logName := func(f *fx) string { return "conversations/" + filepath.Base(f.vars["basic"]) + "/x1.v4.jsonl" }
	return append(tarHeaderCases(), []hcase{
		{
			name: "archive entry with an absolute path: import refuses it",
			setup: func(f *fx) []string {
				return []string{"import", f.evil(regEntry("/etc/cron.d/evil", []byte("* * * * * root true\n")))}
			},
			code:   1,
			stderr: []string{`{archive}: entry 2 "/etc/cron.d/evil" (tar byte 1024): refused: absolute path; nothing was imported`},
		},
		{
			name: "archive entry with dot-dot: restore refuses it, writes no target",
			setup: func(f *fx) []string {
				return []string{"restore", f.evil(regEntry("conversations/../../escape.v4.jsonl", []byte("x\n"))), "--to", f.path("restored")}
			},
			code:   1,
			stderr: []string{`{archive}: entry 2 "conversations/../../escape.v4.jsonl" (tar byte 1024): refused: parent directory reference ".."`},
		},
		{
			name: "archive symbolic link entry: backup verify refuses it",
			setup: func(f *fx) []string {
				e := tarEntry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: logName(f), Linkname: "/etc/passwd"}}
				return []string{"backup", "verify", f.evil(e)}
			},
			code:   1,
			stderr: []string{`{archive}: entry 2 "conversations/`, `/x1.v4.jsonl" (tar byte 1024): refused: symbolic link (only regular files are allowed)`},
		},
		{
			name: "archive hard link entry: import refuses it",
			setup: func(f *fx) []string {
				e := tarEntry{hdr: tar.Header{Typeflag: tar.TypeLink, Name: logName(f), Linkname: "conversations/" + filepath.Base(f.vars["basic"]) + "/metadata.v4.jsonl"}}
				return []string{"import", f.evil(e)}
			},
			code:   1,
			stderr: []string{`{archive}: entry 2 "conversations/`, `/x1.v4.jsonl" (tar byte 1024): refused: hard link (only regular files are allowed)`, "nothing was imported"},
		},
		{
			name: "archive character device entry: restore refuses it, writes no target",
			setup: func(f *fx) []string {
				e := tarEntry{hdr: tar.Header{Typeflag: tar.TypeChar, Name: logName(f), Devmajor: 1, Devminor: 5, Mode: 0o666}}
				return []string{"restore", f.evil(e), "--to", f.path("restored")}
			},
			code:   1,
			stderr: []string{`{archive}: entry 2 "conversations/`, `/x1.v4.jsonl" (tar byte 1024): refused: character device (only regular files are allowed)`},
		},
		{
			name: "decompression bomb over the free space: import refuses it at its header",
			setup: func(f *fx) []string {
				// An honest bomb: zeros as zstd RLE blocks, 32768 times
				// smaller than they expand to, sized past what import
				// allows: the free space of the data directory's file
				// system less 64 MiB (docs/TRANSFER.md), and at most 1 TiB.
				free := freeBytes(f.t, f.data)
				n := (min(free, 1<<40)+(1<<30))/(128<<10)*(128<<10) + 128<<10
				if n/32768 > 64<<20 {
					f.t.Skipf("the free space (%d bytes) would need a bomb of %d MiB on disk", free, n/32768>>20)
				}
				p := filepath.Join(f.root, "bomb.tar.zst")
				onDisk := writeBomb(f.t, p, "conversations/"+filepath.Base(f.vars["basic"])+"/x1.v4.jsonl", n)
				f.t.Logf("bomb: %d bytes on disk, %d bytes expanded; %d bytes free", onDisk, n, free)
				f.vars["archive"], f.vars["n"] = p, fmt.Sprint(n)
				return []string{"import", p}
			},
			code: 1,
			stderr: []string{`{archive}: entry 1 "conversations/`, `/x1.v4.jsonl" (tar byte 0): refused: extracting the archive up to this entry needs {n} bytes; `,
				" free after the 64 MiB reserve on the file system of {data}; nothing was imported"},
		},
		{
			name: "decompression bomb over the 1 TiB entry limit: restore refuses it at its header",
			setup: func(f *fx) []string {
				p := filepath.Join(f.root, "bomb.tar.zst")
				n := int64(1<<40 + 128<<10)
				writeBomb(f.t, p, "conversations/"+filepath.Base(f.vars["basic"])+"/x1.v4.jsonl", n)
				f.vars["archive"], f.vars["n"] = p, fmt.Sprint(n)
				return []string{"restore", p, "--to", f.path("restored")}
			},
			code:   1,
			stderr: []string{`{archive}: entry 1 "conversations/`, `/x1.v4.jsonl" (tar byte 0): refused: {n} bytes exceeds the limit of 1099511627776 per entry`},
		},
		{
			name: "zeros after the tar trailer: backup verify stops after 1 MiB",
			setup: func(f *fx) []string {
				ents := readTarZst(f.t, f.backupArchive())
				var b bytes.Buffer
				b.Write(tarZst(f.t, ents))
				if err := rleZeros(&b, 256<<20); err != nil {
					f.t.Fatal(err)
				}
				f.vars["archive"] = f.write(filepath.Join(f.root, "trailing.tar.zst"), b.Bytes())
				return []string{"backup", "verify", f.vars["archive"]}
			},
			code:   1,
			stderr: []string{"{archive}: tar byte ", ": more than 1048576 bytes after the end of the tar stream"},
			allow:  []string{"+backups", "+backups/convkit-*.tar.zst", "+backups/convkit-*.tar.zst.json"},
		},
		{
			// The backup's tar stream re-framed into 8 KiB zstd frames (as a
			// big archive is, in 4 MiB frames), then cut in the middle of
			// a frame: the frames before it decode, and the error names
			// the entry being read.
			name: "truncated multi-frame backup archive: backup verify names the entry",
			setup: func(f *fx) []string {
				ents := readTarZst(f.t, f.backupArchive())
				tarBytes := unzstd(f.t, tarZst(f.t, ents))
				var frames [][]byte
				for off := 0; off < len(tarBytes); off += 8 << 10 {
					frames = append(frames, zframe(f.t, tarBytes[off:min(off+8<<10, len(tarBytes))]))
				}
				mid := len(frames) / 2
				cut := append(zjoin(frames[:mid]), frames[mid][:len(frames[mid])/2]...)
				f.vars["archive"] = f.write(filepath.Join(f.root, "cut.tar.zst"), cut)
				return []string{"backup", "verify", f.vars["archive"]}
			},
			code:   1,
			stderr: []string{`{archive}: entry `, ` (tar byte `, `): truncated archive (it ends inside an entry or a frame): unexpected EOF`},
			allow:  []string{"+backups", "+backups/convkit-*.tar.zst", "+backups/convkit-*.tar.zst.json"},
		},
		{
			name: "truncated export archive: import refuses it, writes nothing",
			setup: func(f *fx) []string {
				data, err := os.ReadFile(f.exportBasic())
				if err != nil {
					f.t.Fatal(err)
				}
				f.vars["archive"] = f.write(filepath.Join(f.root, "cut.tar.zst"), data[:len(data)/2])
				return []string{"--data-dir", f.path("other"), "import", f.vars["archive"]}
			},
			code: 1,
			// One zstd frame (convkit writes 4 MiB frames), cut: nothing of
			// it decodes, so there is no entry to name.
			stderr: []string{"{archive}: truncated archive (it ends inside an entry or a frame): unexpected EOF; nothing was imported"},
		},
		{
			name: "export archive with a flipped byte in a log: import refuses it",
			setup: func(f *fx) []string {
				ents := readTarZst(f.t, f.exportBasic())
				for i := range ents {
					if strings.HasSuffix(ents[i].hdr.Name, "/metadata.v4.jsonl") {
						ents[i].body[len(ents[i].body)/2] ^= 0x20
						f.vars["entry"] = ents[i].hdr.Name
					}
				}
				f.rewrite("tampered.tar.zst", ents)
				return []string{"--data-dir", f.path("other"), "import", f.vars["archive"]}
			},
			code:   1,
			stderr: []string{"{archive}: {entry}: SHA-256 ", ", the manifest says ", "; nothing was imported"},
		},
		{
			name: "archive without a manifest: restore refuses it, writes no target",
			setup: func(f *fx) []string {
				ents := readTarZst(f.t, f.backupArchive())
				f.rewrite("nomanifest.tar.zst", ents[:len(ents)-1])
				return []string{"restore", f.vars["archive"], "--to", f.path("restored")}
			},
			code:   1,
			stderr: []string{"{archive}: no MANIFEST.json as the last entry: an incomplete archive, or not a convkit backup"},
			allow:  []string{"+backups", "+backups/convkit-*.tar.zst", "+backups/convkit-*.tar.zst.json"},
		},
		{
			name: "not an archive: import refuses it",
			setup: func(f *fx) []string {
				f.vars["archive"] = f.write(filepath.Join(f.root, "notes.tar.zst"), []byte("PK\x03\x04 this is a zip, not a tar.zst\n"))
				return []string{"import", f.vars["archive"]}
			},
			code:   1,
			stderr: []string{"{archive}: damaged archive: invalid input: magic number mismatch; nothing was imported"},
		},
		{
			name: "import of a conversation that diverged here: refused, nothing written",
			setup: func(f *fx) []string {
				// Two copies of the store rename the same conversation
				// differently: neither log is a prefix of the other.
				other := filepath.Join(f.root, "other")
				copyTree(f.t, f.data, other)
				rename(f, other, f.vars["basic.id"], "Renamed over there")
				p := filepath.Join(f.root, "there.tar.zst")
				f.vars["archive"] = p
				r := f.run("--data-dir", other, "export", f.vars["basic.id"], "--to", p)
				if r.code != 0 {
					f.t.Fatalf("setup export: %d %s", r.code, r.stderr)
				}
				rename(f, f.data, f.vars["basic.id"], "Renamed here")
				return []string{"import", p}
			},
			code:   1,
			stdout: []string{"CONFLICT {basic.id}: metadata.v4.jsonl differs at byte "},
			stderr: []string{"conversations in the archive diverged from the store's copies: 1 conversation(s); the first: {basic.id}: metadata.v4.jsonl differs at byte ", "nothing was imported",
				"convkit: hint: --on-conflict replace moves the store's copy aside"},
			allow: []string{lockRecord},
		},
		{
			name: "backup archive with a flipped byte: backup verify finds it",
			setup: func(f *fx) []string {
				ents := readTarZst(f.t, f.backupArchive())
				for i := range ents {
					if strings.HasSuffix(ents[i].hdr.Name, "/metadata.v4.jsonl") && f.vars["entry"] == "" {
						ents[i].body[len(ents[i].body)/2] ^= 0x01
						f.vars["entry"] = ents[i].hdr.Name
					}
				}
				f.rewrite("flipped.tar.zst", ents)
				return []string{"backup", "verify", f.vars["archive"]}
			},
			code:   1,
			stdout: []string{"MISMATCH {entry}: ", "SHA-256"},
			stderr: []string{"{archive} does not match its manifest (", "mismatch(es))"},
			allow:  []string{"+backups", "+backups/convkit-*.tar.zst", "+backups/convkit-*.tar.zst.json"},
		},
	}...)
}
