package cli

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/convkit/convkit/convlog"
	"github.com/convkit/convkit/internal/archive"
	"github.com/convkit/convkit/internal/durable"
)

const stdinName = "<stdin>"

// spaceReserve is left free where stdin is copied.
const spaceReserve = 64 << 20

// stdinCopyLimit bounds the copy of stdin (a variable for the tests).
var stdinCopyLimit int64 = 1 << 30

// spooledStdin is a copy of stdin in an unlinked temporary file, because
// reading a log needs random access a pipe lacks; nothing is left behind
// however the process ends.
type spooledStdin struct {
	f    *os.File
	size int64
}

// spoolStdin copies r, once its first bytes say a log begins, to a private
// file under $TMPDIR (unlinked at once), bounded by stdinCopyLimit and the
// free space less spaceReserve.
func spoolStdin(ctx context.Context, r io.Reader) (*spooledStdin, error) {
	r = &ctxReader{ctx: ctx, r: r}
	head, err := stdinHead(r, convlog.DefaultMaxLineBytes)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "convkit-stdin-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "stdin")
	if err := durable.PrivateDir(dir); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	f, err := durable.CreateExcl(path)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	limit, why := stdinCopyLimit, fmt.Sprintf("the most inspect - copies (%d GiB)", stdinCopyLimit>>30)
	if stdinCopyLimit < 1<<30 {
		why = "the most inspect - copies"
	}
	if free, _, bounded := archive.FreeSpace(dir); bounded && free-spaceReserve < limit {
		limit, why = max(free-spaceReserve, 0), fmt.Sprintf("the free space in %s less 64 MiB", filepath.Dir(dir))
	}
	rmErr := os.Remove(path)
	if err := os.Remove(dir); rmErr == nil {
		rmErr = err
	}
	if rmErr != nil {
		f.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("remove the copy of %s: %w", stdinName, rmErr)
	}
	src := io.LimitReader(io.MultiReader(bytes.NewReader(head), r), limit+1)
	n, err := io.Copy(f, src)
	switch {
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("copy %s to a temporary file in %s: %w", stdinName, filepath.Dir(dir), err)
	case n > limit:
		f.Close()
		return nil, withHint(fmt.Errorf("%s holds more than %d bytes, %s", stdinName, limit, why),
			"write it to a file and inspect the file, or point TMPDIR at a larger file system")
	}
	return &spooledStdin{f: f, size: n}, nil
}

// stdinHead reads r up to what decides whether a log begins there (the
// zstd magic, or a header line of at most maxLine bytes), refusing at the
// first byte no header line can hold, and returns the bytes read.
func stdinHead(r io.Reader, maxLine int) ([]byte, error) {
	var magic [4]byte
	binary.LittleEndian.PutUint32(magic[:], convlog.ZstdMagic)
	buf := make([]byte, 0, 64<<10)
	opened := false // the line's first byte other than white space was seen
	for seen := 0; ; {
		if len(buf) == cap(buf) {
			buf = append(make([]byte, 0, min(2*cap(buf), maxLine+1)), buf...)
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) >= len(magic) && bytes.Equal(buf[:len(magic)], magic[:]) {
			return buf, nil
		}
		// Until the magic is ruled out, the bytes may begin a frame.
		for ; seen < len(buf) && (len(buf) >= len(magic) || !bytes.HasPrefix(magic[:], buf)); seen++ {
			switch c := buf[seen]; {
			case c == '\n':
				if _, herr := convlog.ParseHeader(stdinName, buf[:seen], -1); herr != nil {
					return nil, herr
				}
				return buf, nil
			case c == ' ' || c == '\t' || c == '\r':
			case !opened && c != '{', c < 0x20:
				_, herr := convlog.ParseHeader(stdinName, buf[:seen+1], -1)
				return nil, fmt.Errorf("%w (neither a zstd frame nor a log's header line)", herr)
			default:
				opened = true
			}
		}
		if len(buf) > maxLine {
			return nil, fmt.Errorf("%s: line 1: no newline within the limit of %d bytes a line may take: not a log's header line", stdinName, maxLine)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", stdinName, err)
		}
	}
}

func (s *spooledStdin) close() { s.f.Close() }

// ctxReader stops a copy when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
