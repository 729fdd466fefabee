package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Hand-written tar headers: the fields a hostile tool controls, with no
// encoder in between to normalise them.

// ustar returns one 512-byte header block: name, type flag and an octal
// size, in the POSIX layout (magic "ustar\0", version "00") or GNU's
// ("ustar  \0").
func ustar(name string, typ byte, size int64, gnu bool) []byte {
	b := make([]byte, blockSize)
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
		copy(b[257:263], "ustar\x00")
		copy(b[263:265], "00")
	}
	if size >= 1<<33 { // 11 octal digits hold less
		return base256(b, size)
	}
	return checksum(b)
}

// checksum fills in a header block's checksum field.
func checksum(b []byte) []byte {
	copy(b[148:156], "        ")
	sum := 0
	for _, c := range b {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	return b
}

// base256 writes v into a header's size field in GNU's base-256 form (the
// high bit of the first byte set, big-endian two's complement), as GNU tar
// does for sizes of 8 GiB and more.
func base256(b []byte, v int64) []byte {
	f := b[124:136]
	for i := len(f) - 1; i >= 0; i-- {
		f[i] = byte(v)
		v >>= 8
	}
	f[0] |= 0x80
	return checksum(b)
}

// paxRecords encodes PAX extended header records ("%d key=value\n", the
// length counting itself).
func paxRecords(kv ...string) []byte {
	var out bytes.Buffer
	for i := 0; i+1 < len(kv); i += 2 {
		rec := " " + kv[i] + "=" + kv[i+1] + "\n"
		n := len(rec) + 1
		for len(fmt.Sprint(n))+len(rec) != n {
			n++
		}
		fmt.Fprintf(&out, "%d%s", n, rec)
	}
	return out.Bytes()
}

// member is a header block followed by its data, padded to a block.
func member(hdr, data []byte) []byte {
	out := append(bytes.Clone(hdr), data...)
	if r := len(data) % blockSize; r != 0 {
		out = append(out, make([]byte, blockSize-r)...)
	}
	return out
}

// rawTar joins members and the end-of-archive blocks, inside zstd.
func rawTar(t *testing.T, members ...[]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, m := range members {
		b.Write(m)
	}
	b.Write(make([]byte, 2*blockSize))
	return zstdOf(t, b.Bytes())
}

// extractRefused extracts data into a fresh directory, which must hold
// nothing but logA afterwards (the good entry before the hostile one), and
// returns the error, which must be an *Error.
func extractRefused(t *testing.T, data []byte) *Error {
	t.Helper()
	dir := t.TempDir()
	_, err := Extract(context.Background(), bytes.NewReader(data), dir, ExtractOptions{ReaderOptions: ReaderOptions{Archive: "a.tar.zst"}})
	if err == nil {
		t.Fatal("accepted")
	}
	t.Log(err)
	var ae *Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %T %v is not an *archive.Error", err, err)
	}
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && p != filepath.Join(dir, logA) {
			t.Errorf("wrote %s", p)
		}
		return nil
	})
	return ae
}

