package hostile

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Hostile tar headers: PAX records that rename an entry, PAX global
// headers, GNU long names, base-256 sizes and every sparse format. Where
// the case is about what tar writes, the archive comes from GNU tar;
// base-256 sizes are hand-written headers.

// tarSource is a tree outside the case's root for tar to read: the basic
// conversation's conversation log (a good entry) and a 10 GiB sparse
// session log that is one hole. It is outside the root so that the
// snapshot never reads 10 GiB of zeros.
type tarSource struct {
	dir, good, sparse string // good and sparse are names under dir
}

func (f *fx) tarSource() tarSource {
	f.t.Helper()
	if _, err := exec.LookPath("tar"); err != nil {
		f.t.Skip("tar is not installed (.ci/run installs it)")
	}
	src := tarSource{dir: f.t.TempDir(),
		good:   "conversations/" + filepath.Base(f.vars["basic"]) + "/metadata.v4.jsonl",
		sparse: "conversations/hostile-0001/s1.v4.jsonl"}
	copyFile(f.t, filepath.Join(f.vars["basic"], "metadata.v4.jsonl"), filepath.Join(src.dir, src.good))
	p := filepath.Join(src.dir, src.sparse)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Truncate(p, 10<<30); err != nil {
		f.t.Skipf("no 10 GiB sparse file here: %v", err)
	}
	f.vars["good"], f.vars["sparse"] = src.good, src.sparse
	return src
}

// gnuTar runs GNU tar in dir with args (names last) and returns the tar
// stream it writes.
func (f *fx) gnuTar(dir string, args ...string) []byte {
	f.t.Helper()
	full := append([]string{"-C", dir, "--owner=0", "--group=0", "--numeric-owner", "--mtime=@1790000000", "-cf", "-"}, args...)
	cmd := exec.Command("tar", full...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		f.t.Fatalf("tar %s: %v\n%s", strings.Join(full, " "), err, stderr.String())
	}
	return out
}

// tarLayout walks a tar stream's headers as they are on disk and returns
// the offset of each entry's first header (a PAX extended header or a GNU
// long name belongs to the entry it precedes; a PAX global header is an
// entry of its own) and the offset of the end-of-archive blocks.
func tarLayout(t testing.TB, b []byte) (starts []int64, end int64) {
	t.Helper()
	off, pending := int64(0), int64(-1)
	for off+512 <= int64(len(b)) {
		h := b[off : off+512]
		if bytes.Equal(h, make([]byte, 512)) {
			return starts, off
		}
		size := tarSize(h)
		if pending < 0 {
			pending = off
		}
		next := off + 512 + (size+511)/512*512
		switch h[156] {
		case 'x', 'L', 'K':
		case 'S':
			// The sparse map's extension blocks follow the header.
			for ext, at := h[482], off+512; ext != 0; at += 512 {
				ext = b[at+504]
				next += 512
			}
			fallthrough
		default:
			starts, pending = append(starts, pending), -1
		}
		off = next
	}
	t.Fatalf("no end-of-archive blocks in %d bytes of tar", len(b))
	return nil, 0
}

// tarSize reads a header's size field: octal, or GNU base-256.
func tarSize(h []byte) int64 {
	f := h[124:136]
	if f[0]&0x80 != 0 {
		var v int64
		for i, c := range f {
			if i == 0 {
				c &= 0x7f
			}
			v = v<<8 | int64(c)
		}
		return v
	}
	var v int64
	for _, c := range f {
		if c >= '0' && c <= '7' {
			v = v*8 + int64(c-'0')
		}
	}
	return v
}

// tarCat joins tar streams into one: each cut at its end-of-archive
// blocks, one pair of them at the end. It returns the stream and the
// offset of the first entry of each part.
func tarCat(t testing.TB, parts ...[]byte) ([]byte, []int64) {
	t.Helper()
	var out bytes.Buffer
	var firsts []int64
	for _, p := range parts {
		starts, end := tarLayout(t, p)
		firsts = append(firsts, int64(out.Len())+starts[0])
		out.Write(p[:end])
	}
	out.Write(make([]byte, 1024))
	return out.Bytes(), firsts
}

// header512 is a hand-written POSIX (ustar) or GNU header block.
func header512(name string, typ byte, size int64, gnu bool) []byte {
	b := make([]byte, 512)
	copy(b[0:100], name)
	copy(b[100:108], "0000600\x00")
	copy(b[108:116], "0000000\x00")
	copy(b[116:124], "0000000\x00")
	copy(b[124:136], fmt.Sprintf("%011o\x00", size))
	copy(b[136:148], "15254235600\x00")
	b[156] = typ
	if gnu {
		copy(b[257:265], "ustar  \x00")
	} else {
		copy(b[257:265], "ustar\x0000")
	}
	return tarChecksum(b)
}

