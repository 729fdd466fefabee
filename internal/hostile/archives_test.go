package hostile

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

// tarEntry is one entry of a hand-made archive.
type tarEntry struct {
	hdr  tar.Header
	body []byte
}

func regEntry(name string, body []byte) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Size: int64(len(body)), Mode: 0o600}, body: body}
}

// tarZst writes entries as tar inside zstd the way a hostile tool would:
// archive/tar and zstd directly, no checks.
func tarZst(t testing.TB, ents []tarEntry) []byte {
	t.Helper()
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, e := range ents {
		h := e.hdr
		h.ModTime = time.Unix(1790000000, 0)
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatal(err)
		}
		if len(e.body) > 0 {
			if _, err := tw.Write(e.body); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return zframe(t, tb.Bytes())
}

// unzstd decompresses a whole zstd stream.
func unzstd(t testing.TB, b []byte) []byte {
	t.Helper()
	d, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out, err := d.DecodeAll(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readTarZst returns the entries of an archive convkit wrote.
func readTarZst(t testing.TB, p string) []tarEntry {
	t.Helper()
	fh, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	zr, err := zstd.NewReader(fh)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	var out []tarEntry
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
		out = append(out, tarEntry{hdr: *h, body: body})
	}
}

// mustRun runs a command of the setup and fails the case unless it exits
// with code.
func (f *fx) mustRun(code int, args ...string) result {
	f.t.Helper()
	r := f.run(args...)
	if r.code != code {
		f.t.Fatalf("setup: convkit %s: exit %d, want %d\n%s%s", strings.Join(args, " "), r.code, code, r.stdout, r.stderr)
	}
	return r
}

// exportBasic writes an export of the basic conversation to root/out.tar.zst.
func (f *fx) exportBasic() string {
	p := filepath.Join(f.root, "export.tar.zst")
	f.mustRun(0, "export", f.vars["basic.id"], "--to", p)
	return p
}

// backupArchive writes a backup of the data directory into root/backups
// and returns the archive.
func (f *fx) backupArchive() string {
	dir := filepath.Join(f.root, "backups")
	f.mustRun(0, "backup", "--to", dir)
	ms, _ := filepath.Glob(filepath.Join(dir, "convkit-*.tar.zst"))
	if len(ms) != 1 {
		f.t.Fatalf("setup: %d archives in %s", len(ms), dir)
	}
	return ms[0]
}

// rleZeros writes one zstd frame of n zero bytes (n a multiple of 128 KiB)
// made of RLE blocks: 4 bytes per 128 KiB, so a bomb of n bytes costs
// n/32768 bytes on disk and is produced without compressing anything. The
// frame is valid zstd (no checksum, no content size).
func rleZeros(w io.Writer, n int64) error {
	const block = 128 << 10
	// Magic, frame header descriptor 0 (no single segment, no checksum, no
	// content size), window descriptor 2^17 (exponent 7).
	if _, err := w.Write([]byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 7 << 3}); err != nil {
		return err
	}
	buf := make([]byte, 0, 4*4096)
	for left := n / block; left > 0; left-- {
		h := uint32(block<<3 | 1<<1) // RLE block of 128 KiB
		if left == 1 {
			h |= 1 // last block
		}
		var b [4]byte
		binary.LittleEndian.PutUint32(b[:], h)
		b[3] = 0 // the byte repeated
		buf = append(buf, b[:]...)
		if len(buf) == cap(buf) {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	_, err := w.Write(buf)
	return err
}

// writeBomb writes an archive of one regular entry, name, of n zero bytes:
// the tar header in one frame, the zeros as RLE blocks, the tar trailer. It
// returns the archive's size on disk.
func writeBomb(t testing.TB, p, name string, n int64) int64 {
	t.Helper()
	var hb bytes.Buffer
	tw := tar.NewWriter(&hb)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: n, Mode: 0o600, ModTime: time.Unix(1790000000, 0)}); err != nil {
		t.Fatal(err)
	}
	fh, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	_, err = fh.Write(zframe(t, hb.Bytes()))
	if err == nil {
		err = rleZeros(fh, n)
	}
	if err == nil {
		_, err = fh.Write(zframe(t, make([]byte, 1024))) // the tar trailer
	}
	if err != nil {
		t.Fatal(err)
	}
	fi, err := fh.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// freeBytes is the free space of the file system holding dir, as import
// measures it.
func freeBytes(t testing.TB, dir string) int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}
