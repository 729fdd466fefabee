//go:build !unix

package durable

// NoFollowFlags: see open_unix.go. Elsewhere the Lstat checks of the
// callers and the descriptor check of checkRegular remain.
const NoFollowFlags = 0

// InputFlags and DirFlag: see open_unix.go.
const (
	InputFlags = 0
	DirFlag    = 0
)

func isLoop(error) bool { return false }
