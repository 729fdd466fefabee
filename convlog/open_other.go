//go:build !unix

package convlog

// openFlags: see open_unix.go.
const openFlags = 0
