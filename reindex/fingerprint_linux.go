package reindex

import (
	"io/fs"
	"syscall"
)

// statIdentity is a file's change time (ns), device and inode.
func statIdentity(fi fs.FileInfo) (ctime int64, dev, ino uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, 0, false
	}
	return int64(st.Ctim.Sec)*1e9 + int64(st.Ctim.Nsec), uint64(st.Dev), st.Ino, true
}
