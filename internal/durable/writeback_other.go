//go:build !linux

package durable

import "os"

// StartWriteback does nothing here: the fsync that ends a write writes
// every page.
func StartWriteback(f *os.File, off, n int64) {}
