//go:build linux

package upgrade

import (
	"os"
	"syscall"
)

func identityOf(fi os.FileInfo) fileIdentity {
	id := fileIdentity{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), st.Ino
		id.mtime = st.Mtim.Sec*1e9 + st.Mtim.Nsec
		id.ctime = st.Ctim.Sec*1e9 + st.Ctim.Nsec
	}
	return id
}
