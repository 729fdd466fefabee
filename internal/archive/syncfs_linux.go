package archive

import (
	"os"

	"golang.org/x/sys/unix"
)

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
