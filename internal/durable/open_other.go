//go:build !unix

package durable

// See open_unix.go; here the callers' Lstat checks and checkRegular remain.
const (
	NoFollowFlags = 0
	InputFlags    = 0
	DirFlag       = 0
)

func isLoop(error) bool { return false }