// base256Size writes v into a header's size field as GNU base-256.
func base256Size(b []byte, v int64) []byte {
	f := b[124:136]
	for i := len(f) - 1; i >= 0; i-- {
		f[i] = byte(v)
		v >>= 8
	}
	f[0] |= 0x80
	return tarChecksum(b)
}

func tarChecksum(b []byte) []byte {
	copy(b[148:156], "        ")
	sum := 0
	for _, c := range b {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// archiveOf writes a tar stream, zstd-compressed, as root/name and
// records it as {archive}, and at, the tar offset of the hostile entry,
// as {at}.
func (f *fx) archiveOf(name string, tarBytes []byte, at int64) string {
	p := f.write(filepath.Join(f.root, name), zframe(f.t, tarBytes))
	f.vars["archive"], f.vars["at"] = p, fmt.Sprint(at)
	return p
}

// goodThen is a tar stream of the good entry followed by the entries of
// hostile (a tar stream), with the offset of hostile's first entry.
func (f *fx) goodThen(src tarSource, hostile []byte) ([]byte, int64) {
	good := f.gnuTar(src.dir, "--format=pax", src.good)
	b, firsts := tarCat(f.t, good, hostile)
	return b, firsts[1]
}

// goodThenHeader is the good entry followed by one hand-written header
// (whose size need not be walkable) and the end-of-archive blocks.
func (f *fx) goodThenHeader(src tarSource, hdr []byte) ([]byte, int64) {
	good := f.gnuTar(src.dir, "--format=pax", src.good)
	_, end := tarLayout(f.t, good)
	b := append(bytes.Clone(good[:end]), hdr...)
	return append(b, make([]byte, 1024)...), end
}

func tarHeaderCases() []hcase {
	sparseCase := func(name, opts, cmd string, want string) hcase {
		c := hcase{
			name: name,
			setup: func(f *fx) []string {
				src := f.tarSource()
				b, at := f.goodThen(src, f.gnuTar(src.dir, append(strings.Fields(opts), "--sparse", src.sparse)...))
				if n := len(zframe(f.t, b)); n > 64<<10 {
					f.t.Fatalf("tar wrote %d compressed bytes: not sparse", n)
				}
				p := f.archiveOf("sparse.tar.zst", b, at)
				switch cmd {
				case "import":
					return []string{"import", p}
				case "restore":
					return []string{"restore", p, "--to", f.path("restored")}
				}
				return []string{"backup", "verify", p}
			},
			code: 1,
			stderr: []string{`{archive}: entry 2 "{sparse}" (tar byte {at}): refused: sparse file (` + want +
				`, declaring 10737418240 bytes): sparse entries are never extracted`},
		}
		if cmd == "import" {
			c.stderr = append(c.stderr, "; nothing was imported")
		}
		return c
	}
	return []hcase{
		sparseCase("PAX sparse entry of 10 GiB from tar --sparse --format=pax: import refuses it before writing", "--format=pax", "import", "GNU sparse format 1.0 in PAX records"),
		sparseCase("PAX sparse entry of 10 GiB from tar --sparse --format=pax: restore refuses it, writes no target", "--format=pax", "restore", "GNU sparse format 1.0 in PAX records"),
		sparseCase("PAX sparse entry of 10 GiB from tar --sparse --format=pax: backup verify refuses it", "--format=pax", "verify", "GNU sparse format 1.0 in PAX records"),
		sparseCase("PAX sparse 0.0 entry from tar: import refuses it before writing", "--format=pax --sparse-version=0.0", "import", "GNU sparse format 0.x in PAX records"),
		sparseCase("PAX sparse 0.1 entry from tar: backup verify refuses it", "--format=pax --sparse-version=0.1", "verify", "GNU sparse format 0.x in PAX records"),
		sparseCase("GNU old sparse entry from tar --sparse --format=gnu: restore refuses it, writes no target", "--format=gnu", "restore", "GNU old sparse format, type 'S'"),
		{
			name: "PAX path record naming an absolute path, from tar: import refuses it",
			setup: func(f *fx) []string {
				src := f.tarSource()
				b, at := f.goodThen(src, f.gnuTar(src.dir, "--format=pax", "--pax-option=path:=/etc/cron.d/evil", src.good))
				return []string{"import", f.archiveOf("pathrec.tar.zst", b, at)}
			},
			code: 1,
			stderr: []string{`{archive}: entry 2 "/etc/cron.d/evil" (tar byte {at}): refused: absolute path (the name comes from a PAX path record)`,
				"; nothing was imported"},
		},
		{
			name: "PAX path record naming a parent directory, from tar: restore refuses it, writes no target",
			setup: func(f *fx) []string {
				src := f.tarSource()
				b, at := f.goodThen(src, f.gnuTar(src.dir, "--format=pax", "--pax-option=path:=../../escape.v4.jsonl", src.good))
				return []string{"restore", f.archiveOf("pathrec.tar.zst", b, at), "--to", f.path("restored")}
			},
			code:   1,
			stderr: []string{`{archive}: entry 2 "../../escape.v4.jsonl" (tar byte {at}): refused: parent directory reference ".." (the name comes from a PAX path record)`},
		},
		{
			name: "PAX path record of dot-dot alone: backup verify refuses it",
			setup: func(f *fx) []string {
				src := f.tarSource()
				b, at := f.goodThen(src, f.gnuTar(src.dir, "--format=pax", "--pax-option=path:=..", src.good))
				return []string{"backup", "verify", f.archiveOf("pathrec.tar.zst", b, at)}
			},
			code:   1,
			stderr: []string{`{archive}: entry 2 ".." (tar byte {at}): refused: parent directory reference ".." (the name comes from a PAX path record)`},
		},
		{
			name: "PAX global header from tar: import refuses it",
			setup: func(f *fx) []string {
				src := f.tarSource()
				b := f.gnuTar(src.dir, "--format=pax", "--pax-option=globexthdr.name=pax_global_header,comment=convkit", src.good)
				return []string{"import", f.archiveOf("global.tar.zst", b, 0)}
			},
			code:   1,
			stderr: []string{`{archive}: entry 1 "pax_global_header" (tar byte 0): refused: PAX global header (only regular files are allowed); nothing was imported`},
		},
		{
			name: "GNU long name with dot-dot from tar: restore refuses it, writes no target",
			setup: func(f *fx) []string {
				src := f.tarSource()
				long := "conversations/" + strings.Repeat("../", 40) + "etc/cron.d/evil"
				f.vars["long"] = long
				b, at := f.goodThen(src, f.gnuTar(src.dir, "--format=gnu", "-P", "--transform=s,.*,"+long+",", src.good))
				return []string{"restore", f.archiveOf("longname.tar.zst", b, at), "--to", f.path("restored")}
			},
			code:   1,
			stderr: []string{`{archive}: entry 2 "{long}" (tar byte {at}): refused: parent directory reference ".."`},
		},
		{
			name: "base-256 size of 1 EiB: restore refuses it at its header",
			setup: func(f *fx) []string {
				src := f.tarSource()
				hdr := base256Size(header512("conversations/hostile-0001/s1.v4.jsonl", '0', 0, true), 1<<60)
				b, at := f.goodThenHeader(src, hdr)
				return []string{"restore", f.archiveOf("base256.tar.zst", b, at), "--to", f.path("restored")}
			},
			code:   1,
			stderr: []string{`{archive}: entry 2 "conversations/hostile-0001/s1.v4.jsonl" (tar byte {at}): refused: 1152921504606846976 bytes exceeds the limit of 1099511627776 per entry`},
		},
		{
			name: "negative base-256 size: backup verify reports the damaged header",
			setup: func(f *fx) []string {
				src := f.tarSource()
				hdr := base256Size(header512("conversations/hostile-0001/s1.v4.jsonl", '0', 0, true), -1)
				b, at := f.goodThenHeader(src, hdr)
				return []string{"backup", "verify", f.archiveOf("base256.tar.zst", b, at)}
			},
			code:   1,
			stderr: []string{`{archive}: entry 2 (tar byte {at}): damaged archive (an unreadable tar header): archive/tar: invalid tar header`},
		},
		{
			name: "base-256 size over the free space of the work directory: backup verify refuses it at its header",
			setup: func(f *fx) []string {
				// $TMPDIR, where verify extracts, on an 80 MiB tmpfs: 16 MiB
				// are free after the 64 MiB reserve.
				if err := mountTmpfs(f.t, f.tmp, 80<<20); err != nil {
					f.t.Skipf("needs a small file system: %v", err)
				}
				src := f.tarSource()
				hdr := base256Size(header512("conversations/hostile-0001/s1.v4.jsonl", '0', 0, true), 100<<20)
				b, at := f.goodThenHeader(src, hdr)
				fi, err := os.Stat(filepath.Join(src.dir, src.good))
				if err != nil {
					f.t.Fatal(err)
				}
				f.vars["need"] = fmt.Sprint((fi.Size()+4095)/4096*4096 + 100<<20)
				return []string{"backup", "verify", f.archiveOf("base256.tar.zst", b, at)}
			},
			code: 1,
			stderr: []string{`{archive}: entry 2 "conversations/hostile-0001/s1.v4.jsonl" (tar byte {at}): refused: ` +
				`extracting the archive up to this entry needs {need} bytes; 16777216 free after the 64 MiB reserve on the file system of {tmp}`},
		},
	}
}
