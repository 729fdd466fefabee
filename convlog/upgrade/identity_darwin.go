//go:build darwin

package upgrade

import (
	"os"
	"syscall"
)

func identityOf(fi os.FileInfo) fileIdentity {
	id := fileIdentity{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino = uint64(st.Dev), st.Ino
		id.mtime = st.Mtimespec.Sec*1e9 + st.Mtimespec.Nsec
		id.ctime = st.Ctimespec.Sec*1e9 + st.Ctimespec.Nsec
	}
	return id
}