func TestHostileTarHeaders(t *testing.T) {
	longName := "conversations/" + strings.Repeat("../", 40) + "etc/cron.d/evil.v4.jsonl"
	good := member(ustar(logA, '0', 3, false), []byte("{}\n"))
	cases := []struct {
		name    string
		data    []byte
		refused bool
		want    string
	}{
		{"PAX path record outside", rawTar(t, good,
			member(ustar("PaxHeaders/x", 'x', int64(len(paxRecords("path", "/etc/cron.d/evil"))), false), paxRecords("path", "/etc/cron.d/evil")),
			member(ustar(logB, '0', 3, false), []byte("x\n\n"))),
			true, `entry 2 "/etc/cron.d/evil" (tar byte 1024): refused: absolute path (the name comes from a PAX path record)`},
		{"PAX path record dot-dot", rawTar(t, good,
			member(ustar("PaxHeaders/x", 'x', int64(len(paxRecords("path", ".."))), false), paxRecords("path", "..")),
			member(ustar(logB, '0', 3, false), []byte("x\n\n"))),
			true, `entry 2 ".." (tar byte 1024): refused: parent directory reference ".." (the name comes from a PAX path record)`},
		{"PAX global header", rawTar(t,
			member(ustar("pax_global_header", 'g', int64(len(paxRecords("comment", "x"))), false), paxRecords("comment", "x")), good),
			true, `entry 1 "pax_global_header" (tar byte 0): refused: PAX global header (only regular files are allowed)`},
		{"PAX global header with a path record", rawTar(t,
			member(ustar("pax_global_header", 'g', int64(len(paxRecords("path", "../x"))), false), paxRecords("path", "../x")), good),
			true, `entry 1 "../x" (tar byte 0): refused: PAX global header (only regular files are allowed)`},
		{"GNU long name with dot-dot", rawTar(t, good,
			member(ustar("././@LongLink", 'L', int64(len(longName)+1), true), []byte(longName+"\x00")),
			member(ustar("conversations/x", '0', 3, true), []byte("x\n\n"))),
			true, fmt.Sprintf(`entry 2 %q (tar byte 1024): refused: parent directory reference ".."`, longName)},
		{"base-256 size over the entry limit", rawTar(t, good, base256(ustar(logB, '0', 0, true), 1<<60)),
			true, fmt.Sprintf(`entry 2 %q (tar byte 1024): refused: %d bytes exceeds the limit of %d per entry`, logB, int64(1)<<60, defaultLimits.MaxEntryBytes)},
		{"negative base-256 size", rawTar(t, good, base256(ustar(logB, '0', 0, true), -1)),
			false, `entry 2 (tar byte 1024): damaged archive (an unreadable tar header): archive/tar: invalid tar header`},
		{"old GNU sparse header", rawTar(t, good, sparseS(logB, 10<<30)),
			true, fmt.Sprintf(`entry 2 %q (tar byte 1024): refused: sparse file (GNU old sparse format, type 'S', declaring 10737418240 bytes)`, logB)},
		{"PAX sparse 0.1 records", rawTar(t, good,
			member(ustar("PaxHeaders/x", 'x', int64(len(paxRecords("GNU.sparse.size", "10737418240", "GNU.sparse.numblocks", "1", "GNU.sparse.map", "10737418240,0"))), false),
				paxRecords("GNU.sparse.size", "10737418240", "GNU.sparse.numblocks", "1", "GNU.sparse.map", "10737418240,0")),
			member(ustar(logB, '0', 0, false), nil)),
			true, fmt.Sprintf(`entry 2 %q (tar byte 1024): refused: sparse file (GNU sparse format 0.x in PAX records, declaring 10737418240 bytes)`, logB)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ae := extractRefused(t, c.data)
			if ae.Refused != c.refused {
				t.Errorf("Refused %v, want %v", ae.Refused, c.refused)
			}
			if !strings.Contains(ae.Error(), "a.tar.zst: "+c.want) {
				t.Errorf("error %q does not say %q", ae.Error(), c.want)
			}
		})
	}
}

// A base-256 size that is small is read as what it says.
func TestBase256SizeIsRead(t *testing.T) {
	data := rawTar(t, member(base256(ustar(logA, '0', 0, true), 3), []byte("{}\n")))
	ents, err := Extract(context.Background(), bytes.NewReader(data), t.TempDir(), ExtractOptions{})
	if err != nil || ents.Len() != 1 || ents.Last().Size != 3 {
		t.Fatalf("%v %+v", err, ents)
	}
}

// sparseS is an old GNU sparse header (type 'S') of a file of realsize
// bytes that is one hole: no data blocks.
func sparseS(name string, realsize int64) []byte {
	b := ustar(name, 'S', 0, true)
	// The sparse map at 386: 4 entries of offset[12] numbytes[12]; one
	// entry at the end, 0 bytes long. isextended at 482, realsize at 483.
	copy(b[386:398], fmt.Sprintf("%012o", realsize))
	copy(b[398:410], fmt.Sprintf("%012o", 0))
	copy(b[483:495], fmt.Sprintf("%012o", realsize))
	return checksum(b)
}

