//go:build unix

package migrate

import (
	"os"
	"syscall"
)

// ownFile reports whether the file is the process's user's.
func ownFile(fi os.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}
