//go:build !linux && !darwin

package upgrade

import "os"

// identityOf has only the size and modification time where the platform's
// stat gives no device, inode and change time.
func identityOf(fi os.FileInfo) fileIdentity {
	return fileIdentity{size: fi.Size(), mtime: fi.ModTime().UnixNano()}
}
