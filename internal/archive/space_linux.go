//go:build linux

package archive

import "syscall"

// FreeSpace is the space available to this user on dir's file system and
// its block size.
func FreeSpace(dir string) (free, block int64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), int64(st.Bsize), true
}
