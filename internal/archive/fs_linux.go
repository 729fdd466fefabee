package archive

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// FreeSpace is the space available to this user on dir's file system and
// its block size.
func FreeSpace(dir string) (free, block int64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, false
	}
	return int64(st.Bavail) * int64(st.Bsize), int64(st.Bsize), true
}

// haveSyncFS: one syncfs(2) makes an extraction durable (see
// ExtractOptions.Sync).
const haveSyncFS = true

// syncFS flushes the file system that holds dir.
func syncFS(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return true, err
	}
	defer f.Close()
	return true, unix.Syncfs(int(f.Fd()))
}
