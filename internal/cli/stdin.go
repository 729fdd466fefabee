package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

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
// give. The file is removed as soon as it is made, before stdin is read:
// the copy lives as long as its descriptor, and nothing is left behind
// however the process ends (a closed stdout's SIGPIPE, SIGKILL). Memory
// stays bounded by one copy buffer; the copy is bounded by the file
// system's free space less spaceReserve.
type spooledStdin struct {
	f    *os.File
	size int64
}

// spoolStdin copies r to a new private file (0600, made in a new 0700
// directory under $TMPDIR, both removed at once). Plain and zstd logs
// alike: the reader tells them apart by their first bytes, as it does for
// any file whose name says nothing.
func spoolStdin(ctx context.Context, r io.Reader) (*spooledStdin, error) {
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
	limit, bounded := freeSpace(dir)
	limit -= spaceReserve
	rmErr := os.Remove(path)
	if err := os.Remove(dir); rmErr == nil {
		rmErr = err
	}
	if rmErr != nil {
		f.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("remove the copy of %s: %w", stdinName, rmErr)
	}
	var src io.Reader = r
	if bounded {
		src = io.LimitReader(r, max(limit, 0)+1)
	}
	n, err := io.Copy(f, &ctxReader{ctx: ctx, r: src})
	switch {
	case err != nil:
		f.Close()
		return nil, fmt.Errorf("copy %s to a temporary file in %s: %w", stdinName, filepath.Dir(dir), err)
	case bounded && n > limit:
		f.Close()
		return nil, withHint(fmt.Errorf("%s holds more than %d bytes, the free space in %s less 64 MiB", stdinName, max(limit, 0), filepath.Dir(dir)),
			"write it to a file and inspect the file, or point TMPDIR at a larger file system")
	}
	return &spooledStdin{f: f, size: n}, nil
}

// close releases the copy (its space goes with the descriptor).
func (s *spooledStdin) close() { s.f.Close() }

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
