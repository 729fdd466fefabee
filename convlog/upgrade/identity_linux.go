package upgrade

import (
	"os"
	"syscall"
)

func identityOf(fi os.FileInfo) fileIdentity {
	id := fileIdentity{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.dev, id.ino, id.ctime = uint64(st.Dev), st.Ino, st.Ctim.Nano()
	}
	return id
}
