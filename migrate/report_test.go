package migrate

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"
	"testing"
)

func TestErrorChain(t *testing.T) {
	pathErr := &fs.PathError{Op: "open", Path: "/x", Err: syscall.ENOENT}
	cases := []struct {
		err  error
		want string
	}{
		{errors.New("plain"), "*errors.errorString"},
		{pathErr, "*fs.PathError > syscall.Errno"},
		{fmt.Errorf("reading: %w", pathErr), "*fmt.wrapError > *fs.PathError > syscall.Errno"},
		{errors.Join(pathErr, errors.New("b")), "*errors.joinError (*fs.PathError > syscall.Errno; *errors.errorString)"},
	}
	for _, c := range cases {
		if got := errorChain(c.err); got != c.want {
			t.Errorf("errorChain(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
