//go:build linux

package index

import "syscall"

// ReadOnlyFS reports whether dir is on a file system mounted read-only,
// where no process can change a file.
func ReadOnlyFS(dir string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false
	}
	const stRdonly = 0x1 // ST_RDONLY in statfs(2)'s f_flags
	return st.Flags&stRdonly != 0
}
