//go:build unix

package dshroot

import (
	"os"
	"syscall"
)

func stampOf(fi os.FileInfo) dirStamp {
	s := dirStamp{mtime: fi.ModTime().UnixNano(), size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino, s.nlink = uint64(st.Ino), uint64(st.Nlink)
	}
	return s
}
