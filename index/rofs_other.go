//go:build !linux

package index

// ReadOnlyFS is not known here: an index that cannot be read in place is
// read from a private snapshot.
func ReadOnlyFS(dir string) bool { return false }