// TestSparseFromTarIsRefused: GNU tar's sparse archives of a 10 GiB file
// that is a hole with one block of data, in each sparse format it writes,
// are refused at the entry's header: nothing is written.
func TestSparseFromTarIsRefused(t *testing.T) {
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("tar not installed")
	}
	src := t.TempDir()
	p := filepath.Join(src, logB)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fh.WriteAt([]byte("{}\n"), 5<<30); err == nil {
		err = fh.Truncate(10 << 30)
	}
	fh.Close()
	if err != nil {
		t.Skipf("no sparse file here: %v", err)
	}
	for _, c := range []struct{ name, want string }{
		{"--format=gnu", "GNU old sparse format, type 'S'"},
		{"--format=pax --sparse-version=0.0", "GNU sparse format 0.x in PAX records"},
		{"--format=pax --sparse-version=0.1", "GNU sparse format 0.x in PAX records"},
		{"--format=pax", "GNU sparse format 1.0 in PAX records"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"-C", src, "--sparse", "--owner=0", "--group=0", "--numeric-owner", "-cf", "-"}, strings.Fields(c.name)...)
			out, err := exec.Command("tar", append(args, logB)...).Output()
			if err != nil {
				t.Fatalf("tar: %v", err)
			}
			if len(out) > 64<<10 {
				t.Fatalf("tar wrote %d bytes: not a sparse archive", len(out))
			}
			ae := extractRefused(t, zstdOf(t, out))
			want := fmt.Sprintf(`a.tar.zst: entry 1 %q (tar byte 0): refused: sparse file (%s, declaring 10737418240 bytes): sparse entries are never extracted`, logB, c.want)
			if !ae.Refused || ae.Error() != want {
				t.Errorf("error %q,\nwant %q", ae.Error(), want)
			}
		})
	}
}

// TestFreeSpaceIsChecked: an entry whose declared size does not fit in the
// free space less the reserve is refused at its header, with both figures.
func TestFreeSpaceIsChecked(t *testing.T) {
	dir := t.TempDir()
	free, block, ok := FreeSpace(dir)
	if !ok {
		t.Skip("free space is not known on this system")
	}
	size := free - freeReserve + 1<<30 // a margin for others writing meanwhile
	if size > defaultLimits.MaxEntryBytes {
		t.Skipf("%d bytes free: over the entry limit", free)
	}
	size = max(size, 1<<20)
	data := rawTar(t, member(ustar(logA, '0', 3, false), []byte("{}\n")), ustar(logB, '0', size, false))
	_, err := Extract(context.Background(), bytes.NewReader(data), dir, ExtractOptions{ReaderOptions: ReaderOptions{Archive: "a.tar.zst"}})
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("%v, want a refusal", err)
	}
	need := block + (size+block-1)/block*block
	want := fmt.Sprintf(`a.tar.zst: entry 2 %q (tar byte 1024): refused: extracting the archive up to this entry needs %d bytes; `, logB, need)
	if !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), " free after the 64 MiB reserve on the file system of "+dir) {
		t.Fatalf("error %q, want %q...", err, want)
	}
	if _, err := os.Lstat(filepath.Join(dir, logB)); err == nil {
		t.Fatal("the refused entry was created")
	}
}

// TestFreeSpaceOnSmallFileSystem: on a file system of 80 MiB (a tmpfs, as
// root), 16 MiB are free after the reserve: 10 MiB fit, 20 MiB do not.
func TestFreeSpaceOnSmallFileSystem(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, "size=80m,mode=0700"); err != nil {
		t.Skipf("mount a tmpfs: %v", err)
	}
	defer syscall.Unmount(dir, syscall.MNT_DETACH)
	ten := bytes.Repeat([]byte("x"), 10<<20)
	ok := rawTar(t, member(ustar(logA, '0', int64(len(ten)), false), ten))
	x := filepath.Join(dir, "a")
	os.Mkdir(x, 0o700)
	if _, err := Extract(context.Background(), bytes.NewReader(ok), x, ExtractOptions{}); err != nil {
		t.Fatalf("10 MiB on 16 MiB: %v", err)
	}
	os.RemoveAll(x)
	x = filepath.Join(dir, "b")
	os.Mkdir(x, 0o700)
	bad := rawTar(t, member(ustar(logA, '0', int64(len(ten)), false), ten), member(ustar(logB, '0', int64(len(ten)), false), ten))
	_, err := Extract(context.Background(), bytes.NewReader(bad), x, ExtractOptions{ReaderOptions: ReaderOptions{Archive: "b.tar.zst"}})
	want := fmt.Sprintf(`b.tar.zst: entry 2 %q (tar byte %d): refused: extracting the archive up to this entry needs 20971520 bytes; 16777216 free after the 64 MiB reserve on the file system of %s`,
		logB, 512+10<<20, x)
	if err == nil || err.Error() != want {
		t.Fatalf("error %v,\nwant %s", err, want)
	}
	if _, err := os.Lstat(filepath.Join(x, logB)); err == nil {
		t.Fatal("the refused entry was created")
	}
}
