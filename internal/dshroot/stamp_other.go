//go:build !unix

package dshroot

import "os"

func stampOf(fi os.FileInfo) dirStamp {
	return dirStamp{mtime: fi.ModTime().UnixNano(), size: fi.Size()}
}
