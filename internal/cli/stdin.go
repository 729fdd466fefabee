package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/convkit/convkit/durable"
)

// stdinName names stdin in the messages of a command that read a log from
// it ("inspect -").
const stdinName = "<stdin>"

// spaceReserve is left free on the temporary directory's file system when
// stdin is copied there.
const spaceReserve = 64 << 20

// spooledStdin is a copy of stdin in a private temporary file: a log read
// from stdin needs random access (the zstd frame scanner reads frame
// headers ahead, the torn-tail rules need its size), which a pipe does not
// give. Memory stays bounded by one copy buffer; the copy is bounded by
// the file system's free space less spaceReserve.
type spooledStdin struct {
	dir, path string
}

// spoolStdin copies r to a new private file (0600, in a new 0700
// directory under $TMPDIR). Plain and zstd logs alike: the reader tells
// them apart by their first bytes, as it does for any file whose name
// says nothing.
func spoolStdin(ctx context.Context, r io.Reader) (*spooledStdin, error) {
	dir, err := os.MkdirTemp("", "convkit-stdin-")
	if err != nil {
		return nil, err
	}
	s := &spooledStdin{dir: dir, path: filepath.Join(dir, "stdin")}
	if err := durable.PrivateDir(dir); err != nil {
		s.remove()
		return nil, err
	}
	f, err := durable.CreateExcl(s.path)
	if err != nil {
		s.remove()
		return nil, err
	}
	limit, bounded := freeSpace(dir)
	limit -= spaceReserve
	var src io.Reader = r
	if bounded {
		src = io.LimitReader(r, max(limit, 0)+1)
	}
	n, err := io.Copy(f, &ctxReader{ctx: ctx, r: src})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		s.remove()
		return nil, fmt.Errorf("copy %s to %s: %w", stdinName, s.path, err)
	case bounded && n > limit:
		s.remove()
		return nil, withHint(fmt.Errorf("%s holds more than %d bytes, the free space in %s less 64 MiB", stdinName, max(limit, 0), filepath.Dir(dir)),
			"write it to a file and inspect the file, or point TMPDIR at a larger file system")
	}
	return s, nil
}

func (s *spooledStdin) remove() { os.RemoveAll(s.dir) }

// rename makes messages about the copy name stdin instead.
func (s *spooledStdin) rename(msg string) string { return strings.ReplaceAll(msg, s.path, stdinName) }

// renameErr is err, its message naming stdin instead of the copy.
func (s *spooledStdin) renameErr(err error) error {
	if err == nil {
		return nil
	}
	return &renamedError{err: err, msg: s.rename(err.Error())}
}

type renamedError struct {
	err error
	msg string
}

func (e *renamedError) Error() string { return e.msg }
func (e *renamedError) Unwrap() error { return e.err }

// ctxReader stops a copy when ctx is done (an interrupt while stdin is
// read).
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
