//go:build !linux

package durable

import "os"

// DataSync is f.Sync where fdatasync is not at hand.
func DataSync(f *os.File) error { return f.Sync() }
