package inspect

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
)

// StdinName names the log read from stdin.
const StdinName = "<stdin>"

// stdinReserve is left free where stdin is copied.
const stdinReserve = 64 << 20

// stdinCopyLimit bounds the copy of stdin (a variable for the tests).
var stdinCopyLimit int64 = 1 << 30

// TooLargeError is stdin holding more than Stdin copies.
type TooLargeError struct{ msg string }

func (e *TooLargeError) Error() string { return e.msg }

// Stdin copies the log on r, once its first bytes say a log begins, to an
// unlinked file in dir (reading needs random access a pipe lacks).
func Stdin(ctx context.Context, r io.Reader, dir string) (*Target, error) {
	r = &ctxReader{ctx: ctx, r: r}
	head, err := stdinHead(r, convlog.DefaultMaxLineBytes)
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, "convkit-stdin-") // 0600, never through a link
	if err != nil {
		return nil, err
	}
	tmp := filepath.Dir(f.Name())
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("remove the copy of %s: %w", StdinName, err)
	}
	limit, why := stdinCopyLimit, fmt.Sprintf("the most inspect - copies (%d GiB)", stdinCopyLimit>>30)
	if stdinCopyLimit < 1<<30 {
		why = "the most inspect - copies"
	}
	if free, _, bounded := archive.FreeSpace(tmp); bounded && free-stdinReserve < limit {
		limit, why = max(free-stdinReserve, 0), fmt.Sprintf("the free space in %s less 64 MiB", tmp)
	}
	n, err := io.Copy(f, io.LimitReader(io.MultiReader(bytes.NewReader(head), r), limit+1))
	switch {
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("copy %s to a temporary file in %s: %w", StdinName, tmp, err)
	case n > limit:
		f.Close()
		return nil, &TooLargeError{fmt.Sprintf("%s holds more than %d bytes, %s", StdinName, limit, why)}
	}
	return &Target{Path: StdinName, held: f, heldSize: n}, nil
}

// stdinHead reads r until a zstd magic or a header line shows a log begins,
// refusing at the first byte no header line holds; it returns the bytes read.
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
				if _, herr := convlog.ParseHeader(StdinName, buf[:seen], -1); herr != nil {
					return nil, herr
				}
				return buf, nil
			case c == ' ' || c == '\t' || c == '\r':
			case !opened && c != '{', c < 0x20:
				_, herr := convlog.ParseHeader(StdinName, buf[:seen+1], -1)
				return nil, fmt.Errorf("%w (neither a zstd frame nor a log's header line)", herr)
			default:
				opened = true
			}
		}
		if len(buf) > maxLine {
			return nil, fmt.Errorf("%s: line 1: no newline within the limit of %d bytes a line may take: not a log's header line", StdinName, maxLine)
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", StdinName, err)
		}
	}
}

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
